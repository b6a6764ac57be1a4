package export

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name, from, to, format string
		want                   Format
		ok                     bool
	}{
		{"csv by default", "2026-03-01", "2026-03-31", "", CSV, true},
		{"csv", "2026-03-01", "2026-03-01", "csv", CSV, true},
		{"parquet", "2026-01-01", "2026-12-31", "parquet", Parquet, true},
		{"366 days", "2024-01-01", "2024-12-31", "", CSV, true},
		{"367 days", "2024-01-01", "2025-01-01", "", "", false},
		{"from after to", "2026-03-02", "2026-03-01", "", "", false},
		{"no such day", "2026-02-30", "2026-03-01", "", "", false},
		{"missing from", "", "2026-03-01", "", "", false},
		{"a time, not a day", "2026-03-01T00:00:00Z", "2026-03-02", "", "", false},
		{"unknown format", "2026-03-01", "2026-03-02", "xlsx", "", false},
		{"format is case-sensitive", "2026-03-01", "2026-03-02", "CSV", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New("org-a", "u-1", tc.from, tc.to, tc.format)
			if !tc.ok {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("New(%q, %q, %q) error = %v, want ErrInvalid", tc.from, tc.to, tc.format, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Format != tc.want || e.Status != StatusQueued || e.TenantID != "org-a" || e.RequestedBy != "u-1" || e.ID == "" {
				t.Errorf("New = %+v", e)
			}
		})
	}
}

func TestParseJob(t *testing.T) {
	const id = "0190a0b0-0000-7000-8000-000000000001"
	tests := []struct {
		name    string
		payload string
		wantID  string // the id ParseJob reports, even on an error
		ok      bool
	}{
		{"valid", `{"reportId":"` + id + `","from":"2026-03-01","to":"2026-03-31","format":"parquet"}`, id, true},
		{"format defaults to csv", `{"reportId":"` + id + `","from":"2026-03-01","to":"2026-03-31"}`, id, true},
		{"id in another spelling", `{"reportId":"urn:uuid:` + id + `","from":"2026-03-01","to":"2026-03-01"}`, id, true},
		{"from after to", `{"reportId":"` + id + `","from":"2026-03-02","to":"2026-03-01"}`, id, false},
		{"range too long", `{"reportId":"` + id + `","from":"2020-01-01","to":"2026-03-01"}`, id, false},
		{"bad format", `{"reportId":"` + id + `","from":"2026-03-01","to":"2026-03-01","format":"xml"}`, id, false},
		{"bad id", `{"reportId":"nope","from":"2026-03-01","to":"2026-03-01"}`, "", false},
		{"not json", `[`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJob([]byte(tc.payload))
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("ParseJob error = %v, want ok=%v or ErrInvalid", err, tc.ok)
			}
			if j.ReportID != tc.wantID {
				t.Errorf("ReportID = %q, want %q", j.ReportID, tc.wantID)
			}
			if tc.ok && j.Format == "" {
				t.Errorf("format left empty")
			}
		})
	}
}

func TestEpochDay(t *testing.T) {
	for _, day := range []string{"1970-01-01", "1969-12-31", "2026-03-01", "0001-01-01", "9999-12-31"} {
		d, _ := time.Parse(projection.DateLayout, day)
		if got := DayOf(EpochDay(d)).Format(projection.DateLayout); got != day {
			t.Errorf("DayOf(EpochDay(%s)) = %s", day, got)
		}
	}
	if EpochDay(time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC)) != 1 {
		t.Errorf("1970-01-02 is not day 1")
	}
}

func TestObjectKey(t *testing.T) {
	if got := ObjectKey("org-a", "r-1", Parquet); got != "tenant=org-a/exports/r-1.parquet" {
		t.Errorf("ObjectKey = %q", got)
	}
}

// fakeStore is an export.Store in memory with one export.
type fakeStore struct {
	e        Export
	exists   bool
	rows     []projection.Row
	progress [][2]int64 // (total, written) recorded
	// takeOverAt makes Progress report ErrSuperseded once written reaches it.
	takeOverAt int64
	failed     string
	released   *bool // giveUp of the Release call, if any
	finished   bool
}

func (s *fakeStore) Claim(_ context.Context, tenantID, id string) (Export, error) {
	if !s.exists || tenantID != s.e.TenantID || id != s.e.ID {
		return Export{}, ErrNotFound
	}
	if s.e.Status == StatusDone || s.e.Status == StatusFailed {
		return Export{}, ErrFinished
	}
	s.e.Status, s.e.Attempt, s.e.RowsWritten = StatusRunning, s.e.Attempt+1, 0
	return s.e, nil
}

func (s *fakeStore) Progress(_ context.Context, _, _ string, attempt int, total, written int64) error {
	if attempt != s.e.Attempt || (s.takeOverAt > 0 && written >= s.takeOverAt) {
		return ErrSuperseded
	}
	s.progress = append(s.progress, [2]int64{total, written})
	return nil
}

func (s *fakeStore) Finish(_ context.Context, _, _ string, attempt int, key string, rows int64) error {
	if attempt != s.e.Attempt {
		return ErrSuperseded
	}
	s.finished, s.e.Status, s.e.ObjectKey, s.e.RowsWritten = true, StatusDone, key, rows
	return nil
}

func (s *fakeStore) Release(_ context.Context, _, _ string, _ int, giveUp bool, reason string) error {
	s.released, s.e.Error = &giveUp, reason
	return nil
}

func (s *fakeStore) Fail(_ context.Context, _, id, reason string) error {
	s.failed = id + ": " + reason
	return nil
}

func (s *fakeStore) View(_ context.Context, _ string, _ projection.Range, fn func(Snapshot) error) error {
	return fn(&fakeSnapshot{rows: s.rows})
}

type fakeSnapshot struct{ rows []projection.Row }

func (f *fakeSnapshot) Count(context.Context) (int64, error) { return int64(len(f.rows)), nil }

func (f *fakeSnapshot) Next(_ context.Context, n int) ([]projection.Row, error) {
	n = min(n, len(f.rows))
	page := f.rows[:n]
	f.rows = f.rows[n:]
	return page, nil
}

// fakeObjects keeps what was put; with fail set, Put reads a little and
// fails, as a store that goes away mid-upload does.
type fakeObjects struct {
	puts map[string][]byte
	fail error
}

func (o *fakeObjects) Put(_ context.Context, _, key string, body io.Reader, _ int64, _ string) error {
	if o.fail != nil {
		_, _ = io.CopyN(io.Discard, body, 10)
		return o.fail
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if o.puts == nil {
		o.puts = map[string][]byte{}
	}
	o.puts[key] = b
	return nil
}

func rowsOf(n int) []projection.Row {
	out := make([]projection.Row, n)
	for i := range out {
		out[i] = projection.Row{Day: time.Date(2026, 3, 1+i%28, 0, 0, 0, 0, time.UTC).Format(projection.DateLayout),
			ServiceID: fmt.Sprintf("svc-%03d", i), Channel: "web", Status: "submitted", Count: int64(i + 1)}
	}
	return out
}

func queued(format Format) Export {
	rng, _ := projection.ParseRange("2026-03-01", "2026-03-31")
	return Export{ID: "0190a0b0-0000-7000-8000-000000000001", TenantID: "org-a", Range: rng, Format: format, Status: StatusQueued}
}

func payloadOf(e Export) []byte {
	return fmt.Appendf(nil, `{"reportId":%q,"from":"2026-03-01","to":"2026-03-31","format":%q}`, e.ID, e.Format)
}

func TestRunWritesTheFileAndProgress(t *testing.T) {
	for _, format := range []Format{CSV, Parquet} {
		t.Run(string(format), func(t *testing.T) {
			st := &fakeStore{e: queued(format), exists: true, rows: rowsOf(25)}
			objs := &fakeObjects{}
			r := NewRunner(st, objs, "reports", 10, 4, slog.New(slog.DiscardHandler))
			if err := r.Run(context.Background(), "org-a", payloadOf(st.e)); err != nil {
				t.Fatal(err)
			}
			if !st.finished || st.e.RowsWritten != 25 {
				t.Fatalf("export %+v, want done with 25 rows", st.e)
			}
			// Counted first, then after every page of 10.
			want := [][2]int64{{25, 0}, {25, 10}, {25, 20}, {25, 25}}
			if !slices.Equal(st.progress, want) {
				t.Errorf("progress = %v, want %v", st.progress, want)
			}
			data, ok := objs.puts["tenant=org-a/exports/"+st.e.ID+"."+string(format)]
			if !ok {
				t.Fatalf("no object under the tenant's prefix; puts: %v", keys(objs.puts))
			}
			got := decode(t, format, data)
			if !slices.Equal(got, rowsOf(25)) {
				t.Errorf("file rows = %v, want %v", got, rowsOf(25))
			}
		})
	}
}

func TestRunEmptyRange(t *testing.T) {
	st := &fakeStore{e: queued(CSV), exists: true}
	objs := &fakeObjects{}
	if err := NewRunner(st, objs, "reports", 10, 4, slog.New(slog.DiscardHandler)).Run(context.Background(), "org-a", payloadOf(st.e)); err != nil {
		t.Fatal(err)
	}
	if got := string(objs.puts[st.e.ObjectKey]); got != "day,service_id,channel,status,count\n" {
		t.Errorf("empty export = %q, want the header alone", got)
	}
}

func TestRunOutcomes(t *testing.T) {
	down := errors.New("connection refused")
	tests := []struct {
		name       string
		status     Status
		attempt    int // attempts before this one
		exists     bool
		payload    func(Export) []byte
		objects    *fakeObjects
		takeOverAt int64
		wantErr    error // nil: Run returns nil
		wantAnyErr bool
		check      func(t *testing.T, st *fakeStore, objs *fakeObjects)
	}{
		{name: "done already: a redelivery does nothing", status: StatusDone, exists: true,
			check: func(t *testing.T, st *fakeStore, objs *fakeObjects) {
				if len(objs.puts) > 0 || st.e.Attempt != 0 {
					t.Errorf("a done export was written again")
				}
			}},
		{name: "failed already: nothing either", status: StatusFailed, exists: true,
			check: func(t *testing.T, st *fakeStore, objs *fakeObjects) {
				if len(objs.puts) > 0 {
					t.Errorf("a failed export was written")
				}
			}},
		{name: "running (its worker died) restarts", status: StatusRunning, attempt: 1, exists: true,
			check: func(t *testing.T, st *fakeStore, _ *fakeObjects) {
				if !st.finished || st.e.Attempt != 2 {
					t.Errorf("export %+v, want done by attempt 2", st.e)
				}
			}},
		{name: "no such export", exists: false, wantErr: ErrNotFound},
		{name: "malformed job marks the export failed", exists: true, wantErr: ErrInvalid,
			payload: func(e Export) []byte {
				return fmt.Appendf(nil, `{"reportId":%q,"from":"2026-03-31","to":"2026-03-01"}`, e.ID)
			},
			check: func(t *testing.T, st *fakeStore, _ *fakeObjects) {
				if st.failed == "" {
					t.Errorf("export not marked failed")
				}
			}},
		{name: "store down: back to queued for a retry", exists: true, objects: &fakeObjects{fail: down}, wantAnyErr: true,
			check: func(t *testing.T, st *fakeStore, _ *fakeObjects) {
				if st.released == nil || *st.released || st.finished {
					t.Errorf("released = %v, finished = %v; want released for a retry", st.released, st.finished)
				}
			}},
		{name: "store down on the last attempt: failed", attempt: 3, exists: true, objects: &fakeObjects{fail: down}, wantAnyErr: true,
			check: func(t *testing.T, st *fakeStore, _ *fakeObjects) {
				if st.released == nil || !*st.released {
					t.Errorf("released = %v, want given up", st.released)
				}
			}},
		{name: "taken over mid-way: stops quietly", exists: true, takeOverAt: 20,
			check: func(t *testing.T, st *fakeStore, _ *fakeObjects) {
				if st.finished || st.released != nil {
					t.Errorf("an overtaken attempt finished (%v) or released (%v) the export", st.finished, st.released)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := queued(CSV)
			if tc.status != "" {
				e.Status = tc.status
			}
			e.Attempt = tc.attempt
			st := &fakeStore{e: e, exists: tc.exists, rows: rowsOf(25), takeOverAt: tc.takeOverAt}
			objs := tc.objects
			if objs == nil {
				objs = &fakeObjects{}
			}
			payload := payloadOf(e)
			if tc.payload != nil {
				payload = tc.payload(e)
			}
			done := make(chan error, 1)
			go func() {
				done <- NewRunner(st, objs, "reports", 10, 4, slog.New(slog.DiscardHandler)).Run(context.Background(), "org-a", payload)
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run is stuck (an upload that stopped reading blocked the encoder?)")
			}
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("Run = %v, want %v", err, tc.wantErr)
				}
			case tc.wantAnyErr:
				if err == nil {
					t.Errorf("Run = nil, want an error")
				}
			case err != nil:
				t.Errorf("Run = %v, want nil", err)
			}
			if tc.check != nil {
				tc.check(t, st, objs)
			}
		})
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// decode reads an export file back as a consumer would.
func decode(t *testing.T, f Format, data []byte) []projection.Row {
	t.Helper()
	var out []projection.Row
	switch f {
	case CSV:
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || !slices.Equal(recs[0], CSVHeader) {
			t.Fatalf("csv header = %v", recs)
		}
		for _, r := range recs[1:] {
			var n int64
			fmt.Sscan(r[4], &n)
			out = append(out, projection.Row{Day: r[0], ServiceID: r[1], Channel: r[2], Status: r[3], Count: n})
		}
	case Parquet:
		rows, err := parquet.Read[FileRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, projection.Row{Day: DayOf(r.Day).Format(projection.DateLayout), ServiceID: r.ServiceID,
				Channel: r.Channel, Status: r.Status, Count: r.Count})
		}
	}
	return out
}
