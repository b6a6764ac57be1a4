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
