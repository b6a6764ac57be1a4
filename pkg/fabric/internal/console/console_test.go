package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/ops"
)

func TestParseTargets(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []Target
		wantErr string
	}{
		{"workflow=http://workflow:8082", []Target{{"workflow", "http://workflow:8082"}}, ""},
		{" a=http://a:1/ , b=https://b ", []Target{{"a", "http://a:1"}, {"b", "https://b"}}, ""},
		{"", nil, "no service named"},
		{"workflow", nil, "not name=http"},
		{"w=ftp://x", nil, "not name=http"},
		{"w=http://", nil, "not name=http"},
		{"w=http://a,w=http://b", nil, "named twice"},
	} {
		got, err := ParseTargets(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseTargets(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("ParseTargets(%q) = %v, %v", tc.in, got, err)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseTargets(%q)[%d] = %v, want %v", tc.in, i, got[i], tc.want[i])
			}
		}
	}
}

func TestTreeJoinsTheServicesParts(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	parts := []ops.Journey{
		{Service: "request", Emitted: []ops.Emitted{
			{ID: "sub", Type: "request.submitted.v1", OccurredAt: t0},
			{ID: "status", Type: "request.status-changed.v1", CausationID: "done", OccurredAt: t0.Add(3 * time.Second)},
		}},
		{Service: "workflow",
			Emitted:  []ops.Emitted{{ID: "done", Type: "workflow.process-completed.v1", CausationID: "sub", OccurredAt: t0.Add(2 * time.Second)}},
			Consumed: []ops.Consumed{{Consumer: "workflow.request-submitted", EventID: "sub"}}},
		{Service: "communication",
			Consumed:    []ops.Consumed{{Consumer: "communication.request-submitted", EventID: "sub"}},
			DeadLetters: []dlq.Letter{{MessageID: "ext", Type: "citizen.updated.v1", Consumer: "communication.citizen"}}},
	}
	roots, orphans := tree(parts)
	if len(roots) != 1 || roots[0].ID != "sub" || len(roots[0].Consumed) != 2 {
		t.Fatalf("roots = %+v, want the submission, consumed twice", roots)
	}
	if c := roots[0].Children; len(c) != 1 || c[0].ID != "done" || c[0].Service != "workflow" ||
		len(c[0].Children) != 1 || c[0].Children[0].ID != "status" {
		t.Errorf("children = %+v, want sub → done → status", c)
	}
	if len(orphans) != 1 || orphans[0].ID != "ext" || len(orphans[0].DeadLetters) != 1 || orphans[0].DeadLetters[0].Service != "communication" {
		t.Errorf("orphans = %+v, want the dead letter no service emitted", orphans)
	}
}

// rig is the console over a target nothing answers at: these tests stop
// before any call to a service.
func rig(t *testing.T) (*httptest.Server, func(auth.Claims) string) {
	t.Helper()
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(context.Background(), keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(Options{Targets: []Target{{Name: "svc", URL: "http://127.0.0.1:1"}}, Verifier: auth.NewVerifier(set, auth.DevIssuer)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, func(c auth.Claims) string {
		tok, err := keys.Mint(c, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestLoginAdmitsOperatorsOfATenant(t *testing.T) {
	srv, mint := rig(t)
	resp, err := noRedirect.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Path+"login" {
		t.Errorf("no session: %d → %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"empty", "", http.StatusBadRequest},
		{"forged", "eyJhbGciOiJub25lIn0.e30.", http.StatusUnauthorized},
		{"attendant", mint(auth.Claims{Subject: "a", TenantID: "org-a", Roles: []string{auth.RoleAttendant}}), http.StatusForbidden},
		// The verifier itself refuses a token without a tenant.
		{"operator without tenant", mint(auth.Claims{Subject: "a", Roles: []string{auth.RoleOperator}}), http.StatusUnauthorized},
		{"operator", mint(auth.Claims{Subject: "ana", TenantID: "org-a", Roles: []string{auth.RoleOperator}}), http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := noRedirect.PostForm(srv.URL+Path+"login", url.Values{"token": {tc.token}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("login = %d, want %d", resp.StatusCode, tc.want)
			}
			cookies := resp.Cookies()
			if tc.want != http.StatusSeeOther {
				if len(cookies) != 0 {
					t.Errorf("refused login set cookies %v", cookies)
				}
				return
			}
			if len(cookies) != 2 {
				t.Fatalf("cookies = %v, want the session and the CSRF token", cookies)
			}
			for _, c := range cookies {
				if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != Path {
					t.Errorf("cookie %s: HttpOnly %v SameSite %v Path %q", c.Name, c.HttpOnly, c.SameSite, c.Path)
				}
			}
		})
	}
}

func TestFormsNeedTheCSRFToken(t *testing.T) {
	srv, mint := rig(t)
	tok := mint(auth.Claims{Subject: "ana", TenantID: "org-a", Roles: []string{auth.RoleOperator}})
	post := func(csrfField string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path+"dlq/svc/q", strings.NewReader(url.Values{
			"csrf": {csrfField}, "id": {"m1"}, "reason": {"r"}, "action": {"purge"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: tok})
		req.AddCookie(&http.Cookie{Name: csrfCookie, Value: "the-token"})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(""); got != http.StatusForbidden {
		t.Errorf("purge without the CSRF field = %d, want 403", got)
	}
	if got := post("another"); got != http.StatusForbidden {
		t.Errorf("purge with a wrong CSRF field = %d, want 403", got)
	}
	// With the right token the form reaches the service, which nothing
	// answers here: the console says so (502), having tried.
	if got := post("the-token"); got != http.StatusBadGateway {
		t.Errorf("purge with the CSRF token = %d, want 502 (the service is unreachable)", got)
	}
}
