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

// FuzzHTTP sends the communication service's REST API arbitrary requests
// (method, path under its routes, query, Content-Type, body, and a token
// from a fixed set: none, garbage, each role, another tenant's, expired)
// and fails on any 5xx (503 included: the database is up here) and on any
// 4xx that is not an RFC 9457 problem. The service runs once, for real, as
// in the other tests; the seeds (valid calls to every route, then
// known-nasty inputs) run in every `go test`. Fuzz with `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/communication/
func FuzzHTTP(f *testing.F) {
	s := newStack(f).start(f, map[string]string{"LOG_LEVEL": "warn"})
	ft := httpfuzz.New(f, s.url, s.Keys)
	const ctJSON = "application/json"
	// The fuzz tenant's citizen has a contact and a notification, so the
	// fuzzer starts from paths that reach the database.
	ft.Routes = []string{"/v1/contacts/" + ft.Citizen}
	if status, _, body := ft.Send(httpfuzz.Input{Method: "PUT", Authn: httpfuzz.AuthnCitizen, ContentType: ctJSON,
		Body: []byte(`{"email":"fuzz@example.org"}`)}); status != http.StatusOK {
		f.Fatalf("PUT contact = %d %s", status, body)
	}
	requestID := uuid.NewString()
	e, err := envelope.New("request.submitted.v1", ft.Tenant, "request-service", map[string]any{
		"requestId": requestID, "protocol": "AGR-2026-000001", "serviceId": "iptu-segunda-via", "formId": "form-1",
		"formVersion": 1, "channel": "web", "citizenId": ft.Citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		f.Fatal(err)
	}
	s.Publish(f, e)
	ft.Routes = []string{"/v1/notifications"}
	q := "requestId=" + requestID
	fabrictest.Eventually(f, 20*time.Second, "the notification of request "+requestID, func() bool {
		status, _, body := ft.Send(httpfuzz.Input{Method: "GET", Query: q, Authn: httpfuzz.AuthnAttendant})
		return status == http.StatusOK && strings.Contains(string(body), requestID)
	})
	ft.Routes = []string{
		"/v1/contacts/",
		"/v1/contacts/" + ft.Citizen,
		"/v1/notifications",
		"/",
	}
	const (
		rContacts = iota
		rContact
		rNotifications
		rRoot
	)
	add := func(in httpfuzz.Input) { ft.Add(f, in) }

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "PUT", Route: rContact, Authn: httpfuzz.AuthnCitizen, ContentType: ctJSON,
		Body: []byte(`{"email":"fuzz@example.org","phone":"+5511999990000","preferredChannel":"sms"}`)})
	add(httpfuzz.Input{Method: "PUT", Route: rContacts, Tail: "citizen-2", Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON,
		Body: []byte(`{"phone":"+5511999990001","preferredChannel":"whatsapp"}`)})
	add(httpfuzz.Input{Method: "GET", Route: rContact, Authn: httpfuzz.AuthnCitizen})
	add(httpfuzz.Input{Method: "GET", Route: rContacts, Tail: "citizen-2", Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rNotifications, Query: q, Authn: httpfuzz.AuthnCitizen})
	add(httpfuzz.Input{Method: "GET", Route: rNotifications, Query: q, Authn: httpfuzz.AuthnOperator})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "PUT", Route: rContact, Authn: a, ContentType: ctJSON, Body: []byte(`{"email":"a@example.org"}`)})
		add(httpfuzz.Input{Method: "GET", Route: rNotifications, Query: q, Authn: a})
	}
	for _, m := range []string{"POST", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rContact, Authn: httpfuzz.AuthnAll})
		add(httpfuzz.Input{Method: m, Route: rNotifications, Query: q, Authn: httpfuzz.AuthnAll})
	}

	// Known-nasty input.
	// Other spellings of a UUID (Go's uuid.Parse takes them all).
	for _, alias := range []string{"urn:uuid:" + requestID, "{" + requestID + "}", strings.ReplaceAll(requestID, "-", ""), strings.ToUpper(requestID)} {
		add(httpfuzz.Input{Method: "GET", Route: rNotifications, Query: "requestId=" + alias, Authn: httpfuzz.AuthnAttendant})
		add(httpfuzz.Input{Method: "GET", Route: rNotifications, Query: "requestId=" + alias, Authn: httpfuzz.AuthnCitizen})
	}
	for _, query := range []string{"", "requestId=", "requestId=%00", "requestId=%ff", "requestId=%zz", q + "&requestId=x",
		"requestId=" + strings.Repeat("9", 5000), q + ";x=1", "a=%00&b=%ff&c=%zz&;"} {
		add(httpfuzz.Input{Method: "GET", Route: rNotifications, Query: query, Authn: httpfuzz.AuthnAttendant})
	}
	for _, tail := range []string{"a\x00b", "\xff\xfe", "../../../etc/passwd", "%2e%2e%2f", strings.Repeat("c", 10000),
		strings.Repeat("c", 200), strings.Repeat("c", 201), "ação", "a/b", " ", "%", ""} {
		add(httpfuzz.Input{Method: "GET", Route: rContacts, Tail: tail, Authn: httpfuzz.AuthnAttendant})
		add(httpfuzz.Input{Method: "PUT", Route: rContacts, Tail: tail, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: []byte(`{"email":"a@example.org"}`)})
	}
	for _, body := range []string{"", "null", "[]", `"x"`, "{", `{"email":"a@example.org"}{}`, `{"mail":"a@example.org"}`,
		"{\"email\":\"a\x00@example.org\"}", "{\"email\":\"\xff@example.org\"}", `{"email":"\ud800@example.org"}`,
		`{"email":"Fuzz <fuzz@example.org>"}`, `{"email":" fuzz@example.org "}`, `{"email":"a@b"}`, `{"email":"\"a b\"@example.org"}`,
		`{"email":"a@[127.0.0.1]"}`, `{"email":"` + strings.Repeat("a", 250) + `@example.org"}`, `{"email":"ação@exemplo.br"}`,
		`{"phone":"+5511999990000","preferredChannel":"whatsapp"}`, `{"phone":"+0"}`, `{"phone":1e400}`, `{"phone":"+99999999999999999999"}`,
		`{"email":"a@example.org","preferredChannel":"fax"}`, `{"email":"a@example.org","preferredChannel":"SMS"}`,
		`{"email":"a@example.org","preferredChannel":""}`, `{"email":` + strings.Repeat("[", 5000) + `}`,
		`{"email":"` + strings.Repeat("x", 20000) + `"}`} {
		add(httpfuzz.Input{Method: "PUT", Route: rContact, Authn: httpfuzz.AuthnCitizen, ContentType: ctJSON, Body: []byte(body)})
	}
	for _, ctype := range []string{"", "text/plain", "application/json; charset=latin1", "\xff/\xfe", "multipart/form-data; boundary=x",
		"application/x-www-form-urlencoded"} {
		add(httpfuzz.Input{Method: "PUT", Route: rContact, Authn: httpfuzz.AuthnCitizen, ContentType: ctype, Body: []byte(`{"email":"fuzz@example.org"}`)})
	}
	// A multipart body is not checked at the edge (its parts may be binary).
	add(httpfuzz.Input{Method: "PUT", Route: rContact, Authn: httpfuzz.AuthnCitizen, ContentType: "multipart/form-data; boundary=x",
		Body: []byte(`{"email":"fuzz@example.org","preferredChannel":"\u0000"}`)})
	add(httpfuzz.Input{Method: "PUT", Route: rContact, Authn: httpfuzz.AuthnCitizen, ContentType: "multipart/form-data; boundary=x",
		Body: []byte("{\"email\":\"fuzz@example.org\",\"preferredChannel\":\"\xff\"}")})
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})

	ft.AddHostSeeds(f, "communication.request-submitted", "communication.send-commands")
	f.Fuzz(ft.Check)
}
