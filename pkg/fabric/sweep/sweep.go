// Package sweep runs a periodic sweep: a function that handles up to a
// batch of due work (timers, held messages, open windows) and says how
// much it handled. A full batch is followed at once by another, so a
// backlog drains without waiting for ticks; an error waits for the next
// tick, which retries.
package sweep

import (
	"context"
	"time"
)

// Func handles up to limit due items and returns how many it handled.
type Func func(ctx context.Context, limit int) (int, error)

// Run calls sweep every interval until ctx ends. onError, if set, hears
// every failure (not the ones ctx's end causes); onSwept, if set, every
// sweep that handled something.
func Run(ctx context.Context, interval time.Duration, batch int, sweep Func, onError func(error), onSwept func(int)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := sweep(ctx, batch)
			if err != nil {
				if ctx.Err() == nil && onError != nil {
					onError(err)
				}
				break
			}
			if n > 0 && onSwept != nil {
				onSwept(n)
			}
			if n < batch {
				break
			}
		}
	}
}
