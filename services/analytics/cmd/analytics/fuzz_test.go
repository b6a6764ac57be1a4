package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// FuzzHTTP sends the analytics service's REST API (the report, the DLQ API,
// the host's routes) arbitrary requests (method, path under its routes,
// query, Content-Type, body, and a token from a fixed set: none, garbage,
// each role, another tenant's, expired) and fails on any 5xx (503 included:
// the database is up here) and on any 4xx that is not an RFC 9457 problem.
// The service runs once, for real, as in the other tests; the seeds (valid
// calls to every route, then known-nasty inputs) run in every `go test`.
// Fuzz with `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/analytics/
func FuzzHTTP(f *testing.F) {
	s := startStack(f)
	ft := newFuzzTarget(f, s.url, s.keys)
	// One request of the fuzz tenant in the projection, so reports have rows.
	today := time.Now().UTC().Format(time.DateOnly)
	e, err := envelope.New("request.submitted.v1", fuzzTenant, "request-service", map[string]any{
		"requestId": uuid.NewString(), "protocol": "AG-FUZZ", "serviceId": "iptu", "formId": "f", "formVersion": 1,
		"channel": "web", "citizenId": fuzzCitizen, "submittedAt": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.pub.Publish(ctx, e); err != nil {
		f.Fatalf("publish %s: %v", e.Type, err)
	}
	q := "from=" + today + "&to=" + today
	ft.routes = []string{"/v1/analytics/requests"}
	fabrictest.Eventually(f, 20*time.Second, "the fuzz tenant's request in the report", func() bool {
		status, _, body := ft.send(fuzzInput{method: "GET", query: q, authn: authnAttendant})
		return status == http.StatusOK && strings.Contains(string(body), `"requests":1`)
	})
	ft.routes = []string{
		"/v1/analytics/requests",
		"/v1/analytics/",
		"/v1/dlq/",
		"/v1/dlq/" + queue,
		"/healthz", "/readyz", "/metrics", "/",
	}
	const (
		rReport = iota
		rAnalytics
		rDLQ
		rQueue
		rHealthz
		rReadyz
		rMetrics
		rRoot
	)
	const ctJSON = "application/json"
	add := func(in fuzzInput) { ft.add(f, in) }

	// Every route, as it is meant to be called.
	add(fuzzInput{method: "GET", route: rReport, query: q, authn: authnAttendant})
	add(fuzzInput{method: "GET", route: rReport, query: "from=2026-01-01&to=2026-01-31", authn: authnOperator})
	add(fuzzInput{method: "GET", route: rQueue, authn: authnOperator})
	add(fuzzInput{method: "GET", route: rDLQ, tail: "audit", authn: authnOperator})
	add(fuzzInput{method: "GET", route: rQueue, tail: "/letters/0190a0b0-0000-7000-8000-000000000000", authn: authnOperator})
	add(fuzzInput{method: "POST", route: rQueue, tail: "/replay", authn: authnOperator, contentType: ctJSON,
		body: []byte(`{"filter":{"ids":["0190a0b0-0000-7000-8000-000000000000"]},"reason":"fuzz","dryRun":true}`)})
	add(fuzzInput{method: "POST", route: rQueue, tail: "/purge", authn: authnOperator, contentType: ctJSON,
		body: []byte(`{"filter":{"all":true},"reason":"fuzz","dryRun":true}`)})
	add(fuzzInput{method: "GET", route: rHealthz})
	add(fuzzInput{method: "GET", route: rReadyz})
	add(fuzzInput{method: "GET", route: rMetrics})

	// Tokens and methods the routes refuse.
	for a := range uint8(authnCount) {
		add(fuzzInput{method: "GET", route: rReport, query: q, authn: a})
		add(fuzzInput{method: "GET", route: rQueue, authn: a})
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(fuzzInput{method: m, route: rReport, query: q, authn: authnAll, contentType: ctJSON, body: []byte(`{}`)})
		add(fuzzInput{method: m, route: rQueue, tail: "/purge", authn: authnOperator})
	}

	// Known-nasty input.
	for _, query := range []string{"", "from=", "to=" + today, "from=" + today, "from=2026-02-01&to=2026-01-01",
		"from=2026-02-30&to=2026-03-01", "from=2020-01-01&to=2026-01-01", "from=0000-01-01&to=0000-01-31",
		"from=9999-12-01&to=9999-12-31", "from=0001-01-01&to=0001-01-01", "from=1970-01-01&to=1970-01-01",
		"from=2026-1-1&to=2026-1-2", "from=+2026-01-01&to=2026-01-02", "from=2026-01-01T00:00:00Z&to=2026-01-02",
		"from=2026-01-01%00&to=2026-01-02", "from=%ff&to=%zz", "from=" + today + "&from=2000-01-01&to=" + today,
		"from=" + strings.Repeat("9", 5000) + "&to=" + today, q + ";x=1", "a=%00&b=%ff&c=%zz&;",
		"from=２０２６-01-01&to=2026-01-02"} {
		add(fuzzInput{method: "GET", route: rReport, query: query, authn: authnAttendant})
	}
	for _, tail := range []string{"requests/", "requests/x", "a\x00b", "\xff\xfe", "../../../etc/passwd", "%2e%2e%2f", strings.Repeat("c", 10000), ""} {
		add(fuzzInput{method: "GET", route: rAnalytics, tail: tail, query: q, authn: authnAttendant})
	}
	add(fuzzInput{method: "GET", route: rReport, query: q, authn: authnAttendant, contentType: "\xff/\xfe", body: []byte("\x00\xff")})
	add(fuzzInput{method: "GET", route: rDLQ, tail: "a/b/c", authn: authnOperator})
	add(fuzzInput{method: "GET", route: rDLQ, authn: authnOperator})
	add(fuzzInput{method: "POST", route: rQueue, tail: "/purge", authn: authnOperator, contentType: ctJSON,
		body: []byte(`{"filter":{"reason":"x"},"reason":"r","dryRun":1e999}`)})
	add(fuzzInput{method: "GET", route: rRoot, tail: strings.Repeat("x/", 2000)})

	f.Fuzz(ft.check)
}

// ---- the harness (the same in every service's fuzz_test.go) ----

// fuzzInput is one request the fuzzer builds: the path is one of the
// target's route prefixes (route, modulo their number) followed by tail.
type fuzzInput struct {
	method      string
	route       uint8
	tail, query string
	authn       uint8 // which Authorization header (authnNone…)
	contentType string
	idemKey     string
	body        []byte
}

// The Authorization headers the fuzzer picks from.
const (
	authnNone = iota
	authnGarbage
	authnCitizen   // of fuzzTenant
	authnAttendant // of fuzzTenant
	authnOperator  // of fuzzTenant
	authnAll       // every role, of fuzzTenant
	authnOtherCitizen
	authnOtherStaff // attendant and operator of another tenant
	authnExpired
	authnUnknownRole
	authnBadSignature
	authnBasic
	authnCount
)

// fuzzTarget is a running service and what the harness needs to call it.
type fuzzTarget struct {
	base   string
	routes []string
	authz  [authnCount]string
	client *http.Client
}

// The tenant and subjects of the fuzzer's tokens; a fresh tenant each run
// (the object store is shared between runs).
var (
	fuzzTenant  = "org-fuzz-" + randHex(3)
	fuzzCitizen = "citizen-fuzz"
)

func newFuzzTarget(tb testing.TB, base string, keys *auth.DevKeys) *fuzzTarget {
	tb.Helper()
	mint := func(tenant, sub string, ttl time.Duration, roles ...string) string {
		tok, err := keys.Mint(auth.Claims{Subject: sub, TenantID: tenant, Roles: roles}, ttl)
		if err != nil {
			tb.Fatal(err)
		}
		return "Bearer " + tok
	}
	ft := &fuzzTarget{base: base, routes: []string{"/"}, client: &http.Client{
		Timeout: 30 * time.Second,
		// A redirect (the mux cleaning a path) is an answer like any other.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	ft.authz[authnGarbage] = "Bearer not-a-token"
	ft.authz[authnCitizen] = mint(fuzzTenant, fuzzCitizen, time.Hour, auth.RoleCitizen)
	ft.authz[authnAttendant] = mint(fuzzTenant, "attendant-fuzz", time.Hour, auth.RoleAttendant)
	ft.authz[authnOperator] = mint(fuzzTenant, "operator-fuzz", time.Hour, auth.RoleOperator)
	ft.authz[authnAll] = mint(fuzzTenant, fuzzCitizen, time.Hour, auth.RoleCitizen, auth.RoleAttendant, auth.RoleOperator)
	ft.authz[authnOtherCitizen] = mint(fuzzTenant+"-other", fuzzCitizen, time.Hour, auth.RoleCitizen)
	ft.authz[authnOtherStaff] = mint(fuzzTenant+"-other", "staff-fuzz", time.Hour, auth.RoleAttendant, auth.RoleOperator)
	ft.authz[authnExpired] = mint(fuzzTenant, "attendant-fuzz", -time.Hour, auth.RoleAttendant, auth.RoleOperator)
	ft.authz[authnUnknownRole] = mint(fuzzTenant, "auditor-fuzz", time.Hour, "auditor")
	good := ft.authz[authnOperator]
	ft.authz[authnBadSignature] = good[:len(good)-4] + "AAAA"
	ft.authz[authnBasic] = "Basic ZnV6ejpmdXp6"
	return ft
}

func (ft *fuzzTarget) add(f *testing.F, in fuzzInput) {
	f.Add(in.method, in.route, in.tail, in.query, in.authn, in.contentType, in.idemKey, in.body)
}

// maxFuzzLine keeps the request line and headers well inside what net/http
// reads before answering 431 on its own (1 MB): that answer is the HTTP
// library's, not the service's.
const maxFuzzLine = 64 << 10

// check is the fuzz function: one request, and what its answer must be.
func (ft *fuzzTarget) check(t *testing.T, method string, route uint8, tail, query string, authn uint8, contentType, idemKey string, body []byte) {
	if !validMethod(method) {
		// Not a token a client can send: one of the usual methods instead,
		// so that every input makes a request.
		method = fuzzMethods[len(method)%len(fuzzMethods)]
	}
	if len(tail)+len(query)+len(contentType)+len(idemKey) > maxFuzzLine {
		return
	}
	in := fuzzInput{method, route, tail, query, authn, contentType, idemKey, body}
	status, header, data := ft.send(in)
	target := ft.routes[int(route)%len(ft.routes)] + tail
	t.Logf("%s %.80q ?%.40q authn %d → %d", method, target, query, authn, status)
	switch {
	case status >= 500:
		t.Fatalf("%s %q ?%q (Content-Type %q, authn %d) = %d (Retry-After %q): %s",
			method, target, query, contentType, authn, status, header.Get("Retry-After"), data)
	case status >= 400:
		if ct := header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%s %q ?%q = %d with Content-Type %q, want application/problem+json: %q", method, target, query, status, ct, data)
		}
		if method == http.MethodHead {
			return // no body to check
		}
		var p struct {
			Status int    `json:"status"`
			Title  string `json:"title"`
		}
		if err := json.Unmarshal(data, &p); err != nil || p.Status != status || p.Title == "" {
			t.Fatalf("%s %q ?%q = %d with problem %q, want a JSON problem with status %d and a title (%v)", method, target, query, status, data, status, err)
		}
	}
}

// send makes in an HTTP request and returns the answer. Bytes a header
// cannot carry (controls) are dropped; the path and query are escaped as a
// client would, so NUL and invalid UTF-8 reach the service percent-encoded.
// A request that gets no answer (the connection closed: a handler
// panicked) is reported as status 599, a failure like any 5xx.
func (ft *fuzzTarget) send(in fuzzInput) (int, http.Header, []byte) {
	req, err := http.NewRequest(in.method, ft.base, bytes.NewReader(in.body))
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	req.URL.Path = ft.routes[int(in.route)%len(ft.routes)] + in.tail
	req.URL.RawQuery = fuzzQuery(in.query)
	if a := ft.authz[int(in.authn)%authnCount]; a != "" {
		req.Header.Set("Authorization", a)
	}
	if in.contentType != "" {
		req.Header.Set("Content-Type", headerSafe(in.contentType))
	}
	if in.idemKey != "" {
		req.Header.Set("Idempotency-Key", headerSafe(in.idemKey))
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

var fuzzMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

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

// fuzzQuery keeps the printable ASCII of raw as it is (malformed escapes
// such as %zz included, for the service to parse) and percent-encodes
// every other byte, so the request line stays valid.
func fuzzQuery(raw string) string {
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
