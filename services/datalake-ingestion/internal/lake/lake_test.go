package lake

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	e, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{
		"requestId": "0198a3c4-0000-7000-8000-000000000001", "serviceId": "iptu", "channel": "web"})
	if err != nil {
		t.Fatal(err)
	}
	e.Extensions = map[string]json.RawMessage{"x-origin": json.RawMessage(`{"system":"sei"}`), "priority": json.RawMessage(`"high"`)}
	want := RowOf(e)
	if want.Extensions != `{"priority":"high","x-origin":{"system":"sei"}}` {
		t.Errorf("extensions column = %q", want.Extensions)
	}
	data, err := Encode([]Row{want})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Decode = %d rows, want 1", len(got))
	}
	if !got[0].OccurredAt.Equal(want.OccurredAt) {
		t.Errorf("occurred_at = %v, want %v", got[0].OccurredAt, want.OccurredAt)
	}
	got[0].OccurredAt = want.OccurredAt
	if got[0] != want {
		t.Errorf("Decode = %+v, want %+v", got[0], want)
	}
	if want.Status != "submitted" || want.ServiceID != "iptu" {
		t.Errorf("typed columns = %+v", want)
	}
}

func TestGroupRows(t *testing.T) {
	d1 := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	d2 := d1.Add(2 * time.Minute)
	rows := []Row{
		{EventID: "1", TenantID: "org-a", Type: "request.submitted.v1", OccurredAt: d1},
		{EventID: "2", TenantID: "org-b", Type: "request.submitted.v1", OccurredAt: d1},
		{EventID: "3", TenantID: "org-a", Type: "request.submitted.v1", OccurredAt: d1},
		{EventID: "4", TenantID: "org-a", Type: "request.submitted.v1", OccurredAt: d2},
		{EventID: "5", TenantID: "org-a", Type: "request.status-changed.v1", OccurredAt: d1},
	}
	groups := GroupRows(rows)
	want := []struct {
		key string
		ids []string
	}{
		{"tenant=org-a/domain=request/type=request.status-changed.v1/date=2026-03-01/b.parquet", []string{"5"}},
		{"tenant=org-a/domain=request/type=request.submitted.v1/date=2026-03-01/b.parquet", []string{"1", "3"}},
		{"tenant=org-a/domain=request/type=request.submitted.v1/date=2026-03-02/b.parquet", []string{"4"}},
		{"tenant=org-b/domain=request/type=request.submitted.v1/date=2026-03-01/b.parquet", []string{"2"}},
	}
	if len(groups) != len(want) {
		t.Fatalf("GroupRows = %d groups, want %d", len(groups), len(want))
	}
	for i, g := range groups {
		if k := g.Partition.ObjectKey("b"); k != want[i].key {
			t.Errorf("group %d key = %q, want %q", i, k, want[i].key)
		}
		var ids []string
		for _, r := range g.Rows {
			ids = append(ids, r.EventID)
		}
		if len(ids) != len(want[i].ids) || ids[0] != want[i].ids[0] {
			t.Errorf("group %d ids = %v, want %v", i, ids, want[i].ids)
		}
	}
}

func TestParseObjectKey(t *testing.T) {
	batch := "01a23020-a34e-7dbf-b237-69a1af8c97c5"
	made := Partition{TenantID: "org-a", Domain: "request", Type: "request.submitted.v1", Date: "2026-12-01"}.ObjectKey(batch)
	tests := []struct {
		key          string
		tenant, want string
		ok           bool
	}{
		{made, "org-a", batch, true},
		{"exports/report.csv", "", "", false},
		{"tenant=org-a/domain=request/type=x/date=2026-12-01/not-a-uuid.parquet", "", "", false},
		{"tenant=Org_A/domain=request/type=x/date=2026-12-01/" + batch + ".parquet", "", "", false},
		{"tenant=org-a/domain=request/type=x/" + batch + ".parquet", "", "", false},
		{"tenant=org-a/domain=request/type=x/date=2026-12-01/" + batch + ".csv", "", "", false},
	}
	for _, tt := range tests {
		tenant, got, ok := ParseObjectKey(tt.key)
		if ok != tt.ok || tenant != tt.tenant || got != tt.want {
			t.Errorf("ParseObjectKey(%q) = %q, %q, %v; want %q, %q, %v", tt.key, tenant, got, ok, tt.tenant, tt.want, tt.ok)
		}
	}
}

// The status column says what each request event means for the request.
func TestRowStatus(t *testing.T) {
	const id = "0198a3c4-0000-7000-8000-000000000001"
	tests := []struct {
		typ     string
		payload map[string]any
		want    string
	}{
		{"request.submitted.v1", map[string]any{"requestId": id}, "submitted"},
		{"request.status-changed.v1", map[string]any{"requestId": id, "status": "in_progress"}, "in_progress"},
		{"request.cancelled.v1", map[string]any{"requestId": id, "previousStatus": "submitted"}, "cancelled"},
		{"document.uploaded.v1", map[string]any{"requestId": id}, ""},
	}
	for _, tt := range tests {
		e, err := envelope.New(tt.typ, "org-a", "request-service", tt.payload)
		if err != nil {
			t.Fatal(err)
		}
		if r := RowOf(e); r.Status != tt.want || (DomainOf(tt.typ) == "request" && r.RequestID != id) {
			t.Errorf("RowOf(%s): status %q request %q, want %q %s", tt.typ, r.Status, r.RequestID, tt.want, id)
		}
	}
}

// TestRowEnvelope: the envelope rebuilt from a row written to and read
// back from Parquet decodes strictly and is the one the row was made of,
// but for what the lake does not keep (the causation chain).
func TestRowEnvelope(t *testing.T) {
	parent, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{"requestId": "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := envelope.Derive(parent, "request.status-changed.v1", "workflow", json.RawMessage(`{"requestId": "r-1",  "note":"<a & b>"}`))
	if err != nil {
		t.Fatal(err)
	}
	e.Extensions = map[string]json.RawMessage{"x-origin": json.RawMessage(`{"system":"sei","ids":[1,2]}`)}
	plain, err := envelope.New("document.uploaded.v1", "org-b", "document-worker", map[string]any{"documentId": "d-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []envelope.Envelope{e, plain} {
		data, err := Encode([]Row{RowOf(want)})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rows[0].Envelope()
		if err != nil {
			t.Fatal(err)
		}
		b, err := got.Encode()
		if err != nil {
			t.Fatal(err)
		}
		dec, err := envelope.Decode(b, 0)
		if err != nil {
			t.Fatalf("envelope.Decode(%s): %v", b, err)
		}
		if err := dec.ValidateIncoming(true); err != nil {
			t.Errorf("rebuilt envelope does not validate: %v", err)
		}
		want.CausationChain = nil // not kept
		var payload bytes.Buffer
		_ = json.Compact(&payload, want.Payload)
		want.Payload = payload.Bytes()
		wb, _ := want.Encode()
		if !bytes.Equal(b, wb) {
			t.Errorf("rebuilt envelope\n%s\nwant\n%s", b, wb)
		}
	}
	if _, err := (Row{EventID: "x", Payload: "{"}).Envelope(); err == nil {
		t.Error("a row whose payload is not JSON rebuilt an envelope")
	}
	if _, err := (Row{EventID: "x", Payload: "{}", Extensions: "[1]"}).Envelope(); err == nil {
		t.Error("a row whose extensions are not an object rebuilt an envelope")
	}
}
