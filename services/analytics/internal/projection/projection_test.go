package projection

import (
	"errors"
	"testing"
	"time"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		from, to string
		wantErr  bool
	}{
		{"2026-01-01", "2026-01-31", false},
		{"2026-01-01", "2026-01-01", false},
		{"2026-02-01", "2026-01-01", true},
		{"2026-13-01", "2026-12-31", true},
		{"", "2026-01-01", true},
		{"2026-01-01", "yesterday", true},
		{"2024-01-01", "2026-01-01", true},
	}
	for _, tc := range tests {
		_, err := ParseRange(tc.from, tc.to)
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ParseRange(%q, %q) = %v, want error %v wrapping ErrInvalid", tc.from, tc.to, err, tc.wantErr)
		}
	}
}

func TestChange(t *testing.T) {
	at := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
	s, d := Submitted("r1", "svc", "web", at)
	if len(d) != 1 || d[0].Status != StatusSubmitted || d[0].N != 1 || !d[0].Day.Equal(DayOf(at)) {
		t.Fatalf("Submitted deltas = %+v", d)
	}
	tests := []struct {
		name   string
		status string
		at     time.Time
		wantOK bool
	}{
		{"moves to a new status", "in_progress", at.Add(time.Minute), true},
		{"same status is a no-op", StatusSubmitted, at.Add(time.Minute), false},
		{"older change is ignored", "completed", at.Add(-time.Minute), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, deltas, ok := Change(s, tc.status, tc.at)
			if ok != tc.wantOK {
				t.Fatalf("Change ok = %v, want %v", ok, tc.wantOK)
			}
			if ok && (next.Status != tc.status || len(deltas) != 2 || deltas[0].N != -1 || deltas[0].Status != StatusSubmitted || deltas[1].Status != tc.status) {
				t.Errorf("Change = %+v %+v", next, deltas)
			}
		})
	}
}

func TestNewReportTotals(t *testing.T) {
	r, _ := ParseRange("2026-01-01", "2026-01-02")
	rep := NewReport(r, []Row{
		{Day: "2026-01-02", ServiceID: "a", Channel: "web", Status: "submitted", Count: 2},
		{Day: "2026-01-01", ServiceID: "b", Channel: "app", Status: "completed", Count: 3},
	})
	if rep.Totals.Requests != 5 || rep.Totals.ByStatus["completed"] != 3 || rep.Totals.ByService["a"] != 2 || rep.Rows[0].Day != "2026-01-01" {
		t.Errorf("report = %+v", rep)
	}
}
