package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// FuzzHTTP sends what the document worker serves (the DLQ API and the
// host's routes: it has no API of its own) arbitrary requests (method, path,
// query, Content-Type, body, and a token from a fixed set: none, garbage,
// each role, another tenant's, expired) and fails on any 5xx (503 included:
// the database and broker are up here) and on any 4xx that is not an RFC
// 9457 problem. The service runs once, for real, as in the other tests, with
// one dead letter of the fuzz tenant in its DLQ; the seeds (valid calls to
// every route, then known-nasty inputs) run in every `go test`. Fuzz with
// `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/document-worker/
func FuzzHTTP(f *testing.F) {
	const queue = "document.processing"
	s := newStack(f)
	ft := httpfuzz.New(f, s.start(map[string]string{"LOG_LEVEL": "warn"}).URL, s.Keys)
	// A file the worker refuses at once (permanent failure): its message
	// is the fuzz tenant's letter in document.processing.dlq.
	s.upload(upload{tenant: ft.Tenant, contentType: "application/zip", name: "x.zip", data: []byte("PK\x03\x04zip")})
	ft.Routes = []string{"/v1/dlq/" + queue}
	var letter string
	fabrictest.Eventually(f, 30*time.Second, "the fuzz tenant's dead letter", func() bool {
		status, _, body := ft.Send(httpfuzz.Input{Method: "GET", Authn: httpfuzz.AuthnOperator})
		var letters []struct {
			MessageID string `json:"messageId"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &letters) != nil || len(letters) == 0 {
			return false
		}
		letter = letters[0].MessageID
		return true
	})
	ft.Routes = []string{
		"/v1/dlq/",
		"/v1/dlq/" + queue,
		"/v1/dlq/" + queue + "/letters/" + letter,
		"/healthz", "/readyz", "/metrics", "/",
	}
	const (
		rDLQ = iota
		rQueue
		rLetter
		rHealthz
		rReadyz
		rMetrics
		rRoot
	)
	const ctJSON = "application/json"
	add := func(in httpfuzz.Input) { ft.Add(f, in) }
	ids := `{"ids":["` + letter + `"]}`

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "GET", Route: rQueue, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rLetter, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rDLQ, Tail: "audit", Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/replay", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":` + ids + `,"reason":"fuzz","dryRun":true}`)})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/purge", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":` + ids + `,"reason":"fuzz","dryRun":true}`)})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/replay", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":{"type":"document.uploaded.v1","reason":"PERMANENT"},"reason":"fuzz"}`)})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/purge", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":{"all":true},"reason":"fuzz","dryRun":true}`)})
	add(httpfuzz.Input{Method: "GET", Route: rHealthz})
	add(httpfuzz.Input{Method: "GET", Route: rReadyz})
	add(httpfuzz.Input{Method: "GET", Route: rMetrics})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rLetter, Authn: a})
		add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/replay", Authn: a, ContentType: ctJSON,
			Body: []byte(`{"filter":` + ids + `,"reason":"fuzz","dryRun":true}`)})
	}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rLetter, Authn: httpfuzz.AuthnOperator})
		add(httpfuzz.Input{Method: m, Route: rHealthz})
		add(httpfuzz.Input{Method: m, Route: rRoot, Tail: "v1/anything"})
	}

	// Known-nasty input.
	for _, tail := range []string{"", "a/b/c", "audit/x", strings.Repeat("q", 5000), "document.processing.dlq", "a\x00b",
		"\xff\xfe", "../../../etc/passwd", "%2e%2e%2f", "document.processing/letters/", "document.processing/letters/" + strings.Repeat("9", 10000),
		"document.processing/letters/" + letter + "/x", "document.processing/replay/x", "request.workflow-events"} {
		add(httpfuzz.Input{Method: "GET", Route: rDLQ, Tail: tail, Authn: httpfuzz.AuthnOperator})
	}
	for _, body := range []string{"", "null", "[]", `"x"`, "{", `{"filter":{"all":true},"reason":"r","dryRun":true}{}`,
		`{"filter":{},"reason":"r"}`, `{"filter":{"all":true}}`, `{"filter":{"all":true},"reason":"   "}`,
		`{"filter":{"all":true},"reason":"r","operator":"someone-else","dryRun":true}`,
		`{"filter":{"tenant":"org-other","all":true},"reason":"r","dryRun":true}`,
		`{"filter":{"ids":["` + strings.Repeat("z", 20000) + `"]},"reason":"r"}`, `{"filter":{"ids":[]},"reason":"r"}`,
		`{"filter":{"ids":null,"type":"\u00e9"},"reason":"r","dryRun":true}`, `{"filter":{"all":true},"reason":"r","dryRun":1e999}`,
		"{\"filter\":{\"all\":true},\"reason\":\"a\x00\"}", "{\"filter\":{\"all\":true},\"reason\":\"\xff\"}",
		`{"filter":{"all":true},"reason":"\ud800"}`, `{"filter":{"all":true},"reason":"` + strings.Repeat("r", 70000) + `"}`,
		`{"filter":` + strings.Repeat("[", 5000) + `}`, strings.Repeat("[", 10000)} {
		add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/purge", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON, Body: []byte(body)})
	}
	for _, ctype := range []string{"text/plain", "application/json; charset=latin1", "\xff/\xfe", "multipart/form-data; boundary=x",
		"application/x-www-form-urlencoded"} {
		add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/replay", Authn: httpfuzz.AuthnOperator, ContentType: ctype,
			Body: []byte(`{"filter":` + ids + `,"reason":"fuzz","dryRun":true}`)})
	}
	add(httpfuzz.Input{Method: "GET", Route: rQueue, Query: "a=%00&b=%ff&c=%zz&;", Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rReadyz, Query: "a=%00"})
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})

	f.Fuzz(ft.Check)
}
