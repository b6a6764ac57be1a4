package process

import (
	"testing"
	"time"
)

func TestIdleWait(t *testing.T) {
	tests := []struct {
		interval, want time.Duration
	}{
		{100 * time.Millisecond, time.Second},
		{time.Second, 10 * time.Second},
		{10 * time.Second, 15 * time.Second},
		{30 * time.Second, 30 * time.Second},
		{time.Hour, time.Hour},
	}
	for _, tc := range tests {
		if got := idleWait(tc.interval); got != tc.want {
			t.Errorf("idleWait(%v) = %v, want %v", tc.interval, got, tc.want)
		}
	}
}
