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
