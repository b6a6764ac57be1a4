// Package httpfuzz is the harness of the services' FuzzHTTP targets: it
// turns the fuzzer's arguments into one HTTP request to a running service
// (a method, a path under the service's routes, a query, Content-Type,
// Idempotency-Key, a body and a token from a fixed set) and judges the
// answer: any 5xx fails, and so does a 4xx that is not an RFC 9457 problem.
// Each service keeps its own routes and seeds in its fuzz_test.go; what is
// the same for all of them lives here, once, the host's routes and their
// seeds included (AddHostSeeds).
//
//	ft := httpfuzz.New(f, baseURL, keys)
//	ft.Routes = []string{"/v1/things"}
//	ft.Add(f, httpfuzz.Input{Method: "GET", Authn: httpfuzz.AuthnAttendant})
//	ft.AddHostSeeds(f, "things.events") // its consumers' queues
//	f.Fuzz(ft.Check)
package httpfuzz

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
)

// Input is one request the fuzzer builds: the path is one of the target's
// route prefixes (Route, modulo their number) followed by Tail. The fields
// are the arguments of Check, in order.
type Input struct {
	Method      string
	Route       uint8
	Tail, Query string
	Authn       uint8 // which Authorization header (AuthnNone…), modulo AuthnCount
	ContentType string
	IdemKey     string
	Body        []byte
}

// The Authorization headers the fuzzer picks from.
const (
	authnNone = iota
	authnGarbage
	AuthnCitizen   // Target.Citizen of Target.Tenant
	AuthnAttendant // of Target.Tenant
	AuthnOperator  // of Target.Tenant
	AuthnAll       // every role, of Target.Tenant
	authnOtherCitizen
	AuthnOtherStaff // attendant and operator of another tenant
	authnExpired
	authnUnknownRole
	authnBadSignature
	authnBasic
	AuthnCount
)

// target is a running service and what the harness needs to call it.
type target struct {
	// Routes are the path prefixes Input.Route picks from; New sets "/".
	// A service may change them between its setup calls to Send and
	// f.Fuzz, but not while the fuzzer runs.
	Routes []string
	// Tenant is the tenant of the fuzzer's tokens: a fresh one for each
	// New (the object store and the databases' shared tables outlive a
	// run). Citizen is the subject of its citizen tokens.
	Tenant, Citizen string

	base   string
	authz  [AuthnCount]string
	client *http.Client
}

// New returns a target for the service at baseURL, with tokens signed by
// keys (the keys the service trusts).
func New(tb testing.TB, baseURL string, keys *auth.DevKeys) *target {
	tb.Helper()
	var r [3]byte
	_, _ = rand.Read(r[:])
	ft := &target{
		Routes:  []string{"/"},
		Tenant:  "org-fuzz-" + hex.EncodeToString(r[:]),
		Citizen: "citizen-fuzz",
		base:    baseURL,
		client: &http.Client{
			Timeout: 30 * time.Second,
			// A redirect (the mux cleaning a path) is an answer like any other.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	mint := func(tenant, sub string, ttl time.Duration, roles ...string) string {
		tok, err := keys.Mint(auth.Claims{Subject: sub, TenantID: tenant, Roles: roles}, ttl)
		if err != nil {
			tb.Fatalf("httpfuzz: mint a token for %s of %s: %v", sub, tenant, err)
		}
		return "Bearer " + tok
	}
	other := ft.Tenant + "-other"
	ft.authz[authnGarbage] = "Bearer not-a-token"
	ft.authz[AuthnCitizen] = mint(ft.Tenant, ft.Citizen, time.Hour, auth.RoleCitizen)
	ft.authz[AuthnAttendant] = mint(ft.Tenant, "attendant-fuzz", time.Hour, auth.RoleAttendant)
	ft.authz[AuthnOperator] = mint(ft.Tenant, "operator-fuzz", time.Hour, auth.RoleOperator)
	ft.authz[AuthnAll] = mint(ft.Tenant, ft.Citizen, time.Hour, auth.RoleCitizen, auth.RoleAttendant, auth.RoleOperator)
	ft.authz[authnOtherCitizen] = mint(other, ft.Citizen, time.Hour, auth.RoleCitizen)
	ft.authz[AuthnOtherStaff] = mint(other, "staff-fuzz", time.Hour, auth.RoleAttendant, auth.RoleOperator)
	ft.authz[authnExpired] = mint(ft.Tenant, "attendant-fuzz", -time.Hour, auth.RoleAttendant, auth.RoleOperator)
	ft.authz[authnUnknownRole] = mint(ft.Tenant, "auditor-fuzz", time.Hour, "auditor")
	good := ft.authz[AuthnOperator]
	ft.authz[authnBadSignature] = good[:len(good)-4] + "AAAA"
	ft.authz[authnBasic] = "Basic ZnV6ejpmdXp6"
	return ft
}

// Add adds in to f's seed corpus.
func (ft *target) Add(f *testing.F, in Input) {
	f.Add(in.Method, in.Route, in.Tail, in.Query, in.Authn, in.ContentType, in.IdemKey, in.Body)
}

// maxLine keeps the request line and headers well inside what net/http
// reads before answering 431 on its own (1 MB): that answer is the HTTP
// library's, not the service's.
const maxLine = 64 << 10

// Check is the fuzz function (pass it to f.Fuzz): one request, and what its
// answer must be (see verdict).
func (ft *target) Check(t *testing.T, method string, route uint8, tail, query string, authn uint8, contentType, idemKey string, body []byte) {
	if !validMethod(method) {
		// Not a token a client can send: one of the usual methods instead,
		// so that every input makes a request.
		method = methods[len(method)%len(methods)]
	}
	if len(tail)+len(query)+len(contentType)+len(idemKey) > maxLine {
		return
	}
	in := Input{method, route, tail, query, authn, contentType, idemKey, body}
	status, header, data := ft.Send(in)
	target := ft.Routes[int(route)%len(ft.Routes)] + tail
	t.Logf("%s %.80q ?%.40q authn %d → %d", method, target, query, authn, status)
	if err := verdict(status, header, data, method); err != nil {
		t.Fatalf("%s %q ?%q (Content-Type %q, authn %d) = %v", method, target, query, contentType, authn, err)
	}
}

// verdict says what is wrong with an answer, or nil: any status ≥ 500
// (599: no answer at all), and a 4xx that is not an RFC 9457 problem
// (application/problem+json whose status is the answer's and with a title;
// the body of an answer to HEAD is not checked, there is none).
func verdict(status int, header http.Header, data []byte, method string) error {
	switch {
	case status >= 500:
		return fmt.Errorf("%d (Retry-After %q): %s", status, header.Get("Retry-After"), data)
	case status >= 400:
		if ct := header.Get("Content-Type"); ct != "application/problem+json" {
			return fmt.Errorf("%d with Content-Type %q, want application/problem+json: %q", status, ct, data)
		}
		if method == http.MethodHead {
			return nil // no body to check
		}
		var p struct {
			Status int    `json:"status"`
			Title  string `json:"title"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			return fmt.Errorf("%d with problem %q, want a JSON problem: %w", status, data, err)
		}
		if p.Status != status || p.Title == "" {
			return fmt.Errorf("%d with problem %q, want a JSON problem with status %d and a title", status, data, status)
		}
	}
	return nil
}

// Send makes in an HTTP request and returns the answer. Bytes a header
// cannot carry (controls) are dropped; the path and query are escaped as a
// client would, so NUL and invalid UTF-8 reach the service percent-encoded.
// A request that gets no answer (the connection closed: a handler
// panicked) is reported as status 599, a failure like any 5xx.
func (ft *target) Send(in Input) (int, http.Header, []byte) {
	return ft.send(in, ft.Routes[int(in.Route)%len(ft.Routes)]+in.Tail)
}

// send is Send to path, whatever in's Route and Tail.
func (ft *target) send(in Input, path string) (int, http.Header, []byte) {
	req, err := http.NewRequest(in.Method, ft.base, bytes.NewReader(in.Body))
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	req.URL.Path = path
	req.URL.RawQuery = escapeQuery(in.Query)
	if a := ft.authz[int(in.Authn)%AuthnCount]; a != "" {
		req.Header.Set("Authorization", a)
	}
	if in.ContentType != "" {
		req.Header.Set("Content-Type", headerSafe(in.ContentType))
	}
	if in.IdemKey != "" {
		req.Header.Set("Idempotency-Key", headerSafe(in.IdemKey))
	}
	resp, err := ft.client.Do(req)
	if err != nil {
		return 599, nil, []byte(fmt.Sprintf("no answer: %v", err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 599, resp.Header, []byte(fmt.Sprintf("answer %d cut short: %v", resp.StatusCode, err))
	}
	return resp.StatusCode, resp.Header, data
}

// methods are what Check sends instead of a method that is not a token.
var methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// validMethod reports whether m is an HTTP token (RFC 9110).
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// escapeQuery keeps the printable ASCII of raw as it is (malformed escapes
// such as %zz included, for the service to parse) and percent-encodes
// every other byte, so the request line stays valid.
func escapeQuery(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c > ' ' && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// headerSafe drops the bytes a header value cannot carry (controls other
// than tab); bytes ≥ 0x80, invalid UTF-8 included, stay.
func headerSafe(v string) string {
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c >= ' ' || c == '\t') && c != 0x7f {
			b = append(b, c)
		}
	}
	return string(b)
}
