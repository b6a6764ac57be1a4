package sweep_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/sweep"
)

// TestRunDrainsABacklogAndRetriesAfterErrors: full batches are followed
// at once by another sweep; an error waits for the next tick.
func TestRunDrainsABacklogAndRetriesAfterErrors(t *testing.T) {
	var left atomic.Int64
	left.Store(25)
	var calls, failures atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweep.Run(ctx, 10*time.Millisecond, 10, func(ctx context.Context, limit int) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errors.New("the database blinked")
			}
			n := min(int64(limit), left.Load())
			left.Add(-n)
			if left.Load() == 0 {
				cancel()
			}
			return int(n), nil
		}, func(error) { failures.Add(1) }, nil)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the backlog was not drained")
	}
	if failures.Load() != 1 || calls.Load() != 4 { // the failure, then 10 + 10 + 5 in one tick
		t.Errorf("%d calls, %d failures; want 4 calls (the failure, then three batches at once) and 1 failure", calls.Load(), failures.Load())
	}
}

// TestRunIdleBacksOffAndComesBack: idle rounds wait twice as long each
// time up to the cap; work found, a failure or a wake brings the wait back
// to the interval.
func TestRunIdleBacksOffAndComesBack(t *testing.T) {
	const interval, cap = 20 * time.Millisecond, 160 * time.Millisecond
	tests := []struct {
		name string
		// results of the rounds in order: n handled (-1: an error)
		results []int
		// wantGaps are the waits before each round after the first, in
		// intervals, within the timer's slack
		wantGaps []int
	}{
		{"idle doubles up to the cap", []int{0, 0, 0, 0, 0, 0}, []int{2, 4, 8, 8, 8}},
		{"work resets", []int{0, 0, 1, 0, 0}, []int{2, 4, 1, 2}},
		{"an error resets", []int{0, 0, -1, 0}, []int{2, 4, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var at []time.Time
			done := make(chan struct{})
			go func() {
				defer close(done)
				sweep.RunIdle(ctx, interval, cap, nil, 10, func(context.Context, int) (int, error) {
					at = append(at, time.Now())
					n := tc.results[len(at)-1]
					if len(at) == len(tc.results) {
						cancel()
					}
					if n < 0 {
						return 0, errors.New("the database blinked")
					}
					return n, nil
				}, nil, nil)
			}()
			<-done
			for i, want := range tc.wantGaps {
				got := at[i+1].Sub(at[i])
				lo := time.Duration(want) * interval
				if got < lo || got > lo+interval*3/2+50*time.Millisecond {
					t.Errorf("wait before round %d: %v, want about %v", i+2, got, lo)
				}
			}
		})
	}
}

// TestRunIdleWakes: a wake starts a round at once, however long the
// idle wait has grown.
func TestRunIdleWakes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{}, 1)
	rounds := make(chan time.Time, 10)
	go sweep.RunIdle(ctx, 10*time.Millisecond, time.Hour, wake, 10, func(context.Context, int) (int, error) {
		rounds <- time.Now()
		return 0, nil
	}, nil, nil)
	for range 5 { // the idle wait is now 320 ms and growing
		<-rounds
	}
	sent := time.Now()
	wake <- struct{}{}
	select {
	case got := <-rounds:
		if d := got.Sub(sent); d > 100*time.Millisecond {
			t.Errorf("a round %v after the wake, want at once", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no round after the wake")
	}
}
