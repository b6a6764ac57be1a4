package progress

import (
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		after       time.Duration
		done, total int
		want        string
	}{
		{0, 0, 500, "0/500 letters"},
		{3 * time.Second, 0, 500, "0/500 letters"},
		{3 * time.Second, 120, 500, "120/500 letters, 40/s, ETA 9.5s"},
		{10 * time.Second, 100, 1000, "100/1000 letters, 10/s, ETA 1m30s"},
		{12500 * time.Millisecond, 500, 500, "500/500 letters, 40/s, done in 13s"},
		{2 * time.Second, 0, 0, "0/0 letters"},
	}
	for _, tc := range tests {
		now := t0
		m := Start("letters", func() time.Time { return now })
		now = t0.Add(tc.after)
		if got := m.Line(tc.done, tc.total); got != tc.want {
			t.Errorf("after %v, %d/%d: %q, want %q", tc.after, tc.done, tc.total, got, tc.want)
		}
	}
}
