package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// FuzzHTTP sends the data lake's REST API (lineage, history, the DLQ API,
// the host's routes) arbitrary requests (method, path under its routes,
// query, Content-Type, body, and a token from a fixed set: none, garbage,
// each role, another tenant's, expired) and fails on any 5xx (503 included: the
// database is up here) and on any 4xx that is not an RFC 9457 problem. The
// service runs once, for real, as in the other tests; the seeds (valid
// calls to every route, then known-nasty inputs) run in every `go test`.
// Fuzz with `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/datalake-ingestion/
func FuzzHTTP(f *testing.F) {
	s := startStack(f, map[string]string{"LOG_LEVEL": "warn"})
	ft := httpfuzz.New(f, s.url, s.Keys)
	// One event of the fuzz tenant in the lake, so the fuzzer starts from a
	// lineage that exists.
	e, err := envelope.New("request.submitted.v1", ft.Tenant, "request-service", map[string]any{
		"requestId": uuid.NewString(), "protocol": "AG-FUZZ", "serviceId": "iptu", "formId": "f", "formVersion": 1,
		"channel": "web", "citizenId": ft.Citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		f.Fatal(err)
	}
	s.Publish(f, e)
	ft.Routes = []string{"/v1/lineage/" + e.ID}
	fabrictest.Eventually(f, 20*time.Second, "the lineage of event "+e.ID, func() bool {
		status, _, _ := ft.Send(httpfuzz.Input{Method: "GET", Authn: httpfuzz.AuthnAttendant})
		return status == http.StatusOK
	})
	ft.Routes = []string{
		"/v1/lineage/",
		"/v1/lineage/" + e.ID,
		"/",
		"/v1/history",
	}
	const (
		rLineages = iota
		rLineage
		rRoot
		rHistory
	)
	const ctJSON = "application/json"
	add := func(in httpfuzz.Input) { ft.Add(f, in) }

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "GET", Route: rLineage, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rLineage, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rLineages, Tail: uuid.NewString(), Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rHistory, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rHistory, Authn: httpfuzz.AuthnOperator, Query: "type=request.submitted.v1&type=request.cancelled.v1" +
		"&correlationId=" + e.CorrelationID + "&from=2026-01-01T00:00:00Z&to=2100-01-01T00:00:00%2B03:00&limit=1"})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rLineage, Authn: a})
		add(httpfuzz.Input{Method: "GET", Route: rHistory, Authn: a})
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rLineage, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(`{}`)})
	}

	// Known-nasty input.
	// Other spellings of a UUID (Go's uuid.Parse takes them all).
	for _, alias := range []string{"urn:uuid:" + e.ID, "{" + e.ID + "}", strings.ReplaceAll(e.ID, "-", ""), strings.ToUpper(e.ID)} {
		add(httpfuzz.Input{Method: "GET", Route: rLineages, Tail: alias, Authn: httpfuzz.AuthnAttendant})
	}
	for _, tail := range []string{"a\x00b", "\xff\xfe", "../../../etc/passwd", "%2e%2e%2f", strings.Repeat("9", 10000),
		"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", e.ID + "/x", e.ID + "x", " " + e.ID, ""} {
		add(httpfuzz.Input{Method: "GET", Route: rLineages, Tail: tail, Authn: httpfuzz.AuthnAttendant})
	}
	for _, query := range []string{"a=%00", "b=%ff", "c=%zz&;", "eventId=" + uuid.NewString()} {
		add(httpfuzz.Input{Method: "GET", Route: rLineage, Query: query, Authn: httpfuzz.AuthnAttendant})
	}
	add(httpfuzz.Input{Method: "GET", Route: rLineage, Authn: httpfuzz.AuthnAttendant, ContentType: "\xff/\xfe", Body: []byte("\x00\xff")})
	for _, query := range []string{"limit=0", "limit=-1", "limit=99999999999999999999", "from=0000-01-01T00:00:00Z&to=9999-12-31T23:59:59.999999999Z",
		"from=9999-12-31T23:59:59Z&to=0000-01-01T00:00:00Z", "after=eyJ0IjoiMDAwMS0wMS0wMVQwMDowMDowMFoiLCJpZCI6IjAxOTBhMGIwLTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMCJ9",
		"after=e30", "after=bnVsbA", "after=%00", "type=%ff", "type=" + strings.Repeat("a.", 5000) + "v1", "correlationId=urn:uuid:" + e.CorrelationID,
		"a=%00", "c=%zz&;", "type"} {
		add(httpfuzz.Input{Method: "GET", Route: rHistory, Query: query, Authn: httpfuzz.AuthnOperator})
	}
	for _, m := range []string{"POST", "DELETE"} {
		add(httpfuzz.Input{Method: m, Route: rHistory, Authn: httpfuzz.AuthnOperator, ContentType: ctJSON, Body: []byte(`{}`)})
	}
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})

	ft.AddHostSeeds(f, "datalake.request-events", "datalake.platform-events")
	f.Fuzz(ft.Check)
}
