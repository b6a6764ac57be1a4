package problem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// The two real ways the database goes away under a request: the server
// refuses the connection, and the backend is terminated mid-transaction
// (pg_terminate_backend, a failover). Both answer 503 with Retry-After;
// a constraint violation stays a 500.
func TestFailAnswers503ForRealDatabaseOutages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	env := fabrictest.EnvFrom(os.Getenv)

	_, refused := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2")

	conn, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		t.Fatalf("postgres (run `make infra`): %v", err)
	}
	defer conn.Close(context.Background())
	admin, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var terminated bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", conn.PgConn().PID()).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("pg_terminate_backend: %v %v", terminated, err)
	}
	_, midTx := tx.Exec(ctx, "SELECT 1")

	_, violation := admin.Exec(ctx, "SELECT 1/0")

	for _, c := range []struct {
		name   string
		err    error
		status int
	}{
		{"connection refused", refused, http.StatusServiceUnavailable},
		{"backend terminated mid-transaction", midTx, http.StatusServiceUnavailable},
		{"division by zero", violation, http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("the database gave no error")
			}
			rec := httptest.NewRecorder()
			problem.Fail(rec, httptest.NewRequest(http.MethodPost, "/v1/requests", nil), nil, c.err)
			if rec.Code != c.status {
				t.Fatalf("%v: status %d, want %d", c.err, rec.Code, c.status)
			}
			var p problem.Details
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != c.status {
				t.Errorf("body %s: %v", rec.Body, err)
			}
			if retry := rec.Header().Get("Retry-After"); (c.status == http.StatusServiceUnavailable) != (retry != "") {
				t.Errorf("Retry-After = %q with status %d", retry, c.status)
			}
		})
	}
}

func TestRouteProblems(t *testing.T) {
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		method     string
		wantStatus int
		wantDetail string
	}{
		{"no route", problem.NoRoute, http.MethodGet, http.StatusNotFound, "no such route"},
		{"method not allowed", problem.MethodNotAllowed, http.MethodDelete, http.StatusMethodNotAllowed, "DELETE is not allowed here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tt.handler(w, httptest.NewRequest(tt.method, "/v1/nowhere", nil))
			var p problem.Details
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if w.Code != tt.wantStatus || p.Status != tt.wantStatus || p.Detail != tt.wantDetail || p.Instance != "/v1/nowhere" ||
				w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("got %d %s %+v, want %d with detail %q", w.Code, w.Header().Get("Content-Type"), p, tt.wantStatus, tt.wantDetail)
			}
		})
	}
}

// throttled says it is over a rate limit, as outbox.throttledError does
// (problem may not import outbox).
type throttled time.Duration

func (d throttled) Error() string            { return "over the limit" }
func (d throttled) Throttled() time.Duration { return time.Duration(d) }
func (d throttled) Transient() bool          { return true }

// TestFailAnswers429ForThrottledWork: work over a rate limit is the
// caller's to slow down (429, Retry-After rounded up to whole seconds),
// even when it also says it is transient and comes wrapped.
func TestFailAnswers429ForThrottledWork(t *testing.T) {
	for _, c := range []struct {
		wait  time.Duration
		retry string
	}{{200 * time.Millisecond, "1"}, {2500 * time.Millisecond, "3"}} {
		rec := httptest.NewRecorder()
		problem.Fail(rec, httptest.NewRequest(http.MethodPost, "/v1/requests", nil), nil, fmt.Errorf("enqueue: %w", throttled(c.wait)))
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != c.retry {
			t.Errorf("wait %s: %d Retry-After %q, want 429 and %s", c.wait, rec.Code, rec.Header().Get("Retry-After"), c.retry)
		}
	}
}

// ownProblem is an error that is its own problem, as httpjson's refusals
// are.
type ownProblem struct{}

func (ownProblem) Error() string { return "the body is not JSON" }
func (ownProblem) Problem() problem.Details {
	return problem.Details{Type: "https://example.org/p#malformed-json", Title: "The body is not JSON", Status: 400, Detail: "the body is not JSON"}
}

func TestFail(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name       string
		ctx        context.Context
		err        error
		wantStatus int
		wantType   string
		wantDetail string
		wantLogged bool
	}{
		{"not found", context.Background(), fmt.Errorf("task t-1: %w", fmt.Errorf("%w: no such task", fabric.ErrNotFound)),
			404, "about:blank", "task t-1: not found: no such task", false},
		{"invalid", context.Background(), fmt.Errorf("%w: email is not an address", fabric.ErrInvalid), 422, "about:blank", "invalid: email is not an address", false},
		{"conflict", context.Background(), fmt.Errorf("%w: already decided", fabric.ErrConflict), 409, "about:blank", "conflict: already decided", false},
		{"its own problem", context.Background(), fmt.Errorf("read: %w", ownProblem{}), 400, "https://example.org/p#malformed-json", "the body is not JSON", false},
		{"client gone", gone, fmt.Errorf("query: %w", context.Canceled), 499, "about:blank", "request cancelled", false},
		{"cancelled, client still there", context.Background(), context.Canceled, 500, "about:blank", "internal error", true},
		{"a bug", context.Background(), errors.New("nil map"), 500, "about:blank", "internal error", true},
		{"throttled", context.Background(), throttled(time.Second), 429, "about:blank", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged strings.Builder
			log := slog.New(slog.NewTextHandler(&logged, nil))
			w := httptest.NewRecorder()
			problem.Fail(w, httptest.NewRequestWithContext(tt.ctx, http.MethodPost, "/v1/things", nil), log, tt.err)
			var p problem.Details
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if w.Code != tt.wantStatus || p.Status != tt.wantStatus || p.Type != tt.wantType || p.Title == "" ||
				(tt.wantDetail != "" && p.Detail != tt.wantDetail) {
				t.Errorf("Fail(%v) = %d %+v, want %d of type %s, detail %q", tt.err, w.Code, p, tt.wantStatus, tt.wantType, tt.wantDetail)
			}
			if (logged.Len() > 0) != tt.wantLogged {
				t.Errorf("logged %q, want logged: %v", logged.String(), tt.wantLogged)
			}
		})
	}
}
