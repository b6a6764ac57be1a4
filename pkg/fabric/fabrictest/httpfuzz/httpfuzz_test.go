package httpfuzz

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/auth"
)

func TestValidMethod(t *testing.T) {
	for _, tc := range []struct {
		m    string
		want bool
	}{
		{"GET", true},
		{"PROPFIND", true},
		{"M-SEARCH", true},
		{"!#$%&'*+-.^_`|~09az", true}, // every tchar class
		{"", false},
		{"G T", false},
		{"GET\x00", false},
		{"\tGET", false},
		{"GÉT", false}, // bytes ≥ 0x80
		{"DEL\x7f", false},
		{"a/b", false},
		{`a"b`, false},
		{"a:b", false},
		{"{}", false},
	} {
		if got := validMethod(tc.m); got != tc.want {
			t.Errorf("validMethod(%q) = %v, want %v", tc.m, got, tc.want)
		}
	}
}

func TestEscapeQuery(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"", ""},
		{"a=1&b=2", "a=1&b=2"},
		{"a=%zz&b=%ff&;", "a=%zz&b=%ff&;"}, // malformed escapes reach the service as they are
		{"a b", "a%20b"},
		{"\x00\x1f\x7f", "%00%1F%7F"},
		{"\xff\xfe", "%FF%FE"},
		{"é", "%C3%A9"},
		{"#~", "#~"},
	} {
		if got := escapeQuery(tc.raw); got != tc.want {
			t.Errorf("escapeQuery(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestHeaderSafe(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"", ""},
		{"application/json", "application/json"},
		{"a\tb", "a\tb"},
		{"a\r\nb", "ab"},
		{"\x00x\x1f\x7f", "x"},
		{"\xff\xfe", "\xff\xfe"}, // invalid UTF-8 stays
		{"ключ", "ключ"},
	} {
		if got := headerSafe(tc.v); got != tc.want {
			t.Errorf("headerSafe(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	text := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string
		method string
		ok     bool
	}{
		{"200", 200, text, "fine", "GET", true},
		{"redirect", 301, nil, "", "GET", true},
		{"500 problem", 500, problem, `{"status":500,"title":"x"}`, "GET", false},
		{"503", 503, http.Header{"Retry-After": {"1"}}, "", "GET", false},
		{"no answer", 599, nil, "no answer: EOF", "POST", false},
		{"404 plain text", 404, text, "404 page not found\n", "GET", false},
		{"404 no content type", 404, nil, "", "GET", false},
		{"404 problem", 404, problem, `{"status":404,"title":"Not Found"}`, "GET", true},
		{"404 problem with parameters", 404, http.Header{"Content-Type": {"application/problem+json; charset=utf-8"}},
			`{"status":404,"title":"Not Found"}`, "GET", false},
		{"404 problem of another status", 404, problem, `{"status":400,"title":"Bad Request"}`, "GET", false},
		{"404 problem without title", 404, problem, `{"status":404}`, "GET", false},
		{"404 problem not JSON", 404, problem, `{"status":404,`, "GET", false},
		{"HEAD 404 problem", 404, problem, "", "HEAD", true},
		{"HEAD 404 plain text", 404, text, "", "HEAD", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verdict(tc.status, tc.header, []byte(tc.body), tc.method)
			if (err == nil) != tc.ok {
				t.Fatalf("verdict = %v, want ok %v", err, tc.ok)
			}
		})
	}
	// A body that is not JSON is reported with the decoder's error.
	var syntax *json.SyntaxError
	if err := verdict(404, problem, []byte("{"), "GET"); !errors.As(err, &syntax) {
		t.Errorf("verdict of a truncated problem = %v, want a wrapped *json.SyntaxError", err)
	}
}

// TestTarget runs Send against a server that answers each route as a
// service might, checks the request it got, and the verdict on the answer.
func TestTarget(t *testing.T) {
	type got struct{ method, path, rawQuery, authz, ctype, idemKey, body string }
	var last got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		last = got{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"),
			r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), string(body)}
		switch {
		case strings.HasPrefix(r.URL.Path, "/500"):
			http.Error(w, "boom", http.StatusInternalServerError)
		case strings.HasPrefix(r.URL.Path, "/plain"):
			http.NotFound(w, r)
		case strings.HasPrefix(r.URL.Path, "/problem"):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":404,"title":"Not Found"}`))
		case strings.HasPrefix(r.URL.Path, "/panic"):
			panic(http.ErrAbortHandler) // the connection closes without an answer
		case strings.HasPrefix(r.URL.Path, "/redirect"):
			http.Redirect(w, r, "/ok", http.StatusMovedPermanently)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ft := New(t, srv.URL, keys)
	ft.Routes = []string{"/500", "/plain", "/problem", "/ok", "/panic", "/redirect"}

	for _, tc := range []struct {
		route  uint8
		status int
		ok     bool
	}{{0, 500, false}, {1, 404, false}, {2, 404, true}, {3, 200, true}, {4, 599, false}, {5, 301, true}} {
		status, header, data := ft.Send(Input{Method: "GET", Route: tc.route})
		if status != tc.status {
			t.Errorf("GET %s = %d %q, want %d", ft.Routes[tc.route], status, data, tc.status)
		}
		if err := verdict(status, header, data, "GET"); (err == nil) != tc.ok {
			t.Errorf("GET %s: verdict %v, want ok %v", ft.Routes[tc.route], err, tc.ok)
		}
	}

	// Route wraps around; tail, query and headers arrive as a client sends them.
	status, _, _ := ft.Send(Input{Method: "POST", Route: 3 + 6, Tail: "/a\x00b", Query: "q=\xff&x=%zz",
		Authn: AuthnOperator + AuthnCount, ContentType: "application/json\r\n", IdemKey: "k\x00ey", Body: []byte("{}")})
	want := got{"POST", "/ok/a\x00b", "q=%FF&x=%zz", ft.authz[AuthnOperator], "application/json", "key", "{}"}
	if status != 200 || last != want {
		t.Errorf("POST = %d, server got %+v, want %+v", status, last, want)
	}
	ft.Send(Input{Method: "GET", Route: 3})
	if last.authz != "" || last.ctype != "" || last.idemKey != "" {
		t.Errorf("GET with AuthnNone and no headers: server got %+v", last)
	}

	// Check passes on a good answer and sends a usual method instead of one
	// that is not a token.
	ft.Check(t, "G T", 3, "", "", authnNone, "", "", nil)
	if !slices.Contains(methods, last.method) {
		t.Errorf("Check sent method %q for %q, want one of %v", last.method, "G T", methods)
	}
	// Too long for a request line: skipped, nothing sent.
	last = got{}
	ft.Check(t, "GET", 0, strings.Repeat("x", maxLine+1), "", authnNone, "", "", nil)
	if last != (got{}) {
		t.Errorf("Check of an over-long input sent %+v", last)
	}
}

// TestNew checks the tokens: who each one names, and that the broken ones
// do not verify.
func TestNew(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(context.Background(), keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	v := auth.NewVerifier(set, auth.DevIssuer)
	ft := New(t, "http://127.0.0.1:1", keys)
	if !strings.HasPrefix(ft.Tenant, "org-fuzz-") || ft.Citizen == "" || !slices.Equal(ft.Routes, []string{"/"}) {
		t.Fatalf("New = Tenant %q, Citizen %q, Routes %q", ft.Tenant, ft.Citizen, ft.Routes)
	}
	if other := New(t, "http://127.0.0.1:1", keys); other.Tenant == ft.Tenant {
		t.Errorf("two targets share tenant %q, want a fresh one each", ft.Tenant)
	}
	for a, want := range map[int]*auth.Claims{
		AuthnCitizen:      {Subject: ft.Citizen, TenantID: ft.Tenant, Roles: []string{auth.RoleCitizen}},
		AuthnAttendant:    {Subject: "attendant-fuzz", TenantID: ft.Tenant, Roles: []string{auth.RoleAttendant}},
		AuthnOperator:     {Subject: "operator-fuzz", TenantID: ft.Tenant, Roles: []string{auth.RoleOperator}},
		AuthnAll:          {Subject: ft.Citizen, TenantID: ft.Tenant, Roles: []string{auth.RoleCitizen, auth.RoleAttendant, auth.RoleOperator}},
		authnOtherCitizen: {Subject: ft.Citizen, TenantID: ft.Tenant + "-other", Roles: []string{auth.RoleCitizen}},
		AuthnOtherStaff:   {Subject: "staff-fuzz", TenantID: ft.Tenant + "-other", Roles: []string{auth.RoleAttendant, auth.RoleOperator}},
		authnUnknownRole:  {Subject: "auditor-fuzz", TenantID: ft.Tenant, Roles: []string{"auditor"}},
		authnExpired:      nil,
		authnBadSignature: nil,
		authnGarbage:      nil,
	} {
		c, err := v.Verify(strings.TrimPrefix(ft.authz[a], "Bearer "))
		switch {
		case want == nil && err == nil:
			t.Errorf("authn %d verifies (%+v), want it refused", a, c)
		case want != nil && err != nil:
			t.Errorf("authn %d: %v", a, err)
		case want != nil && (c.Subject != want.Subject || c.TenantID != want.TenantID || !slices.Equal(c.Roles, want.Roles)):
			t.Errorf("authn %d = %+v, want %+v", a, c, *want)
		}
	}
	if ft.authz[authnNone] != "" || !strings.HasPrefix(ft.authz[authnBasic], "Basic ") {
		t.Errorf("AuthnNone = %q, AuthnBasic = %q", ft.authz[authnNone], ft.authz[authnBasic])
	}
}
