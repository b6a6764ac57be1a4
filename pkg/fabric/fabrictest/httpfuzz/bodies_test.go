package httpfuzz

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// fakeDoc has JSON bodies (inline, by $ref, optional), a CloudEvents body,
// a GET, and path parameters of each kind sample fills.
const fakeDoc = `{
  "openapi": "3.1.0",
  "paths": {
    "/v1/things": {
      "get": {"responses": {}},
      "post": {"requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}
    },
    "/v1/things/{id}/versions/{version}/moves/{queue}": {
      "parameters": [{"$ref": "#/components/parameters/ID"}, {"name": "queue", "in": "path", "schema": {"enum": ["q.one", "q.two"]}}],
      "post": {
        "parameters": [{"name": "version", "in": "path", "schema": {"type": "integer"}}],
        "requestBody": {"$ref": "#/components/requestBodies/Optional"}
      }
    },
    "/v1/events": {"post": {"requestBody": {"content": {"application/cloudevents+json": {}}}}}
  },
  "components": {
    "parameters": {"ID": {"name": "id", "in": "path", "schema": {"type": "string"}}},
    "requestBodies": {"Optional": {"required": false, "content": {"application/json": {}}}}
  }
}`

func TestJSONOperationsOf(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(fakeDoc), &doc); err != nil {
		t.Fatal(err)
	}
	ops, err := jsonOperationsOf(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []jsonOperation{
		{"POST", "/v1/things", "/v1/things"},
		{"POST", "/v1/things/{id}/versions/{version}/moves/{queue}", "/v1/things/0190a0b0-0000-7000-8000-000000000000/versions/1/moves/q.one"},
	}
	if len(ops) != len(want) || ops[0] != want[0] || ops[1] != want[1] {
		t.Errorf("jsonOperationsOf = %+v, want %+v", ops, want)
	}
}

// TestCheckMalformedBodies: a service reading its bodies with the
// fabric's reader behind the edge passes; one whose reader answers as a
// hand-written copy used to (400 for another media type, 400 for an
// oversized body, no problem types) fails, naming the cases.
func TestCheckMalformedBodies(t *testing.T) {
	shared := func(w http.ResponseWriter, r *http.Request) {
		var v struct{}
		if err := httpjson.ReadStrict(w, r, 16<<10, &v); err != nil && (r.URL.Path == "/v1/things" || !errors.Is(err, io.EOF)) {
			problem.Fail(w, r, slog.New(slog.DiscardHandler), err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	divergent := func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 16<<10))
		if mt, _, perr := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || perr != nil || mt != "application/json" {
			problem.Error(w, r, http.StatusBadRequest, "a body must be application/json")
			return
		}
		var v struct{}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			problem.Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			problem.Error(w, r, http.StatusBadRequest, "trailing data")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc
		wantFail []string // badBodies names, for each of the two routes
	}{
		{"the fabric's reader", shared, nil},
		{"a divergent copy", divergent, []string{"wrong media type", "oversized", "unknown field", "trailing data", "malformed JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(edge.ValidText(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/openapi.json" {
					_, _ = io.WriteString(w, fakeDoc)
					return
				}
				tc.handler(w, r)
			})))
			defer srv.Close()
			ft := New(t, srv.URL, keys)
			ops, err := ft.jsonOperations()
			if err != nil || len(ops) != 2 {
				t.Fatalf("jsonOperations = %+v, %v; want 2", ops, err)
			}
			for _, op := range ops {
				var failed []string
				for _, bb := range badBodies {
					if err := ft.checkBadBody(op, bb); err != nil {
						t.Logf("%v", err)
						failed = append(failed, bb.name)
					}
				}
				if strings.Join(failed, ",") != strings.Join(tc.wantFail, ",") {
					t.Errorf("%s: failed %q, want %q", op.template, failed, tc.wantFail)
				}
			}
		})
	}
}
