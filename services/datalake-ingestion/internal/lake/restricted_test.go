package lake

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/seal"
)

// testCatalog has a type of each rule: sealed (the default), dropped (not
// replayable), a request type whose restricted field has a typed column,
// and a RESTRICTED type without x-sensitive fields (nothing to do).
const testCatalog = `definitions:
  - {type: test.sealed.v1, kind: event, domain: test, owner: t, scope: TENANT, sensitivity: RESTRICTED, replayable: true, description: d}
  - {type: test.dropped.v1, kind: event, domain: test, owner: t, scope: TENANT, sensitivity: RESTRICTED, replayable: false, lake: drop, description: d}
  - {type: request.restricted.v1, kind: event, domain: request, owner: t, scope: TENANT, sensitivity: RESTRICTED, replayable: true, description: d}
  - {type: test.plain.v1, kind: event, domain: test, owner: t, scope: TENANT, sensitivity: RESTRICTED, replayable: true, description: d}
services: []
`

const secretSchema = `{"type":"object","properties":{"note":{"type":"string"},"secret":{"x-sensitive":true},"requestId":{"type":"string"}}}`

func testRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	reg, err := registry.Load(fstest.MapFS{
		"catalog.yaml":                       {Data: []byte(testCatalog)},
		"test/test.sealed.v1.json":           {Data: []byte(secretSchema)},
		"test/test.dropped.v1.json":          {Data: []byte(secretSchema)},
		"test/test.plain.v1.json":            {Data: []byte(`{"type":"object"}`)},
		"request/request.restricted.v1.json": {Data: []byte(`{"type":"object","properties":{"requestId":{"type":"string","x-sensitive":true},"status":{"type":"string"}}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func testRestrictions(t *testing.T, key byte) *Restrictions {
	t.Helper()
	s, err := seal.New(bytes.Repeat([]byte{key}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRestrictions(testRegistry(t).All(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func event(t *testing.T, typ, tenant, payload string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New(typ, tenant, "p", json.RawMessage(payload))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRestrictedFieldsAreSealedOrDropped: what each rule stores (the
// payload column, the typed columns), and what a replay reads back.
func TestRestrictedFieldsAreSealedOrDropped(t *testing.T) {
	r := testRestrictions(t, 1)
	tests := []struct {
		name, typ, payload string
		stored             string // the stored payload, sealed values written as S
		back               string // what Reveal returns
	}{
		{"sealed, order and other members kept", "test.sealed.v1", `{"note":"n","secret":{"cpf":"SECRET-1"},"requestId":"r"}`,
			`{"note":"n","secret":S,"requestId":"r"}`, `{"note":"n","secret":{"cpf":"SECRET-1"},"requestId":"r"}`},
		{"sealed twice when given twice", "test.sealed.v1", `{"secret":"SECRET-1","secret":"SECRET-2"}`,
			`{"secret":S,"secret":S}`, `{"secret":"SECRET-1","secret":"SECRET-2"}`},
		{"absent: nothing to seal", "test.sealed.v1", `{"note":"n"}`, `{"note":"n"}`, `{"note":"n"}`},
		{"dropped", "test.dropped.v1", `{"note":"n","secret":"SECRET-1"}`, `{"note":"n"}`, `{"note":"n"}`},
		{"typed column", "request.restricted.v1", `{"requestId":"SECRET-1","status":"open"}`,
			`{"requestId":S,"status":"open"}`, `{"requestId":"SECRET-1","status":"open"}`},
		{"no restricted field", "test.plain.v1", `{"secret":"SECRET-1"}`, `{"secret":"SECRET-1"}`, `{"secret":"SECRET-1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := event(t, tc.typ, "org-a", tc.payload)
			stored, err := r.Protect(e)
			if err != nil {
				t.Fatal(err)
			}
			row := r.Row(stored)
			if tc.typ != "test.plain.v1" && strings.Contains(row.Payload+row.RequestID+row.Status, "SECRET") {
				t.Errorf("stored row carries a restricted value: payload %s, request_id %q", row.Payload, row.RequestID)
			}
			if got := sealedAsS(row.Payload); got != tc.stored {
				t.Errorf("stored payload %s, want %s", got, tc.stored)
			}
			if tc.typ == "request.restricted.v1" && (row.RequestID != "" || row.Status != "open") {
				t.Errorf("typed columns request_id %q, status %q; want none and open", row.RequestID, row.Status)
			}
			read, err := row.Envelope()
			if err != nil {
				t.Fatal(err)
			}
			back, err := r.Reveal(read)
			if err != nil || string(back) != tc.back {
				t.Errorf("Reveal = %s, %v; want %s", back, err, tc.back)
			}
		})
	}
}

// sealedAsS writes each sealed string of payload as S.
func sealedAsS(payload string) string {
	for {
		i := strings.Index(payload, `"`+seal.Prefix)
		if i < 0 {
			return payload
		}
		j := strings.Index(payload[i+1:], `"`)
		payload = payload[:i] + "S" + payload[i+j+2:]
	}
}

// TestSealedValueOpensOnlyInItsRow: a sealed value moved to another
// tenant's row, another event's row, or read with another master key is an
// error naming the event and the field, never a payload.
func TestSealedValueOpensOnlyInItsRow(t *testing.T) {
	r := testRestrictions(t, 1)
	a, err := r.Protect(event(t, "test.sealed.v1", "org-a", `{"secret":"SECRET-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	moved := func(tenant string) envelope.Envelope {
		e := event(t, "test.sealed.v1", tenant, `{"secret":"x"}`)
		e.Payload = a.Payload
		return e
	}
	tests := []struct {
		name string
		r    *Restrictions
		e    envelope.Envelope
	}{
		{"another tenant's row", r, moved("org-b")},
		{"another event's row", r, moved("org-a")},
		{"another master key", testRestrictions(t, 2), a},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Reveal(tc.e)
			if !errors.Is(err, seal.ErrOpen) || !strings.Contains(err.Error(), tc.e.ID) || !strings.Contains(err.Error(), "field secret") {
				t.Errorf("Reveal = %s, %v; want ErrOpen naming event %s and field secret", got, err, tc.e.ID)
			}
		})
	}
}

// TestNewRestrictionsNeedsASealerToSeal: no key is an error only when a
// type must be sealed.
func TestNewRestrictionsNeedsASealerToSeal(t *testing.T) {
	all := testRegistry(t).All()
	if _, err := NewRestrictions(all, nil); !errors.Is(err, ErrNoSealer) || !strings.Contains(err.Error(), "test.sealed.v1") {
		t.Errorf("no sealer, a type to seal: %v; want ErrNoSealer naming test.sealed.v1", err)
	}
	var dropOnly []registry.Definition
	for _, d := range all {
		if d.Lake != lakeEncrypt {
			dropOnly = append(dropOnly, d)
		}
	}
	r, err := NewRestrictions(dropOnly, nil)
	if err != nil {
		t.Fatalf("no sealer, nothing to seal: %v", err)
	}
	e, err := r.Protect(event(t, "test.dropped.v1", "org-a", `{"secret":"SECRET-1"}`))
	if err != nil || string(e.Payload) != `{}` {
		t.Errorf("Protect = %s, %v; want {}", e.Payload, err)
	}
}

// An archived dead letter carries a whole message, RESTRICTED ones
// included: with the platform's catalog, the lake seals the letter and its
// error, and history gets them back whole.
func TestArchivedLettersAreSealed(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRestrictions(reg.All(), s)
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"queue":"datalake.platform-events","messageId":"m1","attempts":1,"deadLetteredAt":"2026-12-03T10:00:00Z",
		"error":"citizenId CPF-IN-ERROR refused","letter":{"type":"citizen.updated.v1","payload":{"citizenId":"CPF-IN-LETTER"}}}`
	env := event(t, "platform.dead-letter-archived.v1", "org-a", payload)
	stored, err := r.Protect(env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored.Payload), "CPF-IN") || !strings.Contains(string(stored.Payload), `"queue":"datalake.platform-events"`) {
		t.Fatalf("stored payload %s: want the letter and error sealed, the rest as it was", stored.Payload)
	}
	back, err := r.Reveal(stored)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(payload), &want)
	_ = json.Unmarshal(back, &got)
	if !jsonEqual(want, got) {
		t.Errorf("revealed %s, want %s", back, payload)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
