package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// FuzzHTTP sends the request service's REST API arbitrary requests (method,
// path under its routes, query, Content-Type, Idempotency-Key, body, and a
// token from a fixed set: none, garbage, each role, another tenant's,
// expired) and fails on any 5xx (503 included: the database is up here) and
// on any 4xx that is not an RFC 9457 problem. The service runs once, for
// real, as in the other tests; the seeds (valid calls to every route, then
// known-nasty inputs) run in every `go test`. Fuzz with
// `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/request/
func FuzzHTTP(f *testing.F) {
	// No per-tenant limit: past the default burst every submission would
	// be a 429 and the fuzzer would never reach the submit route's checks.
	s := start(f, map[string]string{"LOG_LEVEL": "warn", "SUBMIT_RATE_PER_TENANT": "0"})
	ft := httpfuzz.New(f, s.url, s.Keys)
	// One request of the fuzz tenant's citizen, so the fuzzer starts from
	// paths that reach the database.
	ft.Routes = []string{"/v1/requests"}
	status, _, body := ft.Send(httpfuzz.Input{Method: "POST", Route: 0, Authn: httpfuzz.AuthnCitizen,
		ContentType: "application/json", Body: []byte(validBody)})
	if status != http.StatusCreated {
		f.Fatalf("POST /v1/requests = %d %s", status, body)
	}
	var rc receipt
	if err := json.Unmarshal(body, &rc); err != nil {
		f.Fatal(err)
	}
	id := rc.ID
	ft.Routes = []string{
		"/v1/requests",
		"/v1/requests/",
		"/v1/requests/" + id,
		"/v1/requests/" + id + "/documents",
		"/",
	}
	const (
		rSubmit = iota
		rRequests
		rRequest
		rDocuments
		rRoot
	)
	const ctJSON = "application/json"
	upload := func(parts ...string) (string, []byte) {
		return "multipart/form-data; boundary=fuzzb", []byte(strings.Join(parts, ""))
	}
	filePart := func(name, content string) string {
		return "--fuzzb\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + name + "\"\r\n" +
			"Content-Type: text/plain\r\n\r\n" + content + "\r\n"
	}
	const closing = "--fuzzb--\r\n"
	add := func(in httpfuzz.Input) { ft.Add(f, in) }

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "POST", Route: rSubmit, Authn: httpfuzz.AuthnCitizen, ContentType: ctJSON, IdemKey: "fuzz-key-1", Body: []byte(validBody)})
	add(httpfuzz.Input{Method: "GET", Route: rRequest, Authn: httpfuzz.AuthnCitizen})
	add(httpfuzz.Input{Method: "GET", Route: rRequest, Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rDocuments, Authn: httpfuzz.AuthnOperator})
	ct, b := upload(filePart("comprovante.txt", "linha de texto\n"), closing)
	add(httpfuzz.Input{Method: "POST", Route: rDocuments, Authn: httpfuzz.AuthnCitizen, ContentType: ct, Body: b})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "POST", Route: rSubmit, Authn: a, ContentType: ctJSON, Body: []byte(validBody)})
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rRequest, Authn: httpfuzz.AuthnAll})
	}

	// Known-nasty input.
	add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: "a\x00b", Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: "\xff\xfe", Authn: httpfuzz.AuthnAttendant})
	// Other spellings of a UUID (Go's uuid.Parse takes them all).
	for _, alias := range []string{"urn:uuid:" + id, "{" + id + "}", strings.ReplaceAll(id, "-", ""), strings.ToUpper(id)} {
		add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: alias, Authn: httpfuzz.AuthnAttendant})
		add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: alias + "/documents", Authn: httpfuzz.AuthnCitizen})
		add(httpfuzz.Input{Method: "POST", Route: rRequests, Tail: alias + "/documents", Authn: httpfuzz.AuthnCitizen, ContentType: "multipart/form-data; boundary=fuzzb",
			Body: []byte(filePart("a.txt", "texto") + closing)})
	}
	add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: "../../../etc/passwd", Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: "%2e%2e%2f%2e%2e%2fetc", Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rRequests, Tail: strings.Repeat("9", 10000) + "/documents", Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rRequest, Query: "a=%00&b=%ff&c=%zz&;", Authn: httpfuzz.AuthnAttendant})
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})
	for _, body := range []string{
		"", "null", "[]", `"x"`, "{", validBody + validBody,
		"{\"serviceId\":\"a\x00\"}", "{\"serviceId\":\"\xff\"}", `{"serviceId":"\ud800"}`,
		`{"serviceId":"a","formId":"f","formVersion":99999999999999999999999,"channel":"web","fields":{}}`,
		`{"serviceId":"a","formId":"f","formVersion":-9223372036854775808,"channel":"web","fields":{}}`,
		`{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"n":1e400}}`,
		`{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"n":123456789012345678901234567890e-300}}`,
		`{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"x":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}}`,
		`{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"x":` + strings.Repeat(`{"a":`, 3000) + "1" + strings.Repeat("}", 3000) + `}}`,
		strings.Repeat("[", 20000),
		`{"serviceId":"` + strings.Repeat("s", 300) + `","formId":"f","formVersion":1,"channel":"web","fields":{"` + strings.Repeat("k", 300) + `":"v"}}`,
	} {
		add(httpfuzz.Input{Method: "POST", Route: rSubmit, Authn: httpfuzz.AuthnCitizen, ContentType: ctJSON, Body: []byte(body)})
	}
	for _, ctype := range []string{"", "text/plain", "application/json; charset=latin1", "application/problem+json",
		"application/json;;", "multipart/form-data; boundary=x", "\xff/\xfe", "application/x-www-form-urlencoded"} {
		add(httpfuzz.Input{Method: "POST", Route: rSubmit, Authn: httpfuzz.AuthnCitizen, ContentType: ctype, Body: []byte(validBody)})
	}
	for _, key := range []string{" ", "\xff\xfe", "ключ", strings.Repeat("k", 256), "a\tb", "a,b"} {
		add(httpfuzz.Input{Method: "POST", Route: rSubmit, Authn: httpfuzz.AuthnCitizen, ContentType: ctJSON, IdemKey: key, Body: []byte(validBody)})
	}
	for _, up := range [][]string{
		{filePart("a.txt", "texto")},                                  // no closing boundary
		{filePart("a.txt", "texto")[:60]},                             // cut in the part's header
		{filePart("a.txt", ""), closing},                              // empty file
		{filePart("a.txt", "um"), filePart("b.txt", "dois"), closing}, // two files
		{filePart("../../../etc/passwd", "texto"), closing},
		{filePart("a\x00b.txt", "texto"), closing},
		{filePart("\xff\xfe.txt", "texto"), closing},
		{filePart(strings.Repeat("n", 5000), "texto"), closing},
		{filePart("a.txt", "\x00\x01\x02\xff"), closing},
		{filePart("a.pdf", "%PDF-1.4\n"+strings.Repeat("\xff", 64)), closing},
		{"--fuzzb\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nsem nome\r\n", closing},
		{"--fuzzb\r\n\r\n\r\n", closing},
		{closing},
		{"garbage"},
	} {
		ct, b := upload(up...)
		add(httpfuzz.Input{Method: "POST", Route: rDocuments, Authn: httpfuzz.AuthnCitizen, ContentType: ct, Body: b})
	}
	add(httpfuzz.Input{Method: "POST", Route: rDocuments, Authn: httpfuzz.AuthnCitizen, ContentType: "multipart/form-data", Body: []byte("x")})
	add(httpfuzz.Input{Method: "POST", Route: rDocuments, Authn: httpfuzz.AuthnCitizen, ContentType: "multipart/form-data; boundary=\"\"", Body: []byte("x")})
	add(httpfuzz.Input{Method: "POST", Route: rRequests, Tail: "not-a-uuid/documents", Authn: httpfuzz.AuthnCitizen, ContentType: "multipart/form-data; boundary=fuzzb",
		Body: []byte(filePart("a.txt", "texto") + closing)})

	ft.AddHostSeeds(f, "request.workflow-events")
	f.Fuzz(ft.Check)
}
