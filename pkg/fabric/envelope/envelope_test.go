package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustNew(t *testing.T, typ, tenant string) Envelope {
	t.Helper()
	e, err := New(typ, tenant, "test", map[string]any{"k": "v"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func TestValidate(t *testing.T) {
	base := mustNew(t, "request.submitted.v1", "org-a")
	tests := []struct {
		name           string
		mutate         func(*Envelope)
		tenantRequired bool
		want           error
	}{
		{"valid", func(*Envelope) {}, true, nil},
		{"missing id", func(e *Envelope) { e.ID = "" }, true, ErrMissingField},
		{"uuid v4 id", func(e *Envelope) { e.ID = "3b241101-e2bb-4255-8caf-4136c566a962" }, true, ErrInvalidField},
		{"schema revision", func(e *Envelope) { e.SchemaVersion = "1.2" }, true, nil},
		{"schema version of another major", func(e *Envelope) { e.SchemaVersion = "2" }, true, ErrInvalidField},
		{"schema version banana", func(e *Envelope) { e.SchemaVersion = "banana" }, true, ErrInvalidField},
		{"extension shadows a field", func(e *Envelope) { e.Extensions = map[string]json.RawMessage{"tenantId": []byte(`"x"`)} }, true, ErrInvalidField},
		{"missing type", func(e *Envelope) { e.Type = "" }, true, ErrMissingField},
		{"unversioned type", func(e *Envelope) { e.Type = "request.submitted" }, true, ErrInvalidField},
		{"version mismatch", func(e *Envelope) { e.Version = "2" }, true, ErrInvalidField},
		{"missing tenant", func(e *Envelope) { e.TenantID = "" }, true, ErrMissingField},
		{"missing tenant, global type", func(e *Envelope) { e.TenantID = "" }, false, nil},
		{"bad tenant", func(e *Envelope) { e.TenantID = "Org A/../b" }, true, ErrInvalidField},
		{"missing correlation", func(e *Envelope) { e.CorrelationID = "" }, true, ErrMissingField},
		{"missing producer", func(e *Envelope) { e.Producer = "" }, true, ErrMissingField},
		{"null payload", func(e *Envelope) { e.Payload = json.RawMessage("null") }, true, ErrMissingField},
		{"array payload", func(e *Envelope) { e.Payload = json.RawMessage("[1]") }, true, ErrInvalidField},
		{"user actor and entity", func(e *Envelope) {
			e.Actor, e.Entity = &Ref{Type: "USER", ID: "citizen-1"}, &Ref{Type: "request", ID: "r-1"}
		}, true, nil},
		{"agent actor", func(e *Envelope) { e.Actor = &Ref{Type: "AGENT", ID: "subscription/s-1"} }, true, nil},
		{"actor of no known type", func(e *Envelope) { e.Actor = &Ref{Type: "ROBOT", ID: "r2"} }, true, ErrInvalidField},
		{"actor without id", func(e *Envelope) { e.Actor = &Ref{Type: "SYSTEM"} }, true, ErrInvalidField},
		{"actor id too long", func(e *Envelope) { e.Actor = &Ref{Type: "USER", ID: strings.Repeat("x", 201)} }, true, ErrInvalidField},
		{"entity without type", func(e *Envelope) { e.Entity = &Ref{ID: "r-1"} }, true, ErrInvalidField},
		{"non-UTC time", func(e *Envelope) { e.OccurredAt = e.OccurredAt.In(time.FixedZone("BRT", -3*3600)) }, true, ErrInvalidField},
		{"zero time", func(e *Envelope) { e.OccurredAt = time.Time{} }, true, ErrMissingField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			tt.mutate(&e)
			err := e.Validate(tt.tenantRequired)
			if tt.want == nil && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	good, err := mustNew(t, "request.submitted.v1", "org-a").Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data string
		max  int
		want error
	}{
		{"round trip", string(good), 0, nil},
		{"unknown field is kept, not refused", strings.Replace(string(good), `"id"`, `"extra":1,"id"`, 1), 0, nil},
		{"field named twice", strings.Replace(string(good), `"id"`, `"tenantId":"org-b","id"`, 1), 0, ErrMalformed},
		{"known field of the wrong type", strings.Replace(string(good), `"producer":"test"`, `"producer":7`, 1), 0, ErrMalformed},
		{"array, not object", `[` + string(good) + `]`, 0, ErrMalformed},
		{"trailing data", string(good) + `{}`, 0, ErrMalformed},
		{"not json", `not json`, 0, ErrMalformed},
		{"too large", string(good), 10, errTooLarge},
		{"bad time", strings.Replace(string(good), `"occurredAt":"`, `"occurredAt":"x`, 1), 0, ErrMalformed},
		{"an added field nested 5,000 deep", strings.Replace(string(good), `"id"`, `"extra":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`,"id"`, 1), 0, ErrMalformed},
		{"an added field nested 60 deep is kept", strings.Replace(string(good), `"id"`, `"extra":`+strings.Repeat("[", 60)+strings.Repeat("]", 60)+`,"id"`, 1), 0, nil},
		{"brackets inside a string do not nest", strings.Replace(string(good), `"id"`, `"extra":"`+strings.Repeat("[{", 100)+`\\\"[","id"`, 1), 0, nil},
		{"33 added fields", strings.Replace(string(good), `"id"`, manyFields(33)+`"id"`, 1), 0, ErrMalformed},
		{"32 added fields are kept", strings.Replace(string(good), `"id"`, manyFields(32)+`"id"`, 1), 0, nil},
		{"invalid UTF-8 in a string", strings.Replace(string(good), `"producer":"test"`, "\"producer\":\"te\xffst\"", 1), 0, ErrMalformed},
		{"null for a string field is no value", strings.Replace(string(good), `"producer":"test"`, `"producer":"test","causationId":null`, 1), 0, nil},
		{"an actor of the wrong type", strings.Replace(string(good), `"id"`, `"actor":"USER","id"`, 1), 0, ErrMalformed},
		{"a chain of the wrong type", strings.Replace(string(good), `"id"`, `"causationChain":{},"id"`, 1), 0, ErrMalformed},
		{"a payload cut short", strings.Replace(string(good), `"payload":{`, `"payload":{"a":`, 1), 0, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data), tt.max)
			if tt.want == nil && err != nil {
				t.Fatalf("Decode() = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Decode() = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestDecodeReadsEveryField pins what the streaming reader keeps: each
// field by its name, references matched as encoding/json matches them
// (any case, unknown members skipped), null as no value, the payload and
// the extensions byte for byte.
func TestDecodeReadsEveryField(t *testing.T) {
	data := `{"id":"0192d3a0-0000-7000-8000-000000000009","type":"request.submitted.v1","version":"v1",` +
		`"occurredAt":"2026-11-30T10:00:00.123Z","tenantId":"org-a","correlationId":"c","causationId":null,` +
		`"causationChain":[{"type":"a.b.v1","id":"1"},{"TYPE":"c.d.v1","Id":"2","extra":[1]}],"producer":"p",` +
		`"actor":{"type":"USER","id":"u"},"entity":null,"schemaVersion":"1.0","payload": {"n": 1.50, "s":"é"} ,"x-ext":[ 1, {"a":null} ]}`
	e, err := Decode([]byte(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339, "2026-11-30T10:00:00.123Z")
	want := Envelope{ID: "0192d3a0-0000-7000-8000-000000000009", Type: "request.submitted.v1", Version: "v1", OccurredAt: at,
		TenantID: "org-a", CorrelationID: "c", CausationChain: []Ref{{"a.b.v1", "1"}, {"c.d.v1", "2"}}, Producer: "p",
		Actor: &Ref{"USER", "u"}, SchemaVersion: "1.0", Payload: json.RawMessage(`{"n": 1.50, "s":"é"}`),
		Extensions: map[string]json.RawMessage{"x-ext": json.RawMessage(`[ 1, {"a":null} ]`)}}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("Decode =\n%+v\nwant\n%+v", e, want)
	}
}

func TestValidateIncomingAcceptsAnyRFC9562UUID(t *testing.T) {
	base := mustNew(t, "request.submitted.v1", "org-a")
	tests := []struct {
		name     string
		id       string
		incoming error // ValidateIncoming
		outgoing error // Validate
	}{
		{"v7", base.ID, nil, nil},
		{"v4", "3b241101-e2bb-4255-8caf-4136c566a962", nil, ErrInvalidField},
		{"v1", "c232ab00-9414-11ec-b3c8-9f6bdeced846", nil, ErrInvalidField},
		{"v8", "2489e9ad-2ee2-8e00-8ec9-32d5f69181c0", nil, ErrInvalidField},
		{"nil uuid", "00000000-0000-0000-0000-000000000000", ErrInvalidField, ErrInvalidField},
		{"max uuid", "ffffffff-ffff-ffff-ffff-ffffffffffff", ErrInvalidField, ErrInvalidField},
		{"microsoft variant", "3b241101-e2bb-4255-cfaf-4136c566a962", ErrInvalidField, ErrInvalidField},
		{"urn form", "urn:uuid:3b241101-e2bb-4255-8caf-4136c566a962", ErrInvalidField, ErrInvalidField},
		{"braces", "{3b241101-e2bb-4255-8caf-4136c566a962}", ErrInvalidField, ErrInvalidField},
		{"not a uuid", "request-1", ErrInvalidField, ErrInvalidField},
	}
	check := func(t *testing.T, what string, got, want error) {
		t.Helper()
		if want == nil && got != nil || want != nil && !errors.Is(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			e.ID = tt.id
			check(t, "ValidateIncoming", e.ValidateIncoming(true), tt.incoming)
			check(t, "Validate", e.Validate(true), tt.outgoing)
		})
	}
}

// TestExtensionsSurviveARoundTrip: envelope metadata added by a newer
// producer is kept by a reader that does not know it and written back.
func TestExtensionsSurviveARoundTrip(t *testing.T) {
	good, err := mustNew(t, "request.submitted.v1", "org-a").Encode()
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(string(good), `"id"`, `"priority":{"level":2,"why":"deadline"},"zz":[1,"a"],"id"`, 1)
	e, err := Decode([]byte(in), 0)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got := string(e.Extensions["priority"]); got != `{"level":2,"why":"deadline"}` {
		t.Errorf("Extensions[priority] = %s", got)
	}
	if err := e.ValidateIncoming(true); err != nil {
		t.Fatalf("ValidateIncoming: %v", err)
	}
	out, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if string(gb) != string(wb) {
		t.Errorf("re-encoded =\n%s\nwant\n%s", gb, wb)
	}
	// json.Marshal of an Envelope goes through Encode: nothing dropped.
	viaJSON, err := json.Marshal(e)
	if err != nil || string(viaJSON) != string(out) {
		t.Errorf("json.Marshal = %s, %v; want %s", viaJSON, err, out)
	}
	var back Envelope
	if err := json.Unmarshal(out, &back); err != nil || string(back.Extensions["zz"]) != `[1,"a"]` {
		t.Errorf("json.Unmarshal kept extensions %v, err %v", back.Extensions, err)
	}
}

func TestAlongside(t *testing.T) {
	parent := mustNew(t, "workflow.process-started.v1", "org-a")
	v1, err := Derive(parent, "request.submitted.v1", "request", map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := Alongside(v1, "request.submitted.v2", map[string]int{"b": 2})
	if err != nil {
		t.Fatal(err)
	}
	if v2.ID == v1.ID || v2.Type != "request.submitted.v2" || v2.Version != "2" || v2.SchemaVersion != "2" ||
		v2.TenantID != v1.TenantID || v2.CorrelationID != v1.CorrelationID || v2.CausationID != v1.CausationID ||
		!v2.OccurredAt.Equal(v1.OccurredAt) || len(v2.CausationChain) != 1 || v2.Producer != v1.Producer {
		t.Fatalf("Alongside = %+v, from %+v", v2, v1)
	}
	for _, typ := range []string{"request.submitted.v1", "request.cancelled.v2", "request.submitted"} {
		if _, err := Alongside(v1, typ, nil); err == nil {
			t.Errorf("Alongside(v1, %q) = nil error", typ)
		}
	}
}

func TestRoundTripKeepsEverything(t *testing.T) {
	parent := mustNew(t, "request.submitted.v1", "org-a")
	child, err := Derive(parent, "workflow.process-started.v1", "workflow", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := child.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b, 0)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.ID != child.ID || !got.OccurredAt.Equal(child.OccurredAt) || got.CausationID != parent.ID || len(got.CausationChain) != 1 {
		t.Fatalf("round trip = %+v, want %+v", got, child)
	}
	if got.Actor != nil || got.Entity != nil {
		t.Errorf("actor %v and entity %v, want none: the envelope had none", got.Actor, got.Entity)
	}
	child.Actor, child.Entity = &Ref{Type: "AGENT", ID: "subscription/s-1"}, &Ref{Type: "request", ID: "r-1"}
	if b, err = child.Encode(); err != nil {
		t.Fatal(err)
	}
	if got, err = Decode(b, 0); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if got.Actor == nil || *got.Actor != *child.Actor || got.Entity == nil || *got.Entity != *child.Entity || len(got.Extensions) != 0 {
		t.Errorf("round trip of actor and entity = %v, %v (extensions %v), want %v, %v", got.Actor, got.Entity, got.Extensions, *child.Actor, *child.Entity)
	}
	if err := got.Validate(true); err != nil {
		t.Fatalf("Validate after round trip: %v", err)
	}
}

func TestDerive(t *testing.T) {
	root := mustNew(t, "request.submitted.v1", "org-a")
	child, err := Derive(root, "workflow.process-started.v1", "workflow", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	grand, err := Derive(child, "communication.notification-sent.v1", "communication", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if grand.CorrelationID != root.ID {
		t.Errorf("correlationId = %s, want root id %s", grand.CorrelationID, root.ID)
	}
	if grand.CausationID != child.ID {
		t.Errorf("causationId = %s, want %s", grand.CausationID, child.ID)
	}
	if grand.TenantID != "org-a" {
		t.Errorf("tenantId = %q, want org-a", grand.TenantID)
	}
	want := []Ref{{root.Type, root.ID}, {child.Type, child.ID}}
	if len(grand.CausationChain) != 2 || grand.CausationChain[0] != want[0] || grand.CausationChain[1] != want[1] {
		t.Errorf("chain = %v, want %v", grand.CausationChain, want)
	}
	if len(child.CausationChain) != 1 {
		t.Errorf("deriving a grandchild changed the child's chain: %v", child.CausationChain)
	}
	if err := grand.CheckCausation(0); err != nil {
		t.Errorf("CheckCausation = %v, want nil", err)
	}
}

func TestCheckCausation(t *testing.T) {
	chainOf := func(n int) Envelope {
		e := mustNew(t, "request.submitted.v1", "org-a")
		for i := 0; i < n; i++ {
			c, err := Derive(e, "request.submitted.v1", "test", struct{}{})
			if err != nil {
				t.Fatal(err)
			}
			e = c
		}
		return e
	}
	cyclic := chainOf(3)
	cyclic.CausationChain[2].ID = cyclic.CausationChain[0].ID
	cyclic.CausationID = cyclic.CausationChain[0].ID
	self := mustNew(t, "request.submitted.v1", "org-a")
	self.CausationID = self.ID
	selfInChain := chainOf(2)
	selfInChain.CausationChain[0].ID = selfInChain.ID
	broken := chainOf(2)
	broken.CausationID = "0192d3a0-0000-7000-8000-000000000000"
	tests := []struct {
		name string
		env  Envelope
		max  int
		want error
	}{
		{"no chain", chainOf(0), 0, nil},
		{"depth 16 ok", chainOf(16), 0, nil},
		{"depth 17 refused", chainOf(17), 0, ErrReactionDepth},
		{"custom limit", chainOf(3), 2, ErrReactionDepth},
		{"repeated ancestor", cyclic, 0, ErrCausationCycle},
		{"self causation", self, 0, ErrCausationCycle},
		{"own id in chain", selfInChain, 0, ErrCausationCycle},
		{"chain not ending in causationId", broken, 0, ErrInvalidField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.env.CheckCausation(tt.max)
			if tt.want == nil && err != nil {
				t.Fatalf("CheckCausation() = %v, want nil", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("CheckCausation() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVersionOf(t *testing.T) {
	for in, want := range map[string]string{"request.submitted.v1": "1", "ai.knowledge.index.v12": "12", "plain": ""} {
		if got := VersionOf(in); got != want {
			t.Errorf("VersionOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDecodeEnvelope checks that decoding never panics and that whatever
// decodes and validates survives an encode/decode round trip unchanged.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"id":"0192d3a0-0000-7000-8000-000000000000","type":"request.submitted.v1","version":"1","occurredAt":"2026-01-01T00:00:00Z","tenantId":"org-a","correlationId":"c","producer":"p","schemaVersion":"1","payload":{}}`))
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data, 4096)
		if err != nil {
			return
		}
		_ = e.CheckCausation(0)
		if e.Validate(false) != nil {
			return
		}
		b, err := e.Encode()
		if err != nil {
			t.Fatalf("Encode of a valid envelope: %v", err)
		}
		again, err := Decode(b, 1<<20)
		if err != nil {
			t.Fatalf("re-Decode: %v", err)
		}
		if again.ID != e.ID || again.Type != e.Type || again.TenantID != e.TenantID || !again.OccurredAt.Equal(e.OccurredAt) ||
			len(again.Extensions) != len(e.Extensions) {
			t.Fatalf("round trip changed the envelope: %+v vs %+v", again, e)
		}
	})
}

// TestEncodeMatchesEncodingJSON pins the hand-written encoder to
// encoding/json's output for awkward strings.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	type plain Envelope // no methods: encoding/json's own rendering
	for _, s := range []string{"plain", `quo"te\back`, "ctl\x01\n\t\r", "<a>&b", "ação ✓ 日本", "bad\xffutf8", "line\u2028sep\u2029", ""} {
		e := mustNew(t, "request.submitted.v1", "org-a")
		e.Producer, e.CorrelationID = s, s
		e.CausationID = s
		e.CausationChain = []Ref{{Type: s, ID: "x"}}
		e.Payload = json.RawMessage(`{"a":[1,2,{"b":null}]}`)
		got, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(plain(e))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("Encode(%q) =\n%s\nwant\n%s", s, got, want)
		}
	}
	bad := mustNew(t, "request.submitted.v1", "org-a")
	bad.Payload = json.RawMessage(`{"a":`)
	if _, err := bad.Encode(); err == nil {
		t.Error("Encode with invalid payload = nil error")
	}
}

// manyFields is n fields the envelope does not define, each followed by a comma.
func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"x%d":%d,`, i, i)
	}
	return b.String()
}
