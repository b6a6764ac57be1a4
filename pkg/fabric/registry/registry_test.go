package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

func TestDefaultCatalogHasArchitectureTypes(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	// Every type docs/architecture.md and the catalog name.
	want := map[string]Kind{
		"request.submitted.v1": KindEvent, "document.uploaded.v1": KindEvent, "document.processed.v1": KindEvent,
		"document.validated.v1": KindEvent, "ai.knowledge-indexed.v1": KindEvent, "task.sla-breached.v1": KindEvent, "workflow.task-completed.v1": KindEvent,
		"workflow.process-completed.v1": KindEvent, "citizen.updated.v1": KindEvent, "appointment.scheduled.v1": KindEvent,
		"appointment.cancelled.v1": KindEvent, "ai.knowledge.index.v1": KindCommand, "workflow.start.v1": KindCommand,
		"communication.send.v1": KindCommand, "document.process.v1": KindCommand, "integration.sei.register.v1": KindCommand,
		"document.ocr.v1": KindJob, "report.export.v1": KindJob, "document.metadata.extract.v1": KindJob,
		"ai.embedding.generate.v1": KindJob, "datalake.ingest.v1": KindJob,
	}
	for typ, kind := range want {
		d, ok := r.Lookup(typ)
		if !ok {
			t.Errorf("Lookup(%q) missing", typ)
			continue
		}
		if d.Kind != kind {
			t.Errorf("Lookup(%q).Kind = %s, want %s", typ, d.Kind, kind)
		}
		if d.Version != "1" || len(d.Schema) == 0 {
			t.Errorf("Lookup(%q) = version %q, schema %d bytes", typ, d.Version, len(d.Schema))
		}
	}
	if n := len(r.All()); n < len(want) {
		t.Errorf("All() has %d definitions, want at least %d", n, len(want))
	}
}

func TestCheck(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	submitted := map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": "alvara", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z",
	}
	env := func(typ, tenant string, payload any) envelope.Envelope {
		e, err := envelope.New(typ, tenant, "test", payload)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range submitted {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name string
		env  envelope.Envelope
		want error
	}{
		{"valid", env("request.submitted.v1", "org-a", submitted), nil},
		{"unknown type", env("request.exploded.v1", "org-a", submitted), ErrUnknownType},
		{"missing tenant", env("request.submitted.v1", "", submitted), envelope.ErrMissingField},
		{"missing payload field", env("request.submitted.v1", "org-a", with("protocol", nil)), ErrSchema},
		{"extra payload field", env("request.submitted.v1", "org-a", with("cpf", "123")), ErrSchema},
		{"bad enum", env("request.submitted.v1", "org-a", with("channel", "fax")), ErrSchema},
		{"bad date-time format", env("request.submitted.v1", "org-a", with("submittedAt", "yesterday")), ErrSchema},
		{"global without tenant", env("catalog.service-published.v1", "", map[string]any{"serviceId": "s", "name": "n"}), nil},
		{"global with tenant", env("catalog.service-published.v1", "org-a", map[string]any{"serviceId": "s", "name": "n"}), envelope.ErrInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Check(tt.env)
			if tt.want == nil && err != nil {
				t.Fatalf("Check() = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Check() = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestReaderAndWriter: one schema file, two sides. A producer is held to
// the closed schema; a consumer accepts what docs/contract-evolution.md calls compatible
// and refuses everything the schema still forbids.
func TestReaderAndWriter(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	const v1 = `{"requestId":"0192d3a0-0000-7000-8000-000000000001","protocol":"AGR-2026-000001",` +
		`"serviceId":"alvara","formId":"f1","formVersion":%s,"channel":%s,"citizenId":"c-1","submittedAt":"2026-11-30T10:00:00Z"%s}`
	payload := func(formVersion, channel, extra string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(v1, formVersion, channel, extra))
	}
	const v2 = `{"requestId":"0192d3a0-0000-7000-8000-000000000001","protocol":"AGR-2026-000001","serviceId":"alvara",` +
		`"form":{"id":"f1","version":"2.1.0"%s},"fieldCount":%s,"channel":"web","citizenId":"c-1","submittedAt":"2026-11-30T10:00:00Z"}`
	env := func(typ string, p json.RawMessage, mutate ...func(*envelope.Envelope)) envelope.Envelope {
		e, err := envelope.New(typ, "org-a", "test", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mutate {
			m(&e)
		}
		return e
	}
	long := `"` + strings.Repeat("k", 201) + `"`
	tests := []struct {
		name           string
		env            envelope.Envelope
		writer, reader error
	}{
		{"valid", env("request.submitted.v1", payload("1", `"web"`, "")), nil, nil},
		{"added optional payload field", env("request.submitted.v1", payload("1", `"web"`, `,"priority":"high"`)), ErrSchema, nil},
		{"added field inside a nested object", env("request.submitted.v2", json.RawMessage(fmt.Sprintf(v2, `,"locale":"pt-BR"`, "3"))), ErrSchema, nil},
		{"new value of an extensible enum", env("request.submitted.v1", payload("1", `"kiosk"`, "")), ErrSchema, nil},
		{"extensible enum value of the wrong type", env("request.submitted.v1", payload("1", `7`, "")), ErrSchema, ErrSchema},
		{"extensible enum value absurdly long", env("request.submitted.v1", payload("1", long, "")), ErrSchema, ErrSchema},
		{"new value of a closed enum", env("request.status-changed.v1", json.RawMessage(
			`{"requestId":"0192d3a0-0000-7000-8000-000000000001","status":"archived","changedAt":"2026-11-30T10:00:00Z"}`)), ErrSchema, ErrSchema},
		{"integer beyond int64 (1e400)", env("request.submitted.v1", payload("1e400", `"web"`, "")), ErrSchema, ErrSchema},
		{"integer just beyond int64", env("request.submitted.v1", payload("9223372036854775808", `"web"`, "")), ErrSchema, ErrSchema},
		{"largest int64", env("request.submitted.v1", payload("9223372036854775807", `"web"`, "")), nil, nil},
		{"unbounded integer field beyond int64", env("request.submitted.v2", json.RawMessage(fmt.Sprintf(v2, "", "1e400"))), ErrSchema, ErrSchema},
		{"fraction where an integer is due", env("request.submitted.v1", payload("1.5", `"web"`, "")), ErrSchema, ErrSchema},
		{"missing required field", env("request.submitted.v1", json.RawMessage(`{"requestId":"0192d3a0-0000-7000-8000-000000000001"}`)), ErrSchema, ErrSchema},
		{"wrong type", env("request.submitted.v1", payload(`"1"`, `"web"`, "")), ErrSchema, ErrSchema},
		{"UUIDv4 id", env("request.submitted.v1", payload("1", `"web"`, ""), func(e *envelope.Envelope) { e.ID = "3b241101-e2bb-4255-8caf-4136c566a962" }), envelope.ErrInvalidField, nil},
		{"unknown schemaVersion", env("request.submitted.v1", payload("1", `"web"`, ""), func(e *envelope.Envelope) { e.SchemaVersion = "banana" }), envelope.ErrInvalidField, envelope.ErrInvalidField},
		{"schema revision", env("request.submitted.v1", payload("1", `"web"`, ""), func(e *envelope.Envelope) { e.SchemaVersion = "1.1" }), nil, nil},
		{"added envelope field", env("request.submitted.v1", payload("1", `"web"`, ""), func(e *envelope.Envelope) {
			e.Extensions = map[string]json.RawMessage{"priority": json.RawMessage(`"high"`)}
		}), nil, nil},
	}
	match := func(got, want error) bool { return want == nil && got == nil || want != nil && errors.Is(got, want) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.Check(tt.env); !match(err, tt.writer) {
				t.Errorf("Check (writer) = %v, want %v", err, tt.writer)
			}
			if _, err := r.CheckIncoming(tt.env); !match(err, tt.reader) {
				t.Errorf("CheckIncoming (reader) = %v, want %v", err, tt.reader)
			}
		})
	}
}

func TestExtensibleEnums(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		typ  string
		want map[string][]string
	}{
		{"request.submitted.v1", map[string][]string{"/channel": {"web", "app", "whatsapp", "counter", "phone", "api"}}},
		{"document.processed.v1", map[string][]string{"/method": {"tesseract", "pdftotext", "pdftoppm+tesseract", "plain"}}},
		{"document.validated.v1", map[string][]string{"/kind": {"identity", "proof-of-address", "proof-of-income", "unknown"}}},
		{"communication.notification-sent.v1", map[string][]string{"/channel": {"email", "sms", "whatsapp"}}},
		{"request.status-changed.v1", nil},
		{"communication.send.v1", nil}, // a command's channel must be one the adapter can send on
	}
	for _, tt := range tests {
		d, ok := r.Lookup(tt.typ)
		if !ok {
			t.Fatalf("%s not in the catalog", tt.typ)
		}
		if !reflect.DeepEqual(d.ExtensibleEnums, tt.want) {
			t.Errorf("%s ExtensibleEnums = %v, want %v", tt.typ, d.ExtensibleEnums, tt.want)
		}
	}
}

func TestSuccessor(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Lookup("request.submitted.v1")
	if d.Successor != "request.submitted.v2" {
		t.Fatalf("request.submitted.v1 successor = %q, want request.submitted.v2", d.Successor)
	}
}

func TestSensitiveFields(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Lookup("request.submitted.v1")
	if len(d.SensitiveFields) != 1 || d.SensitiveFields[0] != "citizenId" {
		t.Fatalf("SensitiveFields = %v, want [citizenId]", d.SensitiveFields)
	}
	if len(d.RestrictedFields) != 0 || d.Lake != "" {
		t.Errorf("request.submitted.v1: RestrictedFields %v, lake %q; want none (an INTERNAL type)", d.RestrictedFields, d.Lake)
	}
	// A sensitive field of a RESTRICTED type is RESTRICTED; the lake seals
	// it unless the catalog says otherwise.
	d, _ = r.Lookup("citizen.updated.v1")
	if !slices.Equal(d.RestrictedFields, []string{"citizenId"}) || d.Lake != lakeEncrypt {
		t.Errorf("citizen.updated.v1: RestrictedFields %v, lake %q; want [citizenId], encrypt", d.RestrictedFields, d.Lake)
	}
}

// A field's level and the lake's rule are checked when the catalog loads.
func TestFieldSensitivity(t *testing.T) {
	def := func(sensitivity, extra string) string {
		return "definitions:\n- {type: a.b.v1, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: " + sensitivity +
			", description: d" + extra + "}\n"
	}
	schema := `{"type":"object","properties":{"who":{"type":"string","x-sensitive":%s},"what":{"type":"string","x-sensitive":true},"n":{"type":"integer"}}}`
	for _, tc := range []struct {
		name, yaml, mark string
		restricted       []string
		lake, refused    string // refused: what the error must say; "" when it loads
	}{
		{"every sensitive field of a RESTRICTED type", def("RESTRICTED", ""), "true", []string{"what", "who"}, lakeEncrypt, ""},
		{"unmarked fields are not", def("RESTRICTED", ", lake: drop"), "false", []string{"what"}, lakeDrop, ""},
		{"a CONFIDENTIAL type has no RESTRICTED field", def("CONFIDENTIAL", ""), "true", nil, "", ""},
		{"a mark that is not a boolean", def("RESTRICTED", ""), `"SECRET"`, nil, "", "x-sensitive is SECRET"},
		{"drop on a replayable type", def("RESTRICTED", ", lake: drop, replayable: true"), "true", nil, "", "must not be replayable"},
		{"an unknown lake rule", def("RESTRICTED", ", lake: shred"), "true", nil, "", `lake "shred"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(fstest.MapFS{
				"catalog.yaml":  {Data: []byte(tc.yaml)},
				"a/a.b.v1.json": {Data: []byte(fmt.Sprintf(schema, tc.mark))},
			})
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Load = %v, want an error saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, _ := r.Lookup("a.b.v1")
			if !slices.Equal(d.RestrictedFields, tc.restricted) || d.Lake != tc.lake {
				t.Errorf("RestrictedFields %v, lake %q; want %v, %q", d.RestrictedFields, d.Lake, tc.restricted, tc.lake)
			}
		})
	}
}

func TestLoadRejectsBadDefinitions(t *testing.T) {
	schema := []byte(`{"type":"object"}`)
	tests := []struct {
		name string
		yaml string
		want error
	}{
		{"unknown yaml field", "definitions:\n- type: a.b.v1\n  kind: event\n  colour: red\n", nil},
		{"bad kind", "definitions:\n- {type: a.b.v1, kind: fact, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d}\n", errBadDefinition},
		{"bad scope", "definitions:\n- {type: a.b.v1, kind: event, domain: a, owner: o, scope: PLANET, sensitivity: PUBLIC, description: d}\n", errBadDefinition},
		{"unversioned", "definitions:\n- {type: a.b, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d}\n", errBadDefinition},
		{"successor not defined", "definitions:\n- {type: a.b.v1, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d, successor: a.b.v2}\n", errBadDefinition},
		{"successor is an earlier version", "definitions:\n- {type: a.b.v1, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d, successor: a.b.v0}\n", errBadDefinition},
		{"successor is another type", "definitions:\n- {type: a.b.v1, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d, successor: a.c.v2}\n", errBadDefinition},
		{"x-extensible without an enum", "definitions:\n- {type: a.c.v1, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d}\n", errBadDefinition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"catalog.yaml":  {Data: []byte(tt.yaml)},
				"a/a.b.v1.json": {Data: schema},
				"a/a.b.json":    {Data: schema},
				"a/a.c.v1.json": {Data: []byte(`{"type":"object","properties":{"x":{"type":"string","x-extensible":true}}}`)},
			}
			_, err := Load(fsys)
			if err == nil {
				t.Fatal("Load() = nil, want an error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Load() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSchemasAreDraft2020(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.All() {
		var doc map[string]any
		if err := json.Unmarshal(d.Schema, &doc); err != nil {
			t.Fatalf("%s: %v", d.Type, err)
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema = %v, want draft 2020-12", d.Type, doc["$schema"])
		}
	}
}
