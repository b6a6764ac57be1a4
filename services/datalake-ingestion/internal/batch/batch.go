// Package batch gathers items from many concurrent callers into batches
// flushed by size or age, and tells every caller how its batch ended.
//
// It exists because the fabric acks a message when its handler returns:
// a handler that calls Add blocks until the batch holding its message is
// durably written (nil: ack) or failed (error: retry), so many handlers
// wait at once and the consumer's prefetch and concurrency must be at
// least the batch size.
package batch

import (
	"context"
	"time"
)

// FlushFunc writes one batch. An error fails every item in it.
type FlushFunc[T any] func(ctx context.Context, items []T) error

type pending[T any] struct {
	key  string
	item T
	done chan error
}

// Batcher batches items of type T. Items with the same key in one batch
// are written once and share the outcome (a redelivery racing the first
// delivery).
type Batcher[T any] struct {
	size    int
	age     time.Duration
	timeout time.Duration
	flush   FlushFunc[T]
	in      chan pending[T]
	stop    chan struct{}
}

// New returns a Batcher flushing when size items are waiting or the oldest
// has waited age; flushTimeout bounds each flush. Call Run.
func New[T any](size int, age, flushTimeout time.Duration, flush FlushFunc[T]) *Batcher[T] {
	return &Batcher[T]{size: max(size, 1), age: age, timeout: flushTimeout, flush: flush,
		in: make(chan pending[T]), stop: make(chan struct{})}
}

// Add hands item over and waits for its batch: nil once it is written, the
// flush error if it failed, or ctx's error if the caller gave up first (the
// item may still be written later).
//
// Once Run has returned, Add writes item as a batch of its own. Run stops
// when its worker's context ends, which is when the consumers are told to
// stop; their handlers still finish the deliveries they hold, and each of
// those must be written (or fail) like any other, never refused because
// the batcher went first.
func (b *Batcher[T]) Add(ctx context.Context, key string, item T) error {
	p := pending[T]{key: key, item: item, done: make(chan error, 1)}
	select {
	case b.in <- p:
	case <-b.stop:
		fctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		return b.flush(fctx, []T{item})
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run collects and flushes batches until ctx ends, then flushes what it
// holds and returns.
func (b *Batcher[T]) Run(ctx context.Context) {
	defer close(b.stop)
	var (
		items   []T
		waiters = map[string][]chan error{}
		timer   *time.Timer
		timeout <-chan time.Time
	)
	flush := func() {
		if timer != nil {
			timer.Stop()
			timer, timeout = nil, nil
		}
		if len(items) == 0 {
			return
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
		err := b.flush(fctx, items)
		cancel()
		for _, ws := range waiters {
			for _, w := range ws {
				w <- err
			}
		}
		items, waiters = nil, map[string][]chan error{}
	}
	for {
		select {
		case p := <-b.in:
			if ws, dup := waiters[p.key]; dup {
				waiters[p.key] = append(ws, p.done)
				continue
			}
			waiters[p.key] = []chan error{p.done}
			items = append(items, p.item)
			if timer == nil {
				timer = time.NewTimer(b.age)
				timeout = timer.C
			}
			if len(items) >= b.size {
				flush()
			}
		case <-timeout:
			timer, timeout = nil, nil
			flush()
		case <-ctx.Done():
			flush()
			return
		}
	}
}
