package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// FuzzHTTP sends the analytics service's REST API (the report, the report
// exports, the DLQ API, the host's routes) arbitrary requests (method, path under its routes,
// query, Content-Type, body, and a token from a fixed set: none, garbage,
// each role, another tenant's, expired) and fails on any 5xx (503 included:
// the database is up here) and on any 4xx that is not an RFC 9457 problem.
// The service runs once, for real, as in the other tests; the seeds (valid
// calls to every route, then known-nasty inputs) run in every `go test`.
// Fuzz with `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/analytics/
func FuzzHTTP(f *testing.F) {
	s := newStack(f).start(f, nil)
	ft := httpfuzz.New(f, s.url, s.Keys)
	// One request of the fuzz tenant in the projection, so reports have rows.
	today := time.Now().UTC().Format(time.DateOnly)
	s.publish(f, "request.submitted.v1", ft.Tenant, map[string]any{
		"requestId": uuid.NewString(), "protocol": "AG-FUZZ", "serviceId": "iptu", "formId": "f", "formVersion": 1,
		"channel": "web", "citizenId": ft.Citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339)})
	q := "from=" + today + "&to=" + today
	ft.Routes = []string{"/v1/analytics/requests"}
	fabrictest.Eventually(f, 20*time.Second, "the fuzz tenant's request in the report", func() bool {
		status, _, body := ft.Send(httpfuzz.Input{Method: "GET", Query: q, Authn: httpfuzz.AuthnAttendant})
		return status == http.StatusOK && strings.Contains(string(body), `"requests":1`)
	})
	// One export of the fuzz tenant, done, so GET has a link to sign.
	const ctJSON = "application/json"
	ft.Routes = []string{"/v1/reports/exports"}
	status, header, body := ft.Send(httpfuzz.Input{Method: "POST", Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON,
		Body: []byte(`{"from":"` + today + `","to":"` + today + `"}`)})
	if status != http.StatusAccepted {
		f.Fatalf("POST /v1/reports/exports = %d %s", status, body)
	}
	exportID := strings.TrimPrefix(header.Get("Location"), "/v1/reports/exports/")
	ft.Routes = []string{"/v1/reports/exports/" + exportID}
	fabrictest.Eventually(f, 30*time.Second, "the fuzz tenant's export done", func() bool {
		status, _, body := ft.Send(httpfuzz.Input{Method: "GET", Authn: httpfuzz.AuthnAttendant})
		return status == http.StatusOK && strings.Contains(string(body), `"status":"done"`)
	})
	ft.Routes = []string{
		"/v1/analytics/requests",
		"/v1/analytics/",
		"/",
		"/v1/reports/exports",
		"/v1/reports/exports/",
	}
	const (
		rReport = iota
		rAnalytics
		rRoot
		rExports
		rExport
	)
	add := func(in httpfuzz.Input) { ft.Add(f, in) }

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "GET", Route: rReport, Query: q, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rReport, Query: "from=2026-01-01&to=2026-01-31", Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rExports, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON,
		Body: []byte(`{"from":"2026-01-01","to":"2026-01-31","format":"parquet"}`)})
	add(httpfuzz.Input{Method: "GET", Route: rExport, Tail: exportID, Authn: httpfuzz.AuthnOperator})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rReport, Query: q, Authn: a})
	}
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rExport, Tail: exportID, Authn: a})
		add(httpfuzz.Input{Method: "POST", Route: rExports, Authn: a, ContentType: ctJSON, Body: []byte(`{"from":"` + today + `","to":"` + today + `"}`)})
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rExports, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(`{}`)})
		add(httpfuzz.Input{Method: m, Route: rExport, Tail: exportID, Authn: httpfuzz.AuthnAll})
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rReport, Query: q, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(`{}`)})
	}

	// Known-nasty input.
	for _, query := range []string{"", "from=", "to=" + today, "from=" + today, "from=2026-02-01&to=2026-01-01",
		"from=2026-02-30&to=2026-03-01", "from=2020-01-01&to=2026-01-01", "from=0000-01-01&to=0000-01-31",
		"from=9999-12-01&to=9999-12-31", "from=0001-01-01&to=0001-01-01", "from=1970-01-01&to=1970-01-01",
		"from=2026-1-1&to=2026-1-2", "from=+2026-01-01&to=2026-01-02", "from=2026-01-01T00:00:00Z&to=2026-01-02",
		"from=2026-01-01%00&to=2026-01-02", "from=%ff&to=%zz", "from=" + today + "&from=2000-01-01&to=" + today,
		"from=" + strings.Repeat("9", 5000) + "&to=" + today, q + ";x=1", "a=%00&b=%ff&c=%zz&;",
		"from=２０２６-01-01&to=2026-01-02"} {
		add(httpfuzz.Input{Method: "GET", Route: rReport, Query: query, Authn: httpfuzz.AuthnAttendant})
	}
	for _, tail := range []string{"requests/", "requests/x", "a\x00b", "\xff\xfe", "../../../etc/passwd", "%2e%2e%2f", strings.Repeat("c", 10000), ""} {
		add(httpfuzz.Input{Method: "GET", Route: rAnalytics, Tail: tail, Query: q, Authn: httpfuzz.AuthnAttendant})
	}
	add(httpfuzz.Input{Method: "GET", Route: rReport, Query: q, Authn: httpfuzz.AuthnAttendant, ContentType: "\xff/\xfe", Body: []byte("\x00\xff")})
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})
	for _, body := range []string{"", "{}", "null", "[]", `"x"`, "{", `{"from":"0000-01-01","to":"0000-01-31"}`,
		`{"from":"9999-12-01","to":"9999-12-31","format":"parquet"}`, `{"from":"0001-01-01","to":"0001-01-01"}`,
		`{"from":"2026-01-01","to":"2026-01-02","format":""}`, `{"from":"2026-01-01","to":"2026-01-02","format":null}`,
		`{"from":"2026-01-01","to":"2026-01-02","format":"PARQUET"}`, `{"from":"2026-01-01","to":"2026-01-02","format":"csv\u0000"}`,
		`{"from":"2026-01-01","to":"2026-01-02"}{"x":1}`, `{"from":"2026-01-01","from":"2026-01-05","to":"2026-01-02"}`,
		`{"from":"２０２６-01-01","to":"2026-01-02"}`, `{"from":"` + strings.Repeat("9", 5000) + `","to":"2026-01-02"}`,
		`{"from":"2026-01-01","to":"2026-01-02","extra":true}`, "\x00\xff"} {
		add(httpfuzz.Input{Method: "POST", Route: rExports, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: []byte(body)})
	}
	add(httpfuzz.Input{Method: "POST", Route: rExports, Authn: httpfuzz.AuthnAttendant, ContentType: "text/csv", Body: []byte(`{"from":"2026-01-01","to":"2026-01-02"}`)})
	add(httpfuzz.Input{Method: "POST", Route: rExports, Authn: httpfuzz.AuthnAttendant, ContentType: "application/json; charset=\xff", Body: []byte(`{}`)})
	for _, tail := range []string{"", "x", "urn:uuid:" + exportID, strings.ToUpper(exportID), "{" + exportID + "}", exportID + "/", exportID + "/x",
		"0190a0b0-0000-7000-8000-000000000000", "a\x00b", "%00", "../../analytics/requests", strings.Repeat("f", 10000)} {
		add(httpfuzz.Input{Method: "GET", Route: rExport, Tail: tail, Authn: httpfuzz.AuthnAttendant})
	}

	ft.AddHostSeeds(f, requestEventsQueue, exportQueue)
	f.Fuzz(ft.Check)
}
