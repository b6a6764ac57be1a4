package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// FuzzHTTP sends the workflow service's REST API arbitrary requests (method,
// path under its routes, query, Content-Type, body, and a token from a fixed
// set: none, garbage, each role, another tenant's, expired) and fails on any
// 5xx (503 included: the database is up here) and on any 4xx that is not an
// RFC 9457 problem. The service runs once, for real, as in the other tests;
// the seeds (valid calls to every route, then known-nasty inputs) run in
// every `go test`. Fuzz with `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/workflow/
func FuzzHTTP(f *testing.F) {
	p := newPlatform(f)
	url := p.start(f, map[string]string{"LOG_LEVEL": "warn"})
	ft := httpfuzz.New(f, url, p.keys)
	// A process of the fuzz tenant (building-permit: several steps, for
	// attendants and operators), so the fuzzer starts from paths that
	// reach the database.
	requestID := uuid.NewString()
	sub, err := envelope.New("request.submitted.v1", ft.Tenant, "request-service", map[string]any{
		"requestId": requestID, "protocol": "AGR-2026-000001", "serviceId": "building-permit", "formId": "f",
		"formVersion": 1, "channel": "web", "citizenId": ft.Citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.pub.Publish(ctx, sub); err != nil {
		f.Fatalf("publish %s: %v", sub.Type, err)
	}
	ft.Routes = []string{"/v1/processes"}
	var taskID string
	fabrictest.Eventually(f, 20*time.Second, "the process of request "+requestID, func() bool {
		status, _, body := ft.Send(httpfuzz.Input{Method: "GET", Query: "requestId=" + requestID, Authn: httpfuzz.AuthnAttendant})
		var list struct {
			Processes []struct {
				Tasks []struct {
					ID string `json:"id"`
				} `json:"tasks"`
			} `json:"processes"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Processes) == 0 || len(list.Processes[0].Tasks) == 0 {
			return false
		}
		taskID = list.Processes[0].Tasks[0].ID
		return true
	})
	ft.Routes = []string{
		"/v1/processes",
		"/v1/tasks/",
		"/v1/tasks/" + taskID + "/complete",
		"/v1/dlq/",
		"/v1/dlq/" + requestSubmittedQueue,
		"/healthz", "/readyz", "/metrics", "/",
	}
	const (
		rProcesses = iota
		rTasks
		rComplete
		rDLQ
		rQueue
		rHealthz
		rReadyz
		rMetrics
		rRoot
	)
	const ctJSON = "application/json"
	add := func(in httpfuzz.Input) { ft.Add(f, in) }
	q := "requestId=" + requestID

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: q, Authn: httpfuzz.AuthnCitizen})
	add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: q, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: q, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnOperator, ContentType: ctJSON, Body: []byte(`{"outcome":"maybe"}`)})
	add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: []byte(`{"outcome":"done"}`)})
	add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAll})
	add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: uuid.NewString() + "/complete", Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(`{"outcome":"approved"}`)})
	add(httpfuzz.Input{Method: "GET", Route: rQueue, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rDLQ, Tail: "audit", Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rQueue, Tail: "/letters/0190a0b0-0000-7000-8000-000000000000", Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/replay", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":{"ids":["0190a0b0-0000-7000-8000-000000000000"]},"reason":"fuzz","dryRun":true}`)})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/purge", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":{"all":true},"reason":"fuzz","dryRun":true}`)})
	add(httpfuzz.Input{Method: "GET", Route: rHealthz})
	add(httpfuzz.Input{Method: "GET", Route: rReadyz})
	add(httpfuzz.Input{Method: "GET", Route: rMetrics})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: q, Authn: a})
		add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: a})
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rProcesses, Query: q, Authn: httpfuzz.AuthnAll})
		add(httpfuzz.Input{Method: m, Route: rComplete, Authn: httpfuzz.AuthnAll})
		add(httpfuzz.Input{Method: m, Route: rQueue, Authn: httpfuzz.AuthnOperator})
	}

	// Known-nasty input.
	for _, id := range []string{requestID, taskID} {
		// Other spellings of a UUID (Go's uuid.Parse takes them all).
		for _, alias := range []string{"urn:uuid:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", ""), strings.ToUpper(id)} {
			add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: "requestId=" + alias, Authn: httpfuzz.AuthnAttendant})
			add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: alias + "/complete", Authn: httpfuzz.AuthnAll})
		}
	}
	for _, query := range []string{"", "requestId=", "requestId=%00", "requestId=%ff", "requestId=%zz", "requestId=" + requestID + "&requestId=x",
		"requestId=" + strings.Repeat("9", 5000), "requestId=" + requestID + ";x=1", "a=%00&b=%ff&c=%zz&;"} {
		add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: query, Authn: httpfuzz.AuthnAttendant})
	}
	for _, tail := range []string{"a\x00b/complete", "\xff\xfe/complete", "../../../etc/passwd", "%2e%2e%2fcomplete",
		strings.Repeat("9", 10000) + "/complete", "x/complete/extra", ""} {
		add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: tail, Authn: httpfuzz.AuthnAll})
	}
	for _, body := range []string{"", "null", "[]", `"x"`, "{", `{"outcome":"done"}{}`, `{"outcome":"done","x":1}`,
		"{\"outcome\":\"a\x00\"}", "{\"outcome\":\"\xff\"}", `{"outcome":"\ud800"}`, `{"outcome":1e400}`, `{"outcome":null}`,
		`{"outcome":"` + strings.Repeat("o", 20000) + `"}`, strings.Repeat("[", 10000), `{"outcome":` + strings.Repeat("[", 5000) + `}`} {
		add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(body)})
	}
	for _, ctype := range []string{"", "text/plain", "application/json; charset=latin1", "application/problem+json",
		"application/json;;", "multipart/form-data; boundary=x", "\xff/\xfe", "application/x-www-form-urlencoded"} {
		add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAll, ContentType: ctype, Body: []byte(`{"outcome":"done"}`)})
	}
	add(httpfuzz.Input{Method: "GET", Route: rDLQ, Tail: "a/b/c", Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "GET", Route: rDLQ, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rQueue, Tail: "/purge", Authn: httpfuzz.AuthnOperator, ContentType: ctJSON,
		Body: []byte(`{"filter":{"reason":"x"},"reason":"r","dryRun":1e999}`)})
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})

	f.Fuzz(ft.Check)
}
