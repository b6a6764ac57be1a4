package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
	"github.com/agora-platform/agora/pkg/fabric/keyset"
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
	ft := httpfuzz.New(f, url, p.Keys)
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
	if err := p.Pub.Publish(ctx, sub); err != nil {
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
		"/",
		"/v1/tasks",
		"/v1/tasks/" + taskID + "/claim",
		"/v1/tasks/" + taskID + "/release",
	}
	const (
		rProcesses = iota
		rTasks
		rComplete
		rRoot
		rWorklist
		rClaim
		rRelease
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
	add(httpfuzz.Input{Method: "GET", Route: rWorklist, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rWorklist, Authn: httpfuzz.AuthnOperator, Query: "status=open&role=attendant&sla=due_soon&assignee=me&limit=2"})
	add(httpfuzz.Input{Method: "GET", Route: rWorklist, Authn: httpfuzz.AuthnAll, Query: "sla=breached&assignee=attendant-fuzz&limit=200"})
	add(httpfuzz.Input{Method: "GET", Route: rWorklist, Authn: httpfuzz.AuthnAttendant, Query: "sla=on_time&status=completed&limit=1&cursor=" + cursor(time.Now(), taskID)})
	add(httpfuzz.Input{Method: "POST", Route: rClaim, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "POST", Route: rClaim, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: []byte(`{}`)})
	add(httpfuzz.Input{Method: "POST", Route: rRelease, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "POST", Route: rClaim, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rRelease, Authn: httpfuzz.AuthnOperator})
	add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: uuid.NewString() + "/claim", Authn: httpfuzz.AuthnAll})
	add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: uuid.NewString() + "/release", Authn: httpfuzz.AuthnAll})
	add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnOperator, ContentType: ctJSON, Body: []byte(`{"outcome":"rejected"}`)})
	add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: []byte(`{"outcome":"approved","reason":"documentos conferidos"}`)})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: q, Authn: a})
		add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: a})
	}
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "GET", Route: rWorklist, Authn: a})
		add(httpfuzz.Input{Method: "POST", Route: rClaim, Authn: a})
		add(httpfuzz.Input{Method: "POST", Route: rRelease, Authn: a})
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rWorklist, Authn: httpfuzz.AuthnAll})
		add(httpfuzz.Input{Method: m, Route: rClaim, Authn: httpfuzz.AuthnAll})
		add(httpfuzz.Input{Method: m, Route: rProcesses, Query: q, Authn: httpfuzz.AuthnAll})
		add(httpfuzz.Input{Method: m, Route: rComplete, Authn: httpfuzz.AuthnAll})
	}

	// Known-nasty input.
	for _, id := range []string{requestID, taskID} {
		// Other spellings of a UUID (Go's uuid.Parse takes them all).
		for _, alias := range []string{"urn:uuid:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", ""), strings.ToUpper(id)} {
			add(httpfuzz.Input{Method: "GET", Route: rProcesses, Query: "requestId=" + alias, Authn: httpfuzz.AuthnAttendant})
			add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: alias + "/complete", Authn: httpfuzz.AuthnAll})
			add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: alias + "/claim", Authn: httpfuzz.AuthnAttendant})
			add(httpfuzz.Input{Method: "POST", Route: rTasks, Tail: alias + "/release", Authn: httpfuzz.AuthnOperator})
		}
	}
	// Worklist query values: out of range, repeated, not UTF-8, and cursors
	// that decode but hold dates or ids at the edges of what parses.
	for _, query := range []string{"limit=0", "limit=-1", "limit=201", "limit=%2B5", "limit=1e3", "limit=99999999999999999999",
		"status=%00", "status=open%00", "role=%ff", "sla=due_soon&sla=breached", "assignee=me&assignee=me",
		"assignee=" + strings.Repeat("%F0%9F%98%80", 255), "assignee=" + strings.Repeat("a", 5000), "assignee=%27%20OR%201%3D1--",
		"cursor=", "cursor=%00", "cursor=====", "cursor=" + strings.Repeat("A", 20000), "cursor=e30", "cursor=bnVsbA",
		"cursor=" + cursor(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), taskID),
		"cursor=" + cursor(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), taskID),
		"cursor=" + cursor(time.Now(), "urn:uuid:"+taskID),
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00Z","id":"`+taskID+`","x":1}`)),
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-01-01T00:00:00+14:00","id":"`+taskID+`"}`)),
		"tenantId=" + ft.Tenant + "-other", "a=%00&b=%ff&c=%zz&;"} {
		add(httpfuzz.Input{Method: "GET", Route: rWorklist, Query: query, Authn: httpfuzz.AuthnAll})
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
		`{"outcome":"` + strings.Repeat("o", 20000) + `"}`, strings.Repeat("[", 10000), `{"outcome":` + strings.Repeat("[", 5000) + `}`,
		// Reasons: missing, blank, at and over the limit in characters
		// (not bytes), not a string, NUL, invalid UTF-8, a lone surrogate.
		`{"outcome":"rejected","reason":""}`, `{"outcome":"rejected","reason":" \u00a0\t"}`, `{"outcome":"rejected","reason":null}`,
		`{"outcome":"rejected","reason":"` + strings.Repeat("é", 1000) + `"}`, `{"outcome":"done","reason":"` + strings.Repeat("é", 1001) + `"}`,
		`{"outcome":"rejected","reason":["x"]}`, `{"reason":"só o motivo"}`, "{\"outcome\":\"rejected\",\"reason\":\"a\x00\"}",
		"{\"outcome\":\"rejected\",\"reason\":\"\xff\"}", `{"outcome":"rejected","reason":"\ud800"}`} {
		add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(body)})
	}
	for _, ctype := range []string{"", "text/plain", "application/json; charset=latin1", "application/problem+json",
		"application/json;;", "multipart/form-data; boundary=x", "\xff/\xfe", "application/x-www-form-urlencoded"} {
		add(httpfuzz.Input{Method: "POST", Route: rComplete, Authn: httpfuzz.AuthnAll, ContentType: ctype, Body: []byte(`{"outcome":"done"}`)})
	}
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})
	for _, body := range []string{"null", "[]", `{"assignee":"someone"}`, "{", strings.Repeat("[", 10000)} {
		add(httpfuzz.Input{Method: "POST", Route: rClaim, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(body)})
		add(httpfuzz.Input{Method: "POST", Route: rRelease, Authn: httpfuzz.AuthnAll, ContentType: ctJSON, Body: []byte(body)})
	}

	ft.AddHostSeeds(f, "workflow.request-submitted", "workflow.start-commands", "workflow.sei-register")
	f.Fuzz(ft.Check)
}

// cursor is a worklist cursor as the service writes it (package keyset).
func cursor(due time.Time, id string) string {
	return keyset.Encode(keyset.Position{At: due, ID: id})
}
