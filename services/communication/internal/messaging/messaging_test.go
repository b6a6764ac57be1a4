package messaging

import (
	"testing"
	"time"
)

func TestHeldPollInterval(t *testing.T) {
	tests := []struct {
		name             string
		interval, window time.Duration
		want             time.Duration
	}{
		{"coalescing off: the configured interval", 30 * time.Second, 0, 30 * time.Second},
		{"a quarter window", 30 * time.Second, 3 * time.Second, 750 * time.Millisecond},
		{"never below 50 ms", 30 * time.Second, 100 * time.Millisecond, 50 * time.Millisecond},
		{"never above the configured interval", 100 * time.Millisecond, 3 * time.Second, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := heldPollInterval(tc.interval, tc.window); got != tc.want {
			t.Errorf("%s: heldPollInterval(%v, %v) = %v, want %v", tc.name, tc.interval, tc.window, got, tc.want)
		}
	}
}

// TestDueAlarmRingsOncePerSlotAtTheDueTime: notices held until the same
// time wake the dispatcher once, not before their due time (plus the
// commit slack) and within a grid step of it; a notice due later rings
// again. Without the per-slot timer each notice would wake it.
func TestDueAlarmRingsOncePerSlotAtTheDueTime(t *testing.T) {
	const grid = 200 * time.Millisecond
	wake := make(chan struct{}, 100)
	a := newDueAlarm(grid, wake)
	await := func(earliest time.Time) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(5 * time.Second):
			t.Fatal("the alarm did not ring")
		}
		now := time.Now()
		if now.Before(earliest) {
			t.Fatalf("rang %v before the due time plus the commit slack", earliest.Sub(now))
		}
		if late := now.Sub(earliest); late > grid+100*time.Millisecond {
			t.Errorf("rang %v after the due time plus the commit slack, want within a grid step (%v)", late, grid)
		}
	}

	first := time.Now().Add(300 * time.Millisecond)
	for range 50 {
		a.ring(first)
	}
	await(first.Add(heldCommitSlack))
	// A notice due three steps later rings next: had the fifty rung
	// fifty times, the next wake-up would come before it.
	second := time.Now().Add(3 * grid)
	a.ring(second)
	await(second.Add(heldCommitSlack))
}
