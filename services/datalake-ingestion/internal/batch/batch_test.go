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
			b := New(tc.size, tc.age, func(_ context.Context, items []string) error {
				mu.Lock()
				sizes = append(sizes, len(items))
				mu.Unlock()
				return tc.flushErr
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { b.Run(ctx, time.Second); close(done) }()
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

func TestAddAfterStop(t *testing.T) {
	b := New(10, time.Hour, func(context.Context, []int) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx, time.Second)
	if err := b.Add(context.Background(), "k", 1); !errors.Is(err, ErrStopped) {
		t.Errorf("Add after stop = %v, want ErrStopped", err)
	}
}
