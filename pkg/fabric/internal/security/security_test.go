package security

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// clock is a tracker's time, moved by the test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestTrackerCountsOnePrincipalOncePerWindow(t *testing.T) {
	type step struct {
		principal string
		after     time.Duration // the clock moves this much before the failure
		want      bool          // the failure reaches the limit
	}
	repeat := func(p string, n int, after time.Duration, last bool) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = step{principal: p, after: after}
		}
		out[n-1].want = last
		return out
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"below the limit: nothing", repeat("a", 2, time.Second, false)},
		{"the limit-th failure counts", repeat("a", 3, time.Second, true)},
		{"once per window, not at every failure beyond", append(repeat("a", 3, time.Second, true), repeat("a", 3, time.Second, false)...)},
		{"two principals are counted apart", append(append(repeat("a", 2, 0, false), repeat("b", 2, 0, false)...),
			step{principal: "a", want: true}, step{principal: "b", want: true})},
		// The window opens at the first failure: two then, one a window
		// later is a new streak.
		{"a streak ends with its window", append(repeat("a", 2, 0, false), step{principal: "a", after: time.Minute},
			step{principal: "a"}, step{principal: "a", want: true})},
		{"just inside the window still counts", append(repeat("a", 2, 0, false), step{principal: "a", after: time.Minute - time.Nanosecond, want: true})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1_700_000_000, 0)}
			tr := newTracker(3, time.Minute, 10, c.now)
			for i, s := range tt.steps {
				c.t = c.t.Add(s.after)
				if got := tr.fail(s.principal); got != s.want {
					t.Fatalf("failure %d of %q: reached the limit = %v, want %v", i+1, s.principal, got, s.want)
				}
			}
		})
	}
}

// Whatever the callers send, the tracker keeps at most its max principals:
// expired streaks go first, then arbitrary ones.
func TestTrackerStaysBounded(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	tr := newTracker(3, time.Minute, 100, c.now)
	for i := range 10_000 {
		tr.fail(fmt.Sprintf("principal-%d-%s", i, strings.Repeat("x", i%500)))
		if n := len(tr.seen); n > 100 {
			t.Fatalf("after %d principals the tracker holds %d, want at most 100", i+1, n)
		}
	}
	// A window later every streak has expired: a new principal sweeps them.
	c.t = c.t.Add(time.Minute)
	tr.fail("late")
	if n := len(tr.seen); n != 1 {
		t.Errorf("after the window: %d principals kept, want only the new one", n)
	}
}

// token is a compact JWT with claims and a signature nobody checks:
// principal reads claims without verifying them, as it must for a refused
// token.
func token(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte("not a signature"))
}

func TestPrincipal(t *testing.T) {
	tests := []struct {
		name, credential, want string
	}{
		{"a token: its tenant and subject", token(`{"sub":"ana","tenant_id":"org-a","exp":4102444800}`), "jwt\x00org-a\x00ana"},
		// An expired (or forged) token of the same person is charged to
		// whom it claims to be.
		{"an expired token: whom it claims", token(`{"sub":"ana","tenant_id":"org-a","exp":1}`), "jwt\x00org-a\x00ana"},
		{"another subject of the tenant", token(`{"sub":"bia","tenant_id":"org-a"}`), "jwt\x00org-a\x00bia"},
		{"no tenant", token(`{"sub":"ana"}`), "jwt\x00\x00ana"},
		{"not a JWT: the credential itself", "not-a-token", "credential\x00not-a-token"},
		{"a JWT without a subject", token(`{"tenant_id":"org-a"}`), "credential\x00" + token(`{"tenant_id":"org-a"}`)},
		{"too long to parse", strings.Repeat("a", maxParsed+1), "credential\x00" + strings.Repeat("a", maxParsed+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := principal(tt.credential); got != tt.want {
				t.Errorf("principal = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWatchCountsOverHTTP serves handlers behind Watch over real HTTP and
// reads the counters from the Prometheus endpoint, as a service's /metrics
// shows them.
func TestWatchCountsOverHTTP(t *testing.T) {
	mp, scrape, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	m, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	metrics := httptest.NewServer(scrape)
	t.Cleanup(metrics.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/open", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/unauthorized", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	mux.HandleFunc("/forbidden", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) })
	mux.HandleFunc("/role", func(w http.ResponseWriter, r *http.Request) {
		CapabilityRefused(r.Context(), "role:operator")
		w.WriteHeader(http.StatusForbidden)
	})
	mux.HandleFunc("/other-tenant", func(w http.ResponseWriter, r *http.Request) {
		CrossTenant(r.Context(), "dlq_filter")
		w.WriteHeader(http.StatusNotFound)
	})
	mux.HandleFunc("/purge", func(w http.ResponseWriter, r *http.Request) {
		MassAction(r.Context(), "dlq_purge", 7)
		MassAction(r.Context(), "dlq_purge", 0)
	})
	mux.HandleFunc("/form", func(w http.ResponseWriter, r *http.Request) {
		Presented(r.Context(), "a pasted token")
		w.WriteHeader(http.StatusUnauthorized)
	})
	srv := httptest.NewServer(Watch(mux, m))
	t.Cleanup(srv.Close)
	get := func(path, authorization string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	counter := func(name string, labels map[string]string) float64 {
		t.Helper()
		return fabrictest.Counter(t, metrics.URL, name, labels)
	}

	get("/open", "Bearer x")
	get("/unauthorized", "")
	get("/unauthorized", "Bearer refused")
	get("/form", "")
	get("/forbidden", "Bearer someone")
	get("/role", "Bearer someone")
	get("/other-tenant", "Bearer someone")
	get("/purge", "Bearer someone")
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fabric_security_authorization_failures_total", map[string]string{"reason": "no_credentials"}, 1},
		// The bearer refused, and the token pasted into a form.
		{"fabric_security_authorization_failures_total", map[string]string{"reason": "credentials_refused"}, 2},
		{"fabric_security_authorization_failures_total", map[string]string{"reason": "forbidden"}, 2},
		// A 403 the handler named no capability for, and one it did.
		{"fabric_security_capability_refused_total", map[string]string{"capability": "handler"}, 1},
		{"fabric_security_capability_refused_total", map[string]string{"capability": "role:operator"}, 1},
		{"fabric_security_cross_tenant_total", map[string]string{"surface": "dlq_filter"}, 1},
		{"fabric_operator_mass_action_items_total", map[string]string{"action": "dlq_purge"}, 7},
		{"fabric_security_repeated_authorization_failures_total", nil, 0},
	} {
		if got := counter(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %g, want %g", tc.name, tc.labels, got, tc.want)
		}
	}

	// One principal: repeatLimit-1 refusals are not yet a repeat, the next is.
	for range repeatLimit - 1 {
		get("/forbidden", "Bearer probing")
	}
	if got := counter("fabric_security_repeated_authorization_failures_total", nil); got != 0 {
		t.Fatalf("after %d refusals of one principal: repeated = %g, want 0", repeatLimit-1, got)
	}
	get("/forbidden", "Bearer probing")
	if got := counter("fabric_security_repeated_authorization_failures_total", map[string]string{"reason": "forbidden"}); got != 1 {
		t.Errorf("after %d refusals of one principal: repeated{reason=forbidden} = %g, want 1", repeatLimit, got)
	}
	// Requests without credentials have no principal: never a repeat.
	for range 2 * repeatLimit {
		get("/unauthorized", "")
	}
	if got := counter("fabric_security_repeated_authorization_failures_total", nil); got != 1 {
		t.Errorf("after %d anonymous 401s: repeated = %g, want still 1", 2*repeatLimit, got)
	}
}
