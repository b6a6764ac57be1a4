package main

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest/httpfuzz"
)

// FuzzHTTP sends the ai-builder's REST API (the chat, the DLQ API, the
// host's routes) arbitrary requests (method, path under its routes, query,
// Content-Type, body, and a token from a fixed set: none, garbage, each
// role, another tenant's, expired) and fails on any 5xx (503 included: the
// database is up and the embedder is local here) and on any 4xx that is not
// an RFC 9457 problem. The service runs once, for real, as in the other
// tests; the seeds (valid calls to every route, then known-nasty inputs)
// run in every `go test`. Fuzz with `make fuzz` or
//
//	go test -run '^$' -fuzz '^FuzzHTTP$' -fuzztime 60s ./cmd/ai-builder/
func FuzzHTTP(f *testing.F) {
	s := newStack(f)
	base := s.start(map[string]string{"LOG_LEVEL": "warn"})
	ft := httpfuzz.New(f, base, s.Keys)
	// The fuzz tenant has knowledge (and so its vector partition); the
	// other tenant of the tokens has none.
	doc := uuid.NewString()
	s.index(ft.Tenant, doc, s.putText(ft.Tenant, doc, docPadaria))
	s.waitIndexed(doc, 1)
	ft.Routes = []string{
		"/v1/chat",
		"/",
	}
	const (
		rChat = iota
		rRoot
	)
	const ctJSON = "application/json"
	add := func(in httpfuzz.Input) { ft.Add(f, in) }
	ask := func(body string) []byte { return []byte(body) }

	// Every route, as it is meant to be called.
	add(httpfuzz.Input{Method: "POST", Route: rChat, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: ask(`{"question":"` + question + `","topK":3}`)})
	add(httpfuzz.Input{Method: "POST", Route: rChat, Authn: httpfuzz.AuthnAttendant, Body: ask(`{"question":"Quando vence o imposto?"}`)})
	add(httpfuzz.Input{Method: "POST", Route: rChat, Authn: httpfuzz.AuthnOtherStaff, ContentType: ctJSON, Body: ask(`{"question":"` + question + `"}`)})

	// Tokens and methods the routes refuse.
	for a := range uint8(httpfuzz.AuthnCount) {
		add(httpfuzz.Input{Method: "POST", Route: rChat, Authn: a, ContentType: ctJSON, Body: ask(`{"question":"` + question + `"}`)})
	}
	for _, m := range []string{"GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"} {
		add(httpfuzz.Input{Method: m, Route: rChat, Authn: httpfuzz.AuthnAll})
	}

	// Known-nasty input.
	for _, body := range []string{"", "null", "[]", `"x"`, "{", `{"question":"a"}{}`, `{"question":"a","tenantId":"org-b"}`,
		`{"question":""}`, `{"question":"   "}`, `{"question":"a","topK":0}`, `{"question":"a","topK":21}`, `{"question":"a","topK":-1}`,
		`{"question":"a","topK":20}`, `{"question":"a","topK":1e400}`, `{"question":"a","topK":9223372036854775807}`,
		`{"question":"a","topK":9223372036854775808}`, `{"question":"a","topK":1.5}`, `{"question":"a","topK":"3"}`, `{"question":"a","topK":null}`,
		`{"question":1}`, `{"question":null}`, "{\"question\":\"a\x00b\"}", "{\"question\":\"\xff\xfe\"}", `{"question":"\ud800"}`,
		`{"question":"\u0000"}`, `{"question":"` + strings.Repeat("á", 2000) + `"}`, `{"question":"` + strings.Repeat("a", 2001) + `"}`,
		`{"question":"` + strings.Repeat("palavra ", 8000) + `"}`, `{"question":"` + strings.Repeat("x", 70000) + `"}`,
		`{"question":"🙂🙂🙂 \u200b\u202e ﷽"}`, `{"question":"' OR 1=1; DROP TABLE chunk; --"}`, `{"question":"%s%n%x"}`,
		`{"question":"a","topK":` + strings.Repeat("[", 5000) + `}`, strings.Repeat("[", 10000)} {
		add(httpfuzz.Input{Method: "POST", Route: rChat, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: ask(body)})
	}
	for _, ctype := range []string{"text/plain", "application/json; charset=latin1", "application/problem+json", "application/json;;",
		"\xff/\xfe", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"} {
		add(httpfuzz.Input{Method: "POST", Route: rChat, Authn: httpfuzz.AuthnAttendant, ContentType: ctype, Body: ask(`{"question":"` + question + `"}`)})
	}
	for _, tail := range []string{"/", "a\x00b", "/\xff\xfe", "/../../../etc/passwd", "%2e%2e", strings.Repeat("/c", 5000)} {
		add(httpfuzz.Input{Method: "POST", Route: rChat, Tail: tail, Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: ask(`{"question":"a"}`)})
	}
	add(httpfuzz.Input{Method: "POST", Route: rChat, Query: "a=%00&b=%ff&c=%zz&;", Authn: httpfuzz.AuthnAttendant, ContentType: ctJSON, Body: ask(`{"question":"a"}`)})
	add(httpfuzz.Input{Method: "GET", Route: rRoot, Tail: strings.Repeat("x/", 2000)})

	ft.AddHostSeeds(f, "ai.knowledge-builder")
	f.Fuzz(ft.Check)
}
