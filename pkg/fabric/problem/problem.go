// Package problem writes RFC 9457 problem details, the platform's one
// error format for HTTP.
package problem

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/internal/retryable"
)

// Details is an RFC 9457 problem object.
type Details struct {
	Type     string         `json:"type,omitempty"`
	Title    string         `json:"title"`
	Status   int            `json:"status"`
	Detail   string         `json:"detail,omitempty"`
	Instance string         `json:"instance,omitempty"`
	Errors   map[string]any `json:"errors,omitempty"`
}

// Write sends p with status p.Status and content type application/problem+json.
func Write(w http.ResponseWriter, r *http.Request, p Details) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Error writes a problem with status and a detail message.
func Error(w http.ResponseWriter, r *http.Request, status int, detail string) {
	Write(w, r, Details{Status: status, Detail: detail})
}

// NoRoute answers a path no route serves: 404 as a problem, so a client
// gets the platform's one error format from every service, even for a
// mistyped URL. Routers take it as their not-found handler.
func NoRoute(w http.ResponseWriter, r *http.Request) {
	Error(w, r, http.StatusNotFound, "no such route")
}

// MethodNotAllowed answers a method the route does not serve (405), as
// NoRoute does a path.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	Error(w, r, http.StatusMethodNotAllowed, r.Method+" is not allowed here")
}

// Fail answers err the one way the platform answers it, so that no handler
// maps the fabric's errors by hand:
//   - an error that is its own problem (a body httpjson.ReadStrict
//     refused, text the edge refused) with that problem;
//   - an error of one of the fabric's kinds (fabric.ErrNotFound,
//     ErrInvalid, ErrConflict) with its status and err's text as the
//     detail, which the kinds' wrappers write for the client;
//   - a request its client gave up on with 499, which nobody reads;
//   - anything else as unexpected does, logged first to log unless it is
//     nil (a 5xx is the service's to explain, and its body does not carry
//     err).
//
// A handler's own cases (a problem with errors by field, a detail of its
// own) come before it.
func Fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var own interface{ Problem() Details }
	var kind interface{ HTTPStatus() int }
	switch {
	case errors.As(err, &own):
		Write(w, r, own.Problem())
	case errors.As(err, &kind):
		Write(w, r, Details{Status: kind.HTTPStatus(), Detail: err.Error()})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		Write(w, r, Details{Status: statusClientClosed, Title: "Client Closed Request", Detail: "request cancelled"})
	default:
		if log != nil {
			log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		unexpected(w, r, err)
	}
}

// statusClientClosed is the status of a request its client gave up on
// (nginx's 499; net/http names none).
const statusClientClosed = 499

// unexpected answers an error no case of Fail covers: 429 with Retry-After
// for work over a rate limit (an error with Throttled() time.Duration);
// 503 with Retry-After
// when a dependency failed in a way a retry can fix (internal/retryable), so a
// client can tell "try again" (safe with the same Idempotency-Key) from a
// bug; 500 otherwise. The caller logs err; the body does not carry it.
func unexpected(w http.ResponseWriter, r *http.Request, err error) {
	// Work over a rate limit (the outbox's throttledError): the caller slows down.
	var throttled interface{ Throttled() time.Duration }
	if errors.As(err, &throttled) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(throttled.Throttled().Seconds())))))
		Error(w, r, http.StatusTooManyRequests, "over a publish rate limit of the platform; retry after Retry-After seconds")
		return
	}
	if retryable.Is(err) {
		w.Header().Set("Retry-After", "1")
		Error(w, r, http.StatusServiceUnavailable, "a service the platform depends on is briefly unavailable; retry (with the same Idempotency-Key, if any)")
		return
	}
	Error(w, r, http.StatusInternalServerError, "internal error")
}
