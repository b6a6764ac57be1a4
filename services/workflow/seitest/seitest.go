// Package seitest is a fake SEI gateway speaking the protocol the workflow
// service's SEI client speaks (POST /registrations with an Idempotency-Key,
// see services/workflow/README.md), for the workflow tests and the e2e
// suite. It records registrations, answers a key it has seen with the
// number it gave the first time, and can be told, per request id, to
// refuse the registration, to answer 503 a number of times, or to stall
// past the client's timeout; and it can be down as a whole (Down).
package seitest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Registration is a request SEI registered.
type Registration struct {
	TenantID  string
	RequestID string
	Unit      string
	Number    string
	At        time.Time
}

// Call is one call the fake received.
type Call struct {
	TenantID       string
	RequestID      string
	Unit           string
	IdempotencyKey string
	// Status is what the fake answered; 0 when it stalled until the client
	// gave up.
	Status int
}

type key struct{ tenant, idempotency string }

// Fake is the fake gateway, an http.Handler. Its methods are safe for
// concurrent use.
type Fake struct {
	// URL is the base URL (SEI_URL) when started with Start.
	URL string

	mu          sync.Mutex
	regs        map[key]Registration
	order       []key // registrations in the order made
	calls       []Call
	rejects     map[string]string
	unavailable map[string]int
	down        bool
	stalls      map[string]int
	seq         int
	done        chan struct{}
	closeOnce   sync.Once
}

// New returns a fake that is not listening: serve it yourself.
func New() *Fake {
	return &Fake{regs: map[key]Registration{}, rejects: map[string]string{}, unavailable: map[string]int{},
		stalls: map[string]int{}, done: make(chan struct{})}
}

// Start serves a new fake on a free port of 127.0.0.1 until the test ends.
func Start(tb testing.TB) *Fake {
	tb.Helper()
	f := New()
	srv := httptest.NewServer(f)
	f.URL = srv.URL
	tb.Cleanup(func() {
		f.Close() // stalled calls first: srv.Close waits for them
		srv.Close()
	})
	return f
}

// Close ends every stalled call.
func (f *Fake) Close() { f.closeOnce.Do(func() { close(f.done) }) }

// Reject makes the fake refuse every registration of requestID with 422
// and reason (until Accept).
func (f *Fake) Reject(requestID, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejects[requestID] = reason
}

// Accept undoes Reject.
func (f *Fake) Accept(requestID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rejects, requestID)
}

// Unavailable makes the next n calls for requestID answer 503, before
// anything is registered.
func (f *Fake) Unavailable(requestID string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unavailable[requestID] = n
}

// Down makes every call answer 503, registering nothing, until Down(false):
// an outage of SEI as a whole.
func (f *Fake) Down(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// Stall makes the next n calls for requestID register the request (as a
// slow SEI would) and then hold the answer until the client gives up: the
// client sees a timeout although SEI did the work, so only the idempotency
// key keeps its retry from registering twice.
func (f *Fake) Stall(requestID string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalls[requestID] = n
}

// Registrations returns every registration, in the order made.
func (f *Fake) Registrations() []Registration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Registration, 0, len(f.order))
	for _, k := range f.order {
		out = append(out, f.regs[k])
	}
	return out
}

// Registered returns the registrations of requestID in tenantID: one, or
// none, unless the client forgot its idempotency key.
func (f *Fake) Registered(tenantID, requestID string) []Registration {
	var out []Registration
	for _, r := range f.Registrations() {
		if r.TenantID == tenantID && r.RequestID == requestID {
			out = append(out, r)
		}
	}
	return out
}

// Calls returns the calls for requestID (every call when it is empty), in
// the order received.
func (f *Fake) Calls(requestID string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if requestID == "" || c.RequestID == requestID {
			out = append(out, c)
		}
	}
	return out
}

type registration struct {
	TenantID  string `json:"tenantId"`
	RequestID string `json:"requestId"`
	Unit      string `json:"unit"`
}

// ServeHTTP answers POST /registrations.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/registrations" {
		problem(w, http.StatusNotFound, "no such resource")
		return
	}
	if r.Method != http.MethodPost {
		problem(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		problem(w, http.StatusUnsupportedMediaType, "a registration is application/json")
		return
	}
	var in registration
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		problem(w, http.StatusBadRequest, "malformed registration: "+err.Error())
		return
	}
	// Read to the end: only then does the server watch the connection, so
	// that a stalled call ends when its client gives up.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		problem(w, http.StatusBadRequest, "unreadable registration: "+err.Error())
		return
	}
	idem := r.Header.Get("Idempotency-Key")
	switch {
	case in.TenantID == "" || in.RequestID == "":
		problem(w, http.StatusBadRequest, "tenantId and requestId are required")
		return
	case idem == "":
		problem(w, http.StatusBadRequest, "an Idempotency-Key is required")
		return
	}
	status, number, stall := f.decide(in, idem)
	if stall {
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	}
	switch status {
	case http.StatusOK, http.StatusCreated:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"seiNumber": number})
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
		problem(w, status, "SEI is unavailable")
	default:
		problem(w, status, number) // the rejection's reason
	}
}

// decide records the call and says what to answer: a status and the
// number (or, for a rejection, the reason), or to stall.
func (f *Fake) decide(in registration, idem string) (status int, number string, stall bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := Call{TenantID: in.TenantID, RequestID: in.RequestID, Unit: in.Unit, IdempotencyKey: idem}
	defer func() {
		if !stall {
			call.Status = status
		}
		f.calls = append(f.calls, call)
	}()
	if f.down {
		return http.StatusServiceUnavailable, "", false
	}
	if n := f.unavailable[in.RequestID]; n > 0 {
		f.unavailable[in.RequestID] = n - 1
		return http.StatusServiceUnavailable, "", false
	}
	if reason, ok := f.rejects[in.RequestID]; ok {
		return http.StatusUnprocessableEntity, reason, false
	}
	k := key{in.TenantID, idem}
	status = http.StatusOK
	reg, seen := f.regs[k]
	if !seen {
		f.seq++
		now := time.Now().UTC()
		// The shape of an SEI process number: unit code, sequence, year,
		// check digits.
		reg = Registration{TenantID: in.TenantID, RequestID: in.RequestID, Unit: in.Unit, At: now,
			Number: fmt.Sprintf("99999.%06d/%04d-%02d", f.seq, now.Year(), f.seq%97)}
		f.regs[k] = reg
		f.order = append(f.order, k)
		status = http.StatusCreated
	}
	if n := f.stalls[in.RequestID]; n > 0 {
		f.stalls[in.RequestID] = n - 1
		return 0, "", true
	}
	return status, reg.Number, false
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": http.StatusText(status), "status": status, "detail": detail})
}
