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
// sweep that handled something. Its interval never stretches: callers that
// bound a latency with it (a coalescing window's flush at a quarter of the
// window, SLA timers) keep that bound. RunIdle stretches it while idle.
func Run(ctx context.Context, interval time.Duration, batch int, sweep Func, onError func(error), onSwept func(int)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		round(ctx, batch, sweep, onError, onSwept)
	}
}

// RunIdle is Run for work that may wait longer while nothing happens: after
// each round that handled nothing the wait doubles, from interval up to
// maxInterval, and a round that handled something, failed, or a signal on
// wake (the caller's notification that work was just added) brings it back
// to interval; wake also starts a round at once. An idle service's sweeps
// then cost a query every maxInterval instead of every interval.
func RunIdle(ctx context.Context, interval, maxInterval time.Duration, wake <-chan struct{}, batch int, sweep Func, onError func(error), onSwept func(int)) {
	maxInterval = max(maxInterval, interval)
	wait := interval
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
			wait = interval
		case <-t.C:
		}
		t.Stop()
		handled, failed := round(ctx, batch, sweep, onError, onSwept)
		if handled || failed {
			wait = interval
		} else {
			wait = min(wait*2, maxInterval)
		}
	}
}

// round sweeps until a batch comes back short or fails: a backlog drains
// without waiting for ticks.
func round(ctx context.Context, batch int, sweep Func, onError func(error), onSwept func(int)) (handled, failed bool) {
	for ctx.Err() == nil {
		n, err := sweep(ctx, batch)
		if err != nil {
			if ctx.Err() == nil && onError != nil {
				onError(err)
			}
			return handled, true
		}
		if n > 0 {
			handled = true
			if onSwept != nil {
				onSwept(n)
			}
		}
		if n < batch {
			return handled, false
		}
	}
	return handled, false
}
