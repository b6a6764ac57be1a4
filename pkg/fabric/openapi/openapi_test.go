package openapi_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
)

const service = `
openapi: 3.1.0
info: {title: things, version: '1'}
security: [{bearer: []}]
tags: [{name: things}]
paths:
  /v1/things/{id}:
    get:
      tags: [things]
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        200:
          description: a thing
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
        404: {$ref: '#/components/responses/NotFound'}
components:
  schemas:
    Thing: {type: object, properties: {id: {type: string}}}
`

func TestDocumentMergesTheHostsRoutesAndComponents(t *testing.T) {
	doc, err := openapi.Document([]byte(service), openapi.Host{Queues: []string{"things.b", "things.a"}, Ops: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openapitest.New(doc); err != nil {
		t.Fatalf("merged document: %v", err)
	}
	var d struct {
		Paths      map[string]any `json:"paths"`
		Components struct {
			Schemas    map[string]any `json:"schemas"`
			Parameters struct {
				DLQQueue struct {
					Schema struct {
						Enum []string `json:"enum"`
					} `json:"schema"`
				} `json:"DLQQueue"`
			} `json:"parameters"`
		} `json:"components"`
		Tags []struct {
			Name string `json:"name"`
		} `json:"tags"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	for _, p := range []string{"/v1/things/{id}", "/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/dlq/{queue}", "/v1/dlq/audit", "/v1/ops/status", "/v1/ops/journeys/{correlationId}", "/v1/replays", "/v1/replays/{id}/items"} {
		if d.Paths[p] == nil {
			t.Errorf("path %s missing", p)
		}
	}
	for _, s := range []string{"Thing", "Problem", "DeadLetter"} {
		if d.Components.Schemas[s] == nil {
			t.Errorf("schema %s missing", s)
		}
	}
	if got := d.Components.Parameters.DLQQueue.Schema.Enum; !slices.Equal(got, []string{"things.a", "things.b"}) {
		t.Errorf("queue enum = %v, want the queues sorted", got)
	}
	var tags []string
	for _, tag := range d.Tags {
		tags = append(tags, tag.Name)
	}
	if !slices.Equal(tags, []string{"things", "host", "ops", "dlq", "replay"}) {
		t.Errorf("tags = %v", tags)
	}
}

func TestDocumentWithoutQueuesLeavesTheDLQOut(t *testing.T) {
	doc, err := openapi.Document([]byte(service), openapi.Host{})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := openapi.Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	host, err := openapi.HostOperations(openapi.Host{})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]openapi.Operation{{Method: "GET", Path: "/v1/things/{id}"}}, host...)
	for _, op := range ops {
		if strings.HasPrefix(op.Path, "/v1/dlq/") || strings.HasPrefix(op.Path, "/v1/ops/") || strings.HasPrefix(op.Path, "/v1/replays") {
			t.Errorf("%s documented for a service without queues or relay", op)
		}
		if !slices.Contains(want, op) {
			t.Errorf("%s unexpected", op)
		}
	}
	if len(ops) != len(want) {
		t.Errorf("operations = %v, want %v", ops, want)
	}
}

func TestDocumentRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"OpenAPI 3.0", strings.Replace(service, "3.1.0", "3.0.3", 1), "want 3.1"},
		{"not YAML", "openapi: [", "service document"},
		{"a host path", strings.Replace(service, "paths:\n", "paths:\n  /healthz: {get: {responses: {'200': {description: x}}}}\n", 1), `"/healthz" is the host's`},
		{"a host component", service + "    Problem: {type: object}\n", `"Problem" is the host's`},
		{"a host tag", strings.Replace(service, "[{name: things}]", "[{name: host}]", 1), `tag "host"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openapi.Document([]byte(tc.doc), openapi.Host{Queues: []string{"q"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Document = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestOperations(t *testing.T) {
	ops, err := openapi.Operations([]byte(`{"paths": {"/b": {"post": {}, "get": {}, "parameters": []}, "/a": {"put": {}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []openapi.Operation{{"PUT", "/a"}, {"GET", "/b"}, {"POST", "/b"}}
	if !slices.Equal(ops, want) {
		t.Fatalf("Operations = %v, want %v", ops, want)
	}
}

// TestDocumentLeavesOutTheHostsUnusedComponents: a shared component nothing
// in the merged document refers to is left out (the service's own are kept,
// used or not, for the linter to report), and what is kept resolves.
func TestDocumentLeavesOutTheHostsUnusedComponents(t *testing.T) {
	own := service + "    Unused: {type: string}\n"
	for _, tc := range []struct {
		name       string
		h          openapi.Host
		kept, gone []string
	}{
		{"with queues", openapi.Host{Queues: []string{"things.a"}, Ops: true},
			[]string{"responses/NotFound", "responses/BadGateway", "schemas/Problem", "schemas/DeadLetter", "schemas/Thing", "schemas/Unused", "parameters/DLQQueue", "securitySchemes/bearer"},
			[]string{"responses/Conflict", "responses/TooManyRequests"}},
		{"without queues", openapi.Host{},
			[]string{"responses/NotFound", "schemas/Problem", "schemas/Thing", "schemas/Unused", "schemas/Readiness", "securitySchemes/bearer"},
			[]string{"responses/Conflict", "responses/BadGateway", "schemas/DeadLetter", "parameters/DLQQueue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := openapi.Document([]byte(own), tc.h)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := openapitest.New(doc); err != nil {
				t.Fatalf("merged document: %v", err)
			}
			var d struct {
				Components map[string]map[string]any `json:"components"`
			}
			if err := json.Unmarshal(doc, &d); err != nil {
				t.Fatal(err)
			}
			has := func(c string) bool {
				section, name, _ := strings.Cut(c, "/")
				_, ok := d.Components[section][name]
				return ok
			}
			for _, c := range tc.kept {
				if !has(c) {
					t.Errorf("components/%s left out, want it kept", c)
				}
			}
			for _, c := range tc.gone {
				if has(c) {
					t.Errorf("components/%s kept, want it left out (nothing refers to it)", c)
				}
			}
		})
	}
}
