package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

// inClear is the Opener of a lake that seals nothing.
type inClear struct{}

func (inClear) Reveal(e envelope.Envelope) (json.RawMessage, error) { return e.Payload, nil }

// failsToOpen is an Opener that opens nothing of one event.
type failsToOpen struct{ eventID string }

func (o failsToOpen) Reveal(e envelope.Envelope) (json.RawMessage, error) {
	if e.ID == o.eventID {
		return nil, errors.New("event " + e.ID + ": field citizenId: sealed value does not open")
	}
	return e.Payload, nil
}

// fakeLake is an index and an object store over the same files.
type fakeLake struct {
	locs  []postgres.Located
	files map[string][]byte
	mu    sync.Mutex
	gets  map[string]int
	asked postgres.HistoryQuery
}

func (f *fakeLake) History(_ context.Context, tenantID string, q postgres.HistoryQuery) ([]postgres.Located, error) {
	f.asked = q
	return f.locs[:min(q.Limit, len(f.locs))], nil
}

func (f *fakeLake) Get(_ context.Context, bucket, key string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets[bucket+"/"+key]++
	data, ok := f.files[bucket+"/"+key]
	if !ok {
		return nil, errors.New("NoSuchKey")
	}
	return data, nil
}

// newFakeLake writes n events of org-a across files of three rows, in
// (occurredAt, id) order.
func newFakeLake(t *testing.T, n int) (*fakeLake, []envelope.Envelope) {
	t.Helper()
	f := &fakeLake{files: map[string][]byte{}, gets: map[string]int{}}
	base := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
	var events []envelope.Envelope
	var rows []lake.Row
	for i := range n {
		e, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		e.OccurredAt = base.Add(time.Duration(i) * time.Second)
		events = append(events, e)
		rows = append(rows, lake.RowOf(e))
		key := fmt.Sprintf("tenant=org-a/f%d.parquet", i/3)
		f.locs = append(f.locs, postgres.Located{EventID: e.ID, EventType: e.Type, Bucket: "lake", ObjectKey: key,
			RowOffset: i % 3, CorrelationID: e.CorrelationID, OccurredAt: e.OccurredAt.Add(123 * time.Microsecond)})
		if i%3 == 2 || i == n-1 {
			data, err := lake.Encode(rows)
			if err != nil {
				t.Fatal(err)
			}
			f.files["lake/"+key] = data
			rows = nil
		}
	}
	return f, events
}

func TestPageReadsEachFileOnce(t *testing.T) {
	f, events := newFakeLake(t, 8)
	r := New(f, f, inClear{})
	page, err := r.Page(context.Background(), "org-a", postgres.HistoryQuery{Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	if f.asked.Limit != 8 {
		t.Errorf("asked the index for %d events, want limit+1 = 8", f.asked.Limit)
	}
	if len(page.Events) != 7 {
		t.Fatalf("page of %d events, want 7", len(page.Events))
	}
	for i, e := range page.Events {
		if e.ID != events[i].ID || string(e.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("event %d = %s %s, want %s", i, e.ID, e.Payload, events[i].ID)
		}
		if want := events[i].OccurredAt.Add(123 * time.Microsecond); !e.OccurredAt.Equal(want) {
			t.Errorf("event %d occurredAt = %v, want the lineage's %v", i, e.OccurredAt, want)
		}
	}
	if page.Next == nil || page.Next.EventID != events[6].ID || !page.Next.OccurredAt.Equal(f.locs[6].OccurredAt) {
		t.Errorf("next = %+v, want the position of the page's last event %s", page.Next, events[6].ID)
	}
	if len(f.gets) != 3 {
		t.Errorf("fetched %d files, want 3", len(f.gets))
	}
	for k, n := range f.gets {
		if n != 1 {
			t.Errorf("fetched %s %d times, want once", k, n)
		}
	}

	page, err = r.Page(context.Background(), "org-a", postgres.HistoryQuery{Limit: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 8 || page.Next != nil {
		t.Errorf("whole history: %d events, next %+v; want 8 and none", len(page.Events), page.Next)
	}
}

func TestPageFailsRatherThanLeaveAGap(t *testing.T) {
	tests := []struct {
		name   string
		damage func(f *fakeLake)
		want   string
		opener func(f *fakeLake) Opener // nil: inClear
	}{
		{"missing file", func(f *fakeLake) { delete(f.files, "lake/tenant=org-a/f1.parquet") }, "NoSuchKey", nil},
		{"not parquet", func(f *fakeLake) { f.files["lake/tenant=org-a/f1.parquet"] = []byte("PAR1 nope") }, "parquet", nil},
		{"row past the file", func(f *fakeLake) { f.locs[4].RowOffset = 3 }, "has 3 rows", nil},
		{"another event's row", func(f *fakeLake) { f.locs[4].RowOffset = 0 }, "is event", nil},
		{"a sealed field that does not open", func(*fakeLake) {}, "does not open",
			func(f *fakeLake) Opener { return failsToOpen{f.locs[4].EventID} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newFakeLake(t, 6)
			tc.damage(f)
			var o Opener = inClear{}
			if tc.opener != nil {
				o = tc.opener(f)
			}
			_, err := New(f, f, o).Page(context.Background(), "org-a", postgres.HistoryQuery{Limit: 10})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Page = %v, want an error about %q", err, tc.want)
			}
		})
	}
	f, _ := newFakeLake(t, 3)
	if _, err := New(f, f, inClear{}).Page(context.Background(), "org-b", postgres.HistoryQuery{Limit: 10}); err == nil {
		t.Error("a page of org-b returned org-a's rows")
	}
}
