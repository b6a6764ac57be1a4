package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBatcher(t *testing.T) {
	failing := errors.New("store down")
	tests := []struct {
		name      string
		size      int
		age       time.Duration
		items     []string
		flushErr  error
		wantSizes []int
	}{
		{"flushes by size", 3, time.Hour, []string{"a", "b", "c", "d", "e", "f"}, nil, []int{3, 3}},
		{"flushes by age", 100, 50 * time.Millisecond, []string{"a", "b"}, nil, []int{2}},
		{"same key written once", 100, 50 * time.Millisecond, []string{"a", "a", "b"}, nil, []int{2}},
		{"failure reaches every caller", 2, time.Hour, []string{"a", "b"}, failing, []int{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sizes []int
			b := New(tc.size, tc.age, time.Second, func(_ context.Context, items []string) error {
				mu.Lock()
				sizes = append(sizes, len(items))
				mu.Unlock()
				return tc.flushErr
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { b.Run(ctx); close(done) }()
			var wg sync.WaitGroup
			errs := make([]error, len(tc.items))
			for i, it := range tc.items {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = b.Add(context.Background(), it, it)
				}()
			}
			wg.Wait()
			cancel()
			<-done
			for i, err := range errs {
				if !errors.Is(err, tc.flushErr) && err != tc.flushErr {
					t.Errorf("Add(%q) = %v, want %v", tc.items[i], err, tc.flushErr)
				}
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tc.wantSizes) {
				t.Errorf("batch sizes = %v, want %v", sizes, tc.wantSizes)
			}
		})
	}
}

// TestAddAfterStop: a handler still finishing its delivery after the
// batcher stopped gets its item written on its own, and the outcome.
func TestAddAfterStop(t *testing.T) {
	failing := errors.New("store down")
	var flushed [][]int
	b := New(10, time.Hour, time.Second, func(_ context.Context, items []int) error {
		flushed = append(flushed, items)
		if items[0] == 2 {
			return failing
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx)
	if err := b.Add(context.Background(), "k", 1); err != nil {
		t.Errorf("Add after stop = %v, want nil (written alone)", err)
	}
	if err := b.Add(context.Background(), "l", 2); !errors.Is(err, failing) {
		t.Errorf("Add after stop = %v, want the flush's error", err)
	}
	if fmt.Sprint(flushed) != "[[1] [2]]" {
		t.Errorf("flushed %v, want [[1] [2]]", flushed)
	}
}
