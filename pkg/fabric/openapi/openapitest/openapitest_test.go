package openapitest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
)

const service = `
openapi: 3.1.0
info: {title: things, version: '1'}
security: [{bearer: []}]
paths:
  /v1/things:
    post:
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Thing'}
      responses:
        '201':
          description: created
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
        '400': {$ref: '#/components/responses/BadRequest'}
        '401': {$ref: '#/components/responses/Unauthorized'}
  /v1/things/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: string, format: uuid}}
    get:
      responses:
        '200':
          description: a thing
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
        '404': {$ref: '#/components/responses/NotFound'}
components:
  schemas:
    Thing:
      type: object
      required: [id]
      additionalProperties: false
      properties:
        id: {type: string}
        at: {type: string, format: date-time}
`

// answer is what the test server sends back.
type answer struct {
	status      int
	contentType string
	body        string
	location    string
}

const (
	id      = "0190a0b0-0000-7000-8000-000000000001"
	problem = "application/problem+json"
	ctJSON  = "application/json"
)

func problemBody(status int) string {
	return `{"type":"about:blank","title":"` + http.StatusText(status) + `","status":` + strconv.Itoa(status) + `,"instance":"/x"}`
}

func TestCheck(t *testing.T) {
	var next answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if next.contentType != "" {
			w.Header().Set("Content-Type", next.contentType)
		}
		if next.location != "" {
			w.Header().Set("Location", next.location)
		}
		w.WriteHeader(next.status)
		_, _ = io.WriteString(w, next.body)
	}))
	defer srv.Close()
	doc, err := openapi.Document([]byte(service), openapi.Host{Queues: []string{"things"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := openapitest.New(doc)
	if err != nil {
		t.Fatal(err)
	}
	tr := openapitest.NewTransport(http.DefaultTransport)
	if err := tr.Add(srv.URL, v); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	type call struct {
		method, path, contentType, body string
		token                           bool
	}
	get := call{method: "GET", path: "/v1/things/" + id, token: true}
	post := func(body string) call {
		return call{method: "POST", path: "/v1/things", contentType: ctJSON, body: body, token: true}
	}
	for _, tc := range []struct {
		name string
		call call
		ans  answer
		want string // "" for no mismatch, else part of the error
	}{
		{"documented 200", get, answer{200, ctJSON, `{"id":"a","at":"2026-12-01T09:00:00.123Z"}`, ""}, ""},
		{"a field of the wrong type", get, answer{200, ctJSON, `{"id":1}`, ""}, "id"},
		{"an undocumented field", get, answer{200, ctJSON, `{"id":"a","extra":true}`, ""}, "extra"},
		{"a bad date-time", get, answer{200, ctJSON, `{"id":"a","at":"yesterday"}`, ""}, "date-time"},
		{"an undocumented status", get, answer{409, problem, problemBody(409), ""}, "409"},
		{"a documented problem", get, answer{404, problem, problemBody(404), ""}, ""},
		{"a problem with another status", get, answer{404, problem, strings.Replace(problemBody(404), "404", "400", 1), ""}, "404"},
		{"an error as text", get, answer{404, "text/plain; charset=utf-8", "404 page not found", ""}, "404"},
		{"a 500 nobody documented", get, answer{500, problem, problemBody(500), ""}, "500"},
		{"an unknown path answered 404", call{method: "GET", path: "/v1/nope"}, answer{404, problem, problemBody(404), ""}, ""},
		{"an unknown path answered 404 as text", call{method: "GET", path: "/v1/nope"}, answer{404, "text/plain", "no", ""}, "application/problem+json"},
		{"an unknown path refused by the host (a NUL)", call{method: "GET", path: "/v1/a%00b"}, answer{400, problem, problemBody(400), ""}, ""},
		{"a trailing slash on a documented path", call{method: "POST", path: "/v1/things/", contentType: ctJSON, body: `{"id":"a"}`, token: true},
			answer{404, problem, problemBody(404), ""}, ""},
		{"a trailing slash answered 200", call{method: "POST", path: "/v1/things/", contentType: ctJSON, body: `{"id":"a"}`, token: true},
			answer{201, ctJSON, `{"id":"a"}`, ""}, "not in the document"},
		{"a trailing slash", call{method: "GET", path: "/v1/things/"}, answer{404, problem, problemBody(404), ""}, ""},
		{"an unknown path answered 200", call{method: "GET", path: "/v1/nope"}, answer{200, ctJSON, `{}`, ""}, "not in the document"},
		{"an unknown method answered 405", call{method: "DELETE", path: "/v1/things/" + id}, answer{405, problem, problemBody(405), ""}, ""},
		{"an unknown method answered 204", call{method: "DELETE", path: "/v1/things/" + id}, answer{204, "", "", ""}, "no DELETE operation"},
		{"HEAD of a documented GET", call{method: "HEAD", path: "/v1/things/" + id}, answer{200, ctJSON, "", ""}, ""},
		{"HEAD answered a status GET does not document", call{method: "HEAD", path: "/v1/things/" + id}, answer{409, problem, "", ""}, "409"},
		{"the mux cleaning a path", call{method: "GET", path: "/v1/things/../x"}, answer{307, "text/html", "", "/v1/x"}, ""},
		{"the mux cleaning a path, before Go 1.22", call{method: "GET", path: "/v1/things/../x"}, answer{301, "text/html", "", "/v1/x"}, ""},
		{"the mux adding a subtree's slash", call{method: "GET", path: "/v1/dlq"}, answer{307, "text/html", "", "/v1/dlq/"}, ""},
		{"a redirect elsewhere", call{method: "GET", path: "/v1/nope"}, answer{307, "text/html", "", "/v1/other"}, "not in the document"},
		{"a valid request accepted", post(`{"id":"a"}`), answer{201, ctJSON, `{"id":"a"}`, ""}, ""},
		{"a valid request with a charset", call{method: "POST", path: "/v1/things", contentType: "application/json; charset=utf-8", body: `{"id":"a"}`, token: true},
			answer{201, ctJSON, `{"id":"a"}`, ""}, ""},
		{"an invalid request refused", post(`{"id":5}`), answer{400, problem, problemBody(400), ""}, ""},
		{"an invalid request accepted", post(`{"id":5}`), answer{201, ctJSON, `{"id":"5"}`, ""}, "id"},
		{"a request without a token accepted", call{method: "POST", path: "/v1/things", contentType: ctJSON, body: `{"id":"a"}`},
			answer{201, ctJSON, `{"id":"a"}`, ""}, "uthoriz"},
		{"a request without a token refused", call{method: "POST", path: "/v1/things", contentType: ctJSON, body: `{"id":"a"}`},
			answer{401, problem, problemBody(401), ""}, ""},
		{"a path parameter the document refuses, accepted", call{method: "GET", path: "/v1/things/not-a-uuid", token: true},
			answer{200, ctJSON, `{"id":"a"}`, ""}, "uuid"},
		{"a host route", call{method: "GET", path: "/healthz"}, answer{200, ctJSON, `{"status":"ok","service":"things"}`, ""}, ""},
		{"the DLQ of a queue the document names", call{method: "GET", path: "/v1/dlq/things", token: true}, answer{200, ctJSON, `[]`, ""}, ""},
		{"the DLQ of another queue, accepted", call{method: "GET", path: "/v1/dlq/other", token: true}, answer{200, ctJSON, `[]`, ""}, "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next = tc.ans
			req, err := http.NewRequest(tc.call.method, srv.URL+tc.call.path, strings.NewReader(tc.call.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.call.contentType != "" {
				req.Header.Set("Content-Type", tc.call.contentType)
			}
			if tc.call.token {
				req.Header.Set("Authorization", "Bearer x.y.z")
			}
			resp, err := client.Do(req)
			if resp != nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && string(body) != tc.ans.body && tc.call.method != "HEAD" {
					t.Errorf("the client read %q, the server sent %q", body, tc.ans.body)
				}
			}
			var mismatch *openapitest.MismatchError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("mismatch: %v", err)
			case tc.want != "" && !errors.As(err, &mismatch):
				t.Fatalf("err = %v, want a mismatch mentioning %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("mismatch %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if err := tr.Err(); err == nil {
		t.Error("Err() = nil after mismatches")
	}
}

func TestTransportPassesOtherHostsThrough(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	tr := openapitest.NewTransport(nil)
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/anything")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || tr.Err() != nil {
		t.Fatalf("status %d, Err %v", resp.StatusCode, tr.Err())
	}
}

func TestAddServiceFetchesTheDocument(t *testing.T) {
	doc, err := openapi.Document([]byte(service), openapi.Host{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctJSON)
		_, _ = w.Write(doc)
	})
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctJSON)
		_, _ = io.WriteString(w, `{"id":"a","surprise":1}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tr := openapitest.NewTransport(nil)
	if err := tr.AddService(context.Background(), srv.URL); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	if resp, err := client.Get(srv.URL + "/openapi.json"); err != nil {
		t.Fatalf("GET /openapi.json: %v", err)
	} else {
		resp.Body.Close()
	}
	if _, err := client.Get(srv.URL + "/v1/things/" + id); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Fatalf("GET /v1/things/{id} = %v, want a mismatch naming the undocumented field", err)
	}
	// Once the service is gone, its port may serve another contract.
	tr.Remove(srv.URL)
	if resp, err := client.Get(srv.URL + "/v1/things/" + id); err != nil {
		t.Fatalf("GET /v1/things/{id} after Remove = %v, want it passed through unchecked", err)
	} else {
		resp.Body.Close()
	}
	if err := openapitest.Probe(context.Background(), http.DefaultClient, srv.URL, []openapi.Operation{
		{Method: "GET", Path: "/v1/things/{id}"}, {Method: "POST", Path: "/v1/things"},
	}); err == nil || !strings.Contains(err.Error(), "POST /v1/things is documented") || strings.Contains(err.Error(), "GET") {
		t.Fatalf("Probe = %v, want POST /v1/things alone reported", err)
	}
	if err := openapitest.CheckServed(context.Background(), nil, srv.URL, []byte(service), openapi.Host{Queues: []string{"q"}}); err == nil ||
		!strings.Contains(err.Error(), "is not the service's document merged with the host's routes") {
		t.Fatalf("CheckServed with other queues = %v, want the served document refused", err)
	}
	if err := openapitest.CheckServed(context.Background(), nil, srv.URL, []byte(service), openapi.Host{}); err == nil ||
		!strings.Contains(err.Error(), "GET /healthz is documented, but GET /healthz answered 404") {
		t.Fatalf("CheckServed = %v, want the host's routes this server lacks reported", err)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"OpenAPI 3.0", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{}}`, "3.1"},
		{"an unresolved $ref", strings.Replace(service, "#/components/schemas/Thing'}\n        '400'", "#/components/schemas/Nothing'}\n        '400'", 1), "Nothing"},
		{"a response without a description", strings.Replace(service, "          description: a thing\n", "", 1), "description"},
		{"no Problem schema", `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"paths":{}}`, "Problem"},
		// A flow mapping's plain description ends at a comma: "The id" and a key "else the name.".
		{"a description cut at a comma", strings.Replace(service, "id: {type: string}", "id: {type: string, description: The id, else the name.}", 1),
			`/components/schemas/Thing/properties/id: "else the name."`},
		{"a key an operation does not define", strings.Replace(service, "    get:\n", "    get:\n      summry: a thing\n", 1), "summry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(tc.doc)
			if strings.Contains(tc.doc, "components/responses") {
				var err error
				if doc, err = openapi.Document(doc, openapi.Host{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := openapitest.New(doc); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestCompareRoutes(t *testing.T) {
	a, b, c := openapi.Operation{Method: "GET", Path: "/a"}, openapi.Operation{Method: "POST", Path: "/a"}, openapi.Operation{Method: "GET", Path: "/c"}
	if err := openapitest.CompareRoutes([]openapi.Operation{a, b}, []openapi.Operation{b, a}); err != nil {
		t.Errorf("same routes: %v", err)
	}
	err := openapitest.CompareRoutes([]openapi.Operation{a, b}, []openapi.Operation{a, c})
	if err == nil || !strings.Contains(err.Error(), "POST /a is served but not documented") || !strings.Contains(err.Error(), "GET /c is documented but not served") {
		t.Errorf("CompareRoutes = %v", err)
	}
}
