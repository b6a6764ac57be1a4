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
