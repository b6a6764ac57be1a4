package payload_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

type message interface{ MessageType() string }

// samples fills every field of every payload type with a value its schema
// accepts, so each JSON name the type writes is checked against the closed
// schema (an empty omitempty field would escape the check).
func samples() []message {
	const (
		id1 = "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6d"
		id2 = "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6e"
		id3 = "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6f"
	)
	at := time.Date(2026, 3, 14, 9, 26, 53, 589_000_000, time.UTC)
	return []message{
		payload.RequestSubmitted{RequestID: id1, Protocol: "2026-000042", ServiceID: "street-lighting",
			FormID: "lighting-form", FormVersion: 3, Channel: enum.Of(payload.Channel("web")),
			CitizenID: "citizen-7", SubmittedAt: at, FieldCount: 4},
		payload.RequestStatusChanged{RequestID: id1, Status: "completed", PreviousStatus: "in_progress",
			ServiceID: "street-lighting", Channel: "web", Reason: "process approved", CitizenID: "citizen-7",
			Protocol: "2026-000042", ChangedAt: at},
		payload.RequestCancelled{RequestID: id1, PreviousStatus: "in_progress", CancelledBy: "citizen-7",
			Reason: "submitted by mistake", CancelledAt: at},
		payload.DocumentUploaded{DocumentID: id2, RequestID: id1, Bucket: "documents",
			ObjectKey: "tenant=org-a/request=" + id1 + "/" + id2, FileName: "lamp.jpg", ContentType: "image/jpeg",
			Size: 48213, SHA256: strings.Repeat("ab", 32)},
		payload.DocumentProcessed{DocumentID: id2, RequestID: id1, TextObjectKey: "tenant=org-a/text/" + id2 + ".txt",
			Pages: 2, Characters: 1800, Language: "por", Method: enum.Of(payload.ExtractionMethod("pdftotext")), DurationMs: 350},
		payload.DocumentValidated{DocumentID: id2, RequestID: id1, Valid: false, Kind: enum.Of(payload.DocumentKind("unknown")),
			Checks: []payload.DocumentCheck{{Name: "readable", Passed: false, Detail: "12 letters, want at least 20"}, {Name: "kind", Passed: false}},
			Reason: "too little text to read"},
		payload.KnowledgeIndex{DocumentID: id2, RequestID: id1, TextObjectKey: "tenant=org-a/text/" + id2 + ".txt", Language: "por"},
		payload.ProcessDocument{DocumentID: id2},
		payload.KnowledgeIndexed{DocumentID: id2, RequestID: id1, Chunks: 5, Embedder: "hash", Dimensions: 384},
		payload.ProcessStarted{ProcessID: id2, RequestID: id1, DefinitionID: "default-v1", FirstTaskID: id3},
		payload.TaskCompleted{ProcessID: id2, TaskID: id3, RequestID: id1, Step: "review", Outcome: "approved", CompletedBy: "ana",
			Reason: "documents complete"},
		payload.ProcessCompleted{ProcessID: id2, RequestID: id1, Outcome: "approved"},
		payload.SLABreached{TaskID: id3, ProcessID: id2, RequestID: id1, Step: "review", AssigneeRole: "attendant", DueAt: at},
		payload.Stuck{ProcessID: id2, RequestID: id1, DefinitionID: "default", TaskID: id3, Step: "review", WaitingSince: at, StuckAfterSeconds: 259200},
		payload.ScheduleFired{ScheduleID: id1, Name: "daily-report", Slot: at, FiredAt: at, Late: true, SkippedBefore: 2, Payload: []byte(`{"report":"daily"}`),
			Query: "requests-due-within", RequestID: id2, ServiceID: "building-permit"},
		payload.ServiceUpdated{ServiceID: "street-lighting", Change: enum.Of(payload.ServiceChange("requires-document")), RequiredDocument: "proof of address", Description: "now required"},
		payload.Send{Channel: "sms", RecipientRef: "citizen-7", Template: "confirmation", RequestID: id1,
			Params: map[string]any{"protocol": "2026-000042", "attempt": 2.0}},
		payload.NotificationSent{NotificationID: id3, RequestID: id1, Channel: enum.Of(payload.NotificationChannel("email")), Status: "sent"},
	}
}

// field is one JSON property a struct writes.
type field struct {
	index     int
	omitempty bool
}

func jsonFields(t *testing.T, typ reflect.Type) map[string]field {
	t.Helper()
	out := map[string]field{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, ok := f.Tag.Lookup("json")
		if !ok || tag == "-" {
			t.Errorf("%s.%s has no json tag: its name on the wire would follow the Go name", typ.Name(), f.Name)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		out[name] = field{index: i, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

func TestPayloadsMatchTheirSchemas(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range samples() {
		typ := p.MessageType()
		t.Run(typ, func(t *testing.T) {
			d, ok := reg.Lookup(typ)
			if !ok {
				t.Fatalf("%s is not in the catalog", typ)
			}
			rt := reflect.TypeOf(p)
			fields := jsonFields(t, rt)
			data, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var sent map[string]json.RawMessage
			if err := json.Unmarshal(data, &sent); err != nil {
				t.Fatal(err)
			}
			for name := range fields {
				if _, ok := sent[name]; !ok {
					t.Errorf("the sample leaves %q out, so its name and type go unchecked: fill it", name)
				}
			}
			if err := reg.ValidatePayload(typ, data); err != nil {
				t.Errorf("%s marshals to JSON its schema refuses: %v\n%s", rt.Name(), err, data)
			}

			var schema struct {
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(d.Schema, &schema); err != nil {
				t.Fatal(err)
			}
			for _, name := range schema.Required {
				f, ok := fields[name]
				switch {
				case !ok:
					t.Errorf("%s has no field for %q, which the schema requires", rt.Name(), name)
				case f.omitempty:
					t.Errorf("%s.%s is omitempty, but the schema requires %q", rt.Name(), rt.Field(f.index).Name, name)
				}
			}

			// What a consumer decodes is what the producer meant.
			back := reflect.New(rt)
			if err := json.Unmarshal(data, back.Interface()); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
			again, err := json.Marshal(back.Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, data) {
				t.Errorf("round trip changed the payload:\n sent %s\n read %s", data, again)
			}

			for path, values := range d.ExtensibleEnums {
				name, top := strings.CutPrefix(path, "/")
				f, ok := fields[name]
				if !top || strings.Contains(name, "/") || !ok {
					t.Errorf("extensible enumeration %s has no field of its own in %s", path, rt.Name())
					continue
				}
				checkOpen(t, rt.Field(f.index), values)
			}
		})
	}
}

// checkOpen asserts that f is an enum.Open whose Known type calls exactly
// the catalog's values known.
func checkOpen(t *testing.T, f reflect.StructField, values []string) {
	t.Helper()
	if f.Type.PkgPath() != reflect.TypeFor[enum.Open[payload.Channel]]().PkgPath() || !strings.HasPrefix(f.Type.Name(), "Open[") {
		t.Errorf("%s is %s, but the schema marks it x-extensible: make it an enum.Open", f.Name, f.Type)
		return
	}
	known := func(v string) bool {
		o := reflect.New(f.Type)
		raw, _ := json.Marshal(v)
		if err := json.Unmarshal(raw, o.Interface()); err != nil {
			t.Fatalf("decode %s into %s: %v", raw, f.Type, err)
		}
		return o.Elem().MethodByName("Value").Call(nil)[1].Bool()
	}
	for _, v := range values {
		if !known(v) {
			t.Errorf("%s: %q is not known, but the catalog lists it", f.Type, v)
		}
	}
	for _, v := range []string{"", "not-in-the-catalog", strings.ToUpper(values[0])} {
		if known(v) {
			t.Errorf("%s: %q is known, but the catalog does not list it", f.Type, v)
		}
	}
}

// TestEveryPayloadIsSampled keeps samples complete: a payload type added
// to the package without a sample would never be checked.
func TestEveryPayloadIsSampled(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "MessageType" {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				declared = append(declared, id.Name)
			}
		}
	}
	var sampled []string
	for _, p := range samples() {
		sampled = append(sampled, reflect.TypeOf(p).Name())
	}
	slices.Sort(declared)
	slices.Sort(sampled)
	if !slices.Equal(declared, sampled) {
		t.Errorf("payload types %q, samples of %q: every type needs exactly one sample", declared, sampled)
	}
	if len(declared) == 0 {
		t.Error("found no payload types: the parse is broken")
	}
}
