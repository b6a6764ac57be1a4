package asyncapi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/asyncapi"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

func generate(t *testing.T) (*registry.Registry, []byte, map[string]any) {
	t.Helper()
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := asyncapi.Generate(reg, topology.Platform(), asyncapi.Options{Title: "t", Host: "rabbitmq:5671", Vhost: "agora"})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	return reg, doc, v
}

func compile(t *testing.T, url string, doc []byte) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", url, err)
	}
	return s
}

// TestDocumentIsValidAsyncAPI validates the generated document against the
// official AsyncAPI 3.0.0 JSON Schema of @asyncapi/specs, which `make
// asyncapi-schema` fetches (pinned) from the npm registry. Without it the
// test fails: it never passes unchecked.
func TestDocumentIsValidAsyncAPI(t *testing.T) {
	path := os.Getenv("ASYNCAPI_SCHEMA")
	if path == "" {
		t.Fatal("ASYNCAPI_SCHEMA is not set: run `make asyncapi-schema` and set it to the file it prints (make test does both)")
	}
	spec, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the AsyncAPI 3.0.0 schema (run `make asyncapi-schema`): %v", err)
	}
	schema := compile(t, "file://"+filepath.ToSlash(path), spec)
	_, doc, _ := generate(t)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(v); err != nil {
		t.Fatalf("the generated document is not valid AsyncAPI 3.0.0: %v", err)
	}
	// The validator must be able to fail, deep in the document too: no
	// info, or an operation with AsyncAPI 2's verb.
	for name, breakIt := range map[string]func(map[string]any){
		"no info": func(d map[string]any) { delete(d, "info") },
		"action publish": func(d map[string]any) {
			d["operations"].(map[string]any)["send-request.submitted.v1"].(map[string]any)["action"] = "publish"
		},
		"a channel whose address is a number": func(d map[string]any) {
			d["channels"].(map[string]any)["queue.workflow.request-submitted"].(map[string]any)["address"] = 7
		},
	} {
		var broken map[string]any
		_ = json.Unmarshal(doc, &broken)
		breakIt(broken)
		if err := schema.Validate(any(broken)); err == nil {
			t.Errorf("the AsyncAPI schema accepted a document with %s", name)
		}
	}
}

// Every type has a channel on the exchange it travels on, a send operation
// and a message with its catalog metadata; every platform queue has a
// receive operation naming exactly the types its bindings select.
func TestDocumentCoversCatalogAndTopology(t *testing.T) {
	reg, _, doc := generate(t)
	channels := doc["channels"].(map[string]any)
	ops := doc["operations"].(map[string]any)
	msgs := doc["components"].(map[string]any)["messages"].(map[string]any)
	for _, d := range reg.All() {
		ch, ok := channels[d.Type].(map[string]any)
		if !ok {
			t.Errorf("%s: no channel", d.Type)
			continue
		}
		if ex := ch["bindings"].(map[string]any)["amqp"].(map[string]any)["exchange"].(map[string]any)["name"]; ex != map[registry.Kind]string{
			registry.KindEvent: "platform.events", registry.KindCommand: "platform.commands", registry.KindJob: "platform.work"}[d.Kind] {
			t.Errorf("%s (%s) travels on %v", d.Type, d.Kind, ex)
		}
		if _, ok := ops["send-"+d.Type]; !ok {
			t.Errorf("%s: no send operation", d.Type)
		}
		m, _ := msgs[d.Type].(map[string]any)
		if m["x-agora-scope"] != string(d.Scope) || m["x-agora-sensitivity"] != string(d.Sensitivity) || m["x-agora-owner"] != d.Owner {
			t.Errorf("%s: message extensions %v %v %v, want %s %s %s", d.Type, m["x-agora-scope"], m["x-agora-sensitivity"], m["x-agora-owner"], d.Scope, d.Sensitivity, d.Owner)
		}
	}
	received := func(queue string) []string {
		op, ok := ops["receive-"+queue].(map[string]any)
		if !ok {
			t.Fatalf("no receive operation for %s", queue)
		}
		var out []string
		for _, r := range op["messages"].([]any) {
			out = append(out, r.(map[string]any)["$ref"].(string)[strings.LastIndex(r.(map[string]any)["$ref"].(string), "/")+1:])
		}
		return out
	}
	for _, c := range topology.Platform().Consumers {
		if len(received(c.Queue)) == 0 {
			t.Errorf("%s receives nothing", c.Queue)
		}
	}
	tests := []struct {
		queue string
		want  []string
	}{
		{"workflow.request-submitted", []string{"request.submitted.v1"}},
		{"analytics.report-export", []string{"report.export.v1"}},
		// request.# selects every request event, every version.
		{"analytics.request-events", []string{"request.cancelled.v1", "request.status-changed.v1", "request.submitted.v1", "request.submitted.v2"}},
	}
	for _, tc := range tests {
		if got := received(tc.queue); !slices.Equal(got, tc.want) {
			t.Errorf("%s receives %v, want %v", tc.queue, got, tc.want)
		}
	}
}

// The message schema describes the real body: an envelope the fabric
// builds passes it, and one with a payload its type refuses does not.
func TestMessageSchemaDescribesTheEnvelope(t *testing.T) {
	_, _, doc := generate(t)
	msg := doc["components"].(map[string]any)["messages"].(map[string]any)["document.process.v1"].(map[string]any)
	raw, err := json.Marshal(msg["payload"].(map[string]any)["schema"])
	if err != nil {
		t.Fatal(err)
	}
	schema := compile(t, "mem://document.process.v1", raw)
	check := func(payload any) error {
		e, err := envelope.New("document.process.v1", "org-a", "request-service", payload)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return schema.Validate(v)
	}
	if err := check(map[string]any{"documentId": "0195f0c8-7b7a-7c1e-9a57-3b1f0e2d4c5a"}); err != nil {
		t.Errorf("a real envelope fails its message schema: %v", err)
	}
	if err := check(map[string]any{"document": "x"}); err == nil {
		t.Error("an envelope with a wrong payload passes its message schema")
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	_, a, _ := generate(t)
	_, b, _ := generate(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two generations differ")
	}
}
