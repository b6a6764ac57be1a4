// Package security counts the security signals of the requests a service
// host serves (docs/deploy.md, "Security signals"):
//
//   - MassActionDetected: the items an operator's bulk action touched
//     (MassAction), fabric.operator.mass_action_items by action;
//   - CrossTenantAttempt: a request that named another tenant than its
//     token's (CrossTenant), fabric.security.cross_tenant by surface;
//   - RepeatedAuthorizationFailure: every 401 and 403 the host answers,
//     fabric.security.authorization_failures by reason, and one principal
//     reaching repeatLimit of them within repeatWindow,
//     fabric.security.repeated_authorization_failures;
//   - UnexpectedCapabilityInvocation: a call refused because the caller
//     lacks the role or right it needs (CapabilityRefused),
//     fabric.security.capability_refused by capability.
//
// Watch wraps the host's whole HTTP API: it sees every answer's status, so
// a 401 or 403 is counted wherever it was written (the verifier, the
// fabric's operator APIs, a service's own handler, the gateway). What only
// the refusing code knows (the capability, the tenant named, the items
// touched) it reports through the request's context with the functions
// below; without a Watch around the request they do nothing, so the same
// code serves fabricctl and tests unchanged.
//
// Every label is a bounded set the code names; principals, tenants and ids
// never become labels. The repeat tracker keeps at most trackedMax
// principals, each as a fixed-size hash.
package security

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// Reasons of fabric.security.authorization_failures.
const (
	// reasonNoCredentials: 401 to a request that presented nothing; no
	// principal to charge it to.
	reasonNoCredentials = "no_credentials"
	// reasonRefused: 401 to a request whose credentials were refused
	// (invalid, expired, signed by an unknown key, an unknown source).
	reasonRefused = "credentials_refused"
	// reasonForbidden: 403, valid credentials without the right.
	reasonForbidden = "forbidden"
)

// capabilityHandler labels a 403 whose handler named no capability: a
// service's own rule (a task assigned to another role, approving one's own
// change) or a refused form.
const capabilityHandler = "handler"

// One principal answered 401/403 repeatLimit times within repeatWindow of
// its first such answer is counted once as a repeated failure. Ten in five
// minutes is beyond a user retrying a stale session or a client refreshing
// a token, and well within what a script probing routes or guessing at a
// token does.
const (
	repeatLimit  = 10
	repeatWindow = 5 * time.Minute
	// trackedMax bounds the tracker: 4,096 principals of 16-byte keys and a
	// small streak each, well under a megabyte.
	trackedMax = 4096
	// maxParsed: a credential longer than this is not parsed for its
	// claims (no platform token is), only hashed.
	maxParsed = 8 << 10
)

type ctxKey struct{}

// request is what the code serving one request reported.
type request struct {
	w *watch

	mu         sync.Mutex
	attributed bool   // a refusal was counted with its capability or surface
	credential string // presented outside the Authorization header
}

type watch struct {
	next    http.Handler
	m       *telemetry.Metrics
	tracker *tracker
}

// Watch returns next counting the security signals of every request on m
// (see the package comment).
func Watch(next http.Handler, m *telemetry.Metrics) http.Handler {
	return &watch{next: next, m: m, tracker: newTracker(repeatLimit, repeatWindow, trackedMax, time.Now)}
}

func (wt *watch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rq := &request{w: wt}
	sw := &statusWriter{ResponseWriter: w}
	wt.next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rq)))
	if sw.status == http.StatusUnauthorized || sw.status == http.StatusForbidden {
		wt.refused(r, sw.status, rq)
	}
}

// refused counts a 401 or 403: by reason, as a capability refusal when the
// handler named none, and against its principal in the repeat tracker.
func (wt *watch) refused(r *http.Request, status int, rq *request) {
	rq.mu.Lock()
	attributed, credential := rq.attributed, rq.credential
	rq.mu.Unlock()
	if credential == "" {
		credential = bearer(r.Header.Get("Authorization"))
	}
	reason := reasonForbidden
	if status == http.StatusUnauthorized {
		reason = reasonRefused
		if credential == "" {
			reason = reasonNoCredentials
		}
	}
	ctx := r.Context()
	wt.m.AuthFailures.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	if status == http.StatusForbidden && !attributed {
		wt.m.CapabilityRefused.Add(ctx, 1, metric.WithAttributes(attribute.String("capability", capabilityHandler)))
	}
	if credential != "" && wt.tracker.fail(principal(credential)) {
		wt.m.RepeatedAuthFailures.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// bearer is the credential of an Authorization header: the token of a
// Bearer one, the whole value of any other scheme.
func bearer(h string) string {
	if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(tok)
	}
	return strings.TrimSpace(h)
}

// principal names whom credential stands for: the tenant and subject its
// claims state (unverified: a refused token is charged to whom it claims to
// be, which is what a guessed or stolen-and-expired token is about), or,
// when it has none, the credential itself. Both are hashed by the tracker.
func principal(credential string) string {
	if len(credential) <= maxParsed {
		if tok, err := jwt.ParseInsecure([]byte(credential)); err == nil {
			sub, _ := tok.Subject()
			var tenantID string
			_ = tok.Get("tenant_id", &tenantID)
			if sub != "" {
				return "jwt\x00" + tenantID + "\x00" + sub
			}
		}
	}
	return "credential\x00" + credential
}

func from(ctx context.Context) *request {
	rq, _ := ctx.Value(ctxKey{}).(*request)
	return rq
}

// MassAction counts n items touched by an operator's bulk action (a DLQ
// replay or purge, a replay from history); nothing for n <= 0.
func MassAction(ctx context.Context, action string, n int) {
	if rq := from(ctx); rq != nil && n > 0 {
		rq.w.m.MassActionItems.Add(ctx, int64(n), metric.WithAttributes(attribute.String("action", action)))
	}
}

// CrossTenant counts a request that named a tenant other than its
// credentials' at surface (whether it was refused, answered "not found" or
// confined to the caller's tenant).
func CrossTenant(ctx context.Context, surface string) {
	if rq := from(ctx); rq != nil {
		rq.attribute()
		rq.w.m.CrossTenant.Add(ctx, 1, metric.WithAttributes(attribute.String("surface", surface)))
	}
}

// CapabilityRefused counts a call refused because the caller lacks
// capability (e.g. "role:operator"); the request's 403 is then not counted
// again under "handler".
func CapabilityRefused(ctx context.Context, capability string) {
	if rq := from(ctx); rq != nil {
		rq.attribute()
		rq.w.m.CapabilityRefused.Add(ctx, 1, metric.WithAttributes(attribute.String("capability", capability)))
	}
}

// Presented names the credential of a request that did not come in its
// Authorization header (a token pasted into the console's login form, an
// external source's id), so that a 401 or 403 is charged to its principal.
func Presented(ctx context.Context, credential string) {
	if rq := from(ctx); rq != nil && credential != "" {
		rq.mu.Lock()
		rq.credential = credential
		rq.mu.Unlock()
	}
}

func (rq *request) attribute() {
	rq.mu.Lock()
	rq.attributed = true
	rq.mu.Unlock()
}

// statusWriter keeps the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps streamed answers (the DLQ API's progress lines) streaming.
func (s *statusWriter) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// tracker counts each principal's 401/403 answers in a window that opens
// at its first one. It holds at most max principals: when full, expired
// streaks go first, then an arbitrary one (map order), so memory stays
// bounded whatever the callers send. A flood of distinct principals can
// evict a real one's streak before it reaches the limit; the failures are
// still counted by reason.
type tracker struct {
	limit  int
	window time.Duration
	max    int
	now    func() time.Time

	mu    sync.Mutex
	seen  map[[16]byte]streak
	sweep time.Time // when expired streaks were last dropped
}

type streak struct {
	since time.Time
	n     int
}

func newTracker(limit int, window time.Duration, max int, now func() time.Time) *tracker {
	return &tracker{limit: limit, window: window, max: max, now: now, seen: map[[16]byte]streak{}}
}

// fail records one failure of principal p and reports whether it is the
// one that reaches the limit in p's window: true once per window.
func (t *tracker) fail(p string) bool {
	sum := sha256.Sum256([]byte(p))
	var k [16]byte
	copy(k[:], sum[:16])
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.seen[k]
	if !ok || now.Sub(s.since) >= t.window {
		if !ok && len(t.seen) >= t.max {
			t.evict(now)
		}
		s = streak{since: now}
	}
	s.n++
	t.seen[k] = s
	return s.n == t.limit
}

// evict makes room for one principal: every expired streak goes (at most
// once a window, the scan being over the whole map), else an arbitrary one.
func (t *tracker) evict(now time.Time) {
	if now.Sub(t.sweep) >= t.window {
		t.sweep = now
		for k, s := range t.seen {
			if now.Sub(s.since) >= t.window {
				delete(t.seen, k)
			}
		}
	}
	for k := range t.seen {
		if len(t.seen) < t.max {
			return
		}
		delete(t.seen, k)
	}
}
