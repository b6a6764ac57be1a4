package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/keyset"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// Worklist page sizes (?limit=).
const (
	defaultTaskPage = 50
	maxTaskPage     = 200
	// maxSubjectLen bounds ?assignee= (a token subject).
	maxSubjectLen = 255
)

type taskPage struct {
	Items []process.WorkItem `json:"items"`
	// NextCursor, when present, fetches the next page (?cursor=).
	NextCursor string `json:"nextCursor,omitempty"`
}

// handleWorklist serves GET /v1/tasks: the tasks of the token's tenant the
// caller may see, by due date then id, filtered by ?status=, ?role=,
// ?assignee= (me or a subject) and ?sla=, paged by ?limit= and ?cursor=.
func handleWorklist(store Processes, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := actor(r)
		q, bad := parseTaskQuery(r, a.Subject)
		if len(bad) > 0 {
			names := make([]string, 0, len(bad))
			for name := range bad {
				names = append(names, name)
			}
			slices.Sort(names)
			problem.Write(w, r, problem.Details{Status: http.StatusBadRequest,
				Detail: "invalid query parameters: " + strings.Join(names, ", "), Errors: bad})
			return
		}
		want := q.Limit
		q.Limit++ // one more tells whether a next page exists
		items, err := store.Worklist(r.Context(), a, q)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		page := taskPage{Items: items}
		if len(items) > want {
			page.Items = items[:want]
			last := page.Items[want-1]
			page.NextCursor = encodeTaskCursor(process.Position{DueAt: last.DueAt, ID: last.ID})
		}
		httpjson.Write(w, http.StatusOK, page)
	})
}

// parseTaskQuery reads the worklist's query parameters; bad names each
// parameter that is refused and why.
func parseTaskQuery(r *http.Request, subject string) (process.TaskQuery, map[string]any) {
	values := r.URL.Query()
	bad := map[string]any{}
	get := func(name string) string {
		if len(values[name]) > 1 {
			bad[name] = "must be given at most once"
			return ""
		}
		return values.Get(name)
	}
	oneOf := func(name string, allowed []string) string {
		v := get(name)
		if v != "" && !slices.Contains(allowed, v) {
			bad[name] = "must be one of " + strings.Join(allowed, ", ")
		}
		return v
	}
	q := process.TaskQuery{
		Status: oneOf("status", process.TaskStatuses),
		Role:   oneOf("role", process.AssigneeRoles),
		SLA:    oneOf("sla", process.SLAStates),
		Limit:  defaultTaskPage,
	}
	switch v := get("assignee"); {
	case v == "me":
		q.Assignee = subject
	case utf8.RuneCountInString(v) > maxSubjectLen:
		bad["assignee"] = fmt.Sprintf("must be me or a subject of at most %d characters", maxSubjectLen)
	default:
		q.Assignee = v
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTaskPage {
			bad["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", maxTaskPage)
		}
		q.Limit = n
	}
	if v := get("cursor"); v != "" {
		pos, err := decodeTaskCursor(v)
		if err != nil {
			bad["cursor"] = "is not a cursor this API returned"
		}
		q.After = pos
	}
	return q, bad
}

// A task cursor is the position of a page's last task (package keyset).
func encodeTaskCursor(p process.Position) string {
	return keyset.Encode(keyset.Position{At: p.DueAt, ID: p.ID})
}

func decodeTaskCursor(s string) (*process.Position, error) {
	p, err := keyset.Decode(s)
	if err != nil {
		return nil, err
	}
	return &process.Position{DueAt: p.At, ID: p.ID}, nil
}

// handleClaim serves POST /v1/tasks/{id}/claim: the caller becomes the
// task's assignee (200 with the task; again by the same caller: 200,
// unchanged).
func handleClaim(store Processes, log *slog.Logger) http.Handler {
	return taskAction(log, store.ClaimTask)
}

// handleRelease serves POST /v1/tasks/{id}/release: the assignee (or an
// operator) clears the claim (200 with the task).
func handleRelease(store Processes, log *slog.Logger) http.Handler {
	return taskAction(log, store.ReleaseTask)
}

func taskAction(log *slog.Logger, act func(ctx context.Context, a process.Actor, id string) (process.Task, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No body is expected; an empty object is tolerated, anything else
		// refused as for completion.
		var body struct{}
		if err := readBody(w, r, &body); err != nil {
			writeError(w, r, log, err)
			return
		}
		t, err := act(r.Context(), actor(r), chi.URLParam(r, "id"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, t)
	})
}
