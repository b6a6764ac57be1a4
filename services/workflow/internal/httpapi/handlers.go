package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
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
		if err := decodeOptional(w, r, &body); err != nil {
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

// badRequest is a body that cannot be read as the expected JSON (400).
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// errTooLarge: the body exceeds maxBodyBytes.
var errTooLarge = errors.New("body too large")

// decodeOptional reads an optional JSON object strictly: an empty body is
// the zero value; otherwise it must be application/json, one object, no
// unknown fields.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errTooLarge
		}
		return &badRequest{"unreadable body"}
	}
	if len(raw) == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &badRequest{"a body must be application/json"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &badRequest{"malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &badRequest{"unexpected data after the JSON object"}
	}
	return nil
}

// writeError is the one place domain errors become HTTP problems.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		problem.Error(w, r, http.StatusBadRequest, bad.msg)
	case errors.Is(err, errTooLarge):
		problem.Error(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxBodyBytes))
	case errors.Is(err, process.ErrInvalidOutcome):
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: err.Error(),
			Errors: map[string]any{"outcome": "must be one of done, approved, rejected"}})
	case errors.Is(err, process.ErrInvalidReason):
		problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: err.Error(),
			Errors: map[string]any{"reason": fmt.Sprintf("required when the outcome is rejected; at most %d characters", process.MaxReasonLen)}})
	case errors.Is(err, process.ErrNotFound):
		problem.Error(w, r, http.StatusNotFound, "no such task")
	case errors.Is(err, process.ErrForbidden):
		problem.Error(w, r, http.StatusForbidden, "the task is assigned to another role")
	case errors.Is(err, process.ErrTaskClosed):
		problem.Error(w, r, http.StatusConflict, "the task is already completed")
	case errors.Is(err, process.ErrClaimed):
		d := problem.Details{Status: http.StatusConflict, Detail: "the task is claimed by someone else"}
		var held *process.ClaimedError
		if errors.As(err, &held) {
			d.Errors = map[string]any{"assignee": held.Assignee}
		}
		problem.Write(w, r, d)
	default:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		problem.Unexpected(w, r, err)
	}
}
