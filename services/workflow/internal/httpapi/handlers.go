package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// Processes is the process store the handlers use.
type Processes interface {
	Processes(ctx context.Context, a process.Actor, requestID string) ([]process.Instance, error)
	CompleteTask(ctx context.Context, a process.Actor, id string, d process.Decision) (process.Instance, error)
	Worklist(ctx context.Context, a process.Actor, q process.TaskQuery) ([]process.WorkItem, error)
	ClaimTask(ctx context.Context, a process.Actor, id string) (process.Task, error)
	ReleaseTask(ctx context.Context, a process.Actor, id string) (process.Task, error)
}

const maxBodyBytes = 16 << 10

func actor(r *http.Request) process.Actor {
	c, _ := auth.FromContext(r.Context())
	return process.Actor{TenantID: c.TenantID, Subject: c.Subject, Roles: c.Roles}
}

func handleListProcesses(store Processes, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := uuid.Parse(r.URL.Query().Get("requestId"))
		if err != nil {
			problem.Error(w, r, http.StatusBadRequest, "query parameter requestId must be a request id (UUID)")
			return
		}
		// The canonical spelling: uuid.Parse also takes ones PostgreSQL
		// refuses ("urn:uuid:…").
		list, err := store.Processes(r.Context(), actor(r), id.String())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"processes": list})
	})
}

type completeBody struct {
	Outcome string `json:"outcome"`
	// Reason explains the decision: required for a rejection, at most
	// process.MaxReasonLen characters.
	Reason string `json:"reason"`
}

func handleCompleteTask(store Processes, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body completeBody
		if err := readBody(w, r, &body); err != nil {
			writeError(w, r, log, err)
			return
		}
		p, err := store.CompleteTask(r.Context(), actor(r), chi.URLParam(r, "id"), process.Decision{Outcome: body.Outcome, Reason: body.Reason})
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, p)
	})
}

// readBody reads a route's JSON body into v. Every body of the service is
// optional: an empty one leaves v as it is, and the rules then say what
// is missing.
func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := httpjson.ReadStrict(w, r, maxBodyBytes, v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// writeError answers what the client should know beyond an error's kind
// (which field is wrong, who holds the claim, a refusal by role);
// problem.Fail answers the rest, the fabric's kinds and refused bodies
// included.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, process.ErrInvalidOutcome):
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: err.Error(),
			Errors: map[string]any{"outcome": "must be one of done, approved, rejected"}})
	case errors.Is(err, process.ErrInvalidReason):
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: err.Error(),
			Errors: map[string]any{"reason": fmt.Sprintf("required when the outcome is rejected; at most %d characters", process.MaxReasonLen)}})
	case errors.Is(err, process.ErrForbidden):
		problem.Error(w, r, http.StatusForbidden, "the task is assigned to another role")
	case errors.Is(err, process.ErrClaimed):
		d := problem.Details{Status: http.StatusConflict, Detail: "the task is claimed by someone else"}
		var held *process.ClaimedError
		if errors.As(err, &held) {
			d.Errors = map[string]any{"assignee": held.Assignee}
		}
		problem.Write(w, r, d)
	default:
		problem.Fail(w, r, log, err)
	}
}
