package httpfuzz

import (
	"strings"
	"testing"
)

// AddHostSeeds adds the routes every service's host serves, the same for
// all of them, to the target and their seeds to f's corpus: the DLQ API of
// each of queues (list, a letter, replay and purge, audit), /healthz,
// /readyz and /metrics, called as meant, with each token and method, and
// with known-nasty input. A service's fuzz test sets its own Routes first
// and calls this once; its own seeds name only its own routes.
func (ft *target) AddHostSeeds(f *testing.F, queues ...string) {
	route := func(path string) uint8 {
		for i, r := range ft.Routes {
			if r == path {
				return uint8(i)
			}
		}
		ft.Routes = append(ft.Routes, path)
		return uint8(len(ft.Routes) - 1)
	}
	add := func(in Input) { ft.Add(f, in) }
	const ctJSON = "application/json"
	const letter = "0190a0b0-0000-7000-8000-000000000000"
	methods := []string{"PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "PROPFIND"}

	dlq := route("/v1/dlq/")
	healthz, readyz, metrics := route("/healthz"), route("/readyz"), route("/metrics")
	for _, r := range []uint8{healthz, readyz, metrics} {
		add(Input{Method: "GET", Route: r})
	}
	for _, m := range methods {
		add(Input{Method: m, Route: healthz})
	}
	add(Input{Method: "GET", Route: readyz, Query: "a=%00"})
	add(Input{Method: "GET", Route: dlq, Authn: AuthnOperator})
	add(Input{Method: "GET", Route: dlq, Tail: "audit", Authn: AuthnOperator})
	for _, tail := range []string{"a/b/c", strings.Repeat("q", 5000), "%2e%2e/%2e%2e", "a\x00b", "\xff\xfe"} {
		add(Input{Method: "GET", Route: dlq, Tail: tail, Authn: AuthnOperator})
	}

	for _, q := range queues {
		queue := route("/v1/dlq/" + q)
		// Every route, as it is meant to be called.
		add(Input{Method: "GET", Route: queue, Authn: AuthnOperator})
		add(Input{Method: "GET", Route: queue, Tail: "/letters/" + letter, Authn: AuthnOperator})
		add(Input{Method: "POST", Route: queue, Tail: "/replay", Authn: AuthnOperator, ContentType: ctJSON,
			Body: []byte(`{"filter":{"ids":["` + letter + `"]},"reason":"fuzz","dryRun":true}`)})
		add(Input{Method: "POST", Route: queue, Tail: "/purge", Authn: AuthnOperator, ContentType: ctJSON,
			Body: []byte(`{"filter":{"all":true},"reason":"fuzz","dryRun":true}`)})
		// Tokens and methods the routes refuse.
		for a := range uint8(AuthnCount) {
			add(Input{Method: "GET", Route: queue, Authn: a})
			add(Input{Method: "POST", Route: queue, Tail: "/replay", Authn: a, ContentType: ctJSON,
				Body: []byte(`{"filter":{"all":true},"reason":"fuzz","dryRun":true}`)})
		}
		for _, m := range methods {
			add(Input{Method: m, Route: queue, Tail: "/replay", Authn: AuthnOperator})
			add(Input{Method: m, Route: queue, Tail: "/purge", Authn: AuthnOperator})
		}
		// Known-nasty input.
		add(Input{Method: "GET", Route: queue, Query: "a=%00&b=%ff&c=%zz&;", Authn: AuthnOperator})
		add(Input{Method: "GET", Route: queue, Tail: "/letters/" + strings.Repeat("z", 5000), Authn: AuthnOperator})
		add(Input{Method: "POST", Route: queue, Tail: "/replay", Authn: AuthnOperator, ContentType: ctJSON,
			Body: []byte(`{"filter":{"ids":["` + strings.Repeat("z", 20000) + `"],"type":"\u00e9"},"reason":" ","dryRun":false}`)})
		for _, body := range []string{"", "null", "[]", "{", `{"filter":{},"reason":"r"}{}`, `{"filter":{"all":true}}`,
			`{"filter":{"reason":"x"},"reason":"r","dryRun":1e999}`, `{"filter":{"all":"yes"},"reason":"r"}`,
			"{\"filter\":{\"all\":true},\"reason\":\"a\x00b\"}", "{\"filter\":{\"all\":true},\"reason\":\"\xff\"}",
			`{"filter":{"all":true},"reason":"r","tenantId":"org-b"}`, strings.Repeat("[", 10000)} {
			add(Input{Method: "POST", Route: queue, Tail: "/purge", Authn: AuthnOperator, ContentType: ctJSON, Body: []byte(body)})
		}
		for _, ctype := range []string{"", "text/plain", "application/json; charset=latin1", "multipart/form-data; boundary=x", "\xff/\xfe"} {
			add(Input{Method: "POST", Route: queue, Tail: "/replay", Authn: AuthnOperator, ContentType: ctype,
				Body: []byte(`{"filter":{"all":true},"reason":"fuzz","dryRun":true}`)})
		}
	}
}
