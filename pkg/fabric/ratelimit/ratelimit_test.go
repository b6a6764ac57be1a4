package ratelimit_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var env = fabrictest.EnvFrom(os.Getenv)

// TestSharedBucketHoldsAcrossInstances: three instances drawing from one
// bucket of 20/s (burst 5) for 1.5 s get together what one would, give or
// take the chunks each holds.
func TestSharedBucketHoldsAcrossInstances(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	const perSecond, burst = 20.0, 5
	var taken atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		b, err := ratelimit.NewShared(s.Pool, s.Name, "enrichment", perSecond, burst)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b.Wait(ctx) == nil {
				taken.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	// Each instance may hold one lease (2 tokens) it has not used.
	ceiling := burst + perSecond*elapsed + 3*2
	if got := float64(taken.Load()); got > ceiling || got < perSecond*elapsed/2 {
		t.Fatalf("%v tokens in %.2f s across 3 instances, want at most %.0f (and not stalled)", got, elapsed, ceiling)
	}
}

// TestPacedConsumerWaitsAndDropsNothing: two competing consumers sharing
// a 25/s bucket handle 60 messages at that pace, every one of them, none
// dead-lettered.
func TestPacedConsumerWaitsAndDropsNothing(t *testing.T) {
	spec := topology.Consumer{Queue: "test.paced", Service: "test",
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	const n, perSecond, burst = 60, 25.0, 5
	var mu sync.Mutex
	var handled []time.Time
	seen := map[string]bool{}
	h := func(ctx context.Context, e envelope.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, time.Now())
		seen[e.ID] = true
		return nil
	}
	for range 2 {
		b, err := ratelimit.NewShared(s.Pool, s.Name, "test.paced", perSecond, burst)
		if err != nil {
			t.Fatal(err)
		}
		f.Run(t, spec, h, fabric.ConsumerOptions{Prefetch: 10, Concurrency: 4, Pace: b})
	}
	ctx := context.Background()
	for i := range n {
		e, err := envelope.New("request.submitted.v1", "org-a", "test", map[string]any{
			"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001", "serviceId": "svc", "formId": "f1",
			"formVersion": 1, "channel": "web", "citizenId": "cpf-123.456.789-00", "submittedAt": "2026-11-30T10:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Pub.Publish(ctx, e); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	fabrictest.Eventually(t, 20*time.Second, "every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	mu.Lock()
	first, last := handled[0], handled[len(handled)-1]
	mu.Unlock()
	// The first burst goes at once; the rest at the bucket's rate.
	if min := time.Duration(float64(n-burst-2*2) / perSecond * float64(time.Second)); last.Sub(first) < min {
		t.Errorf("60 messages handled in %v, want at least %v at 25/s", last.Sub(first), min)
	}
	if d := f.Depth(t, spec.DLQ()); d != 0 {
		t.Errorf("%d messages dead-lettered, want none", d)
	}
}

func TestSharedRefusesABadBucket(t *testing.T) {
	if _, err := ratelimit.NewShared(nil, "s", "x", 0, 1); err == nil {
		t.Error("a bucket of rate 0 was accepted")
	}
	if _, err := ratelimit.NewShared(nil, "s", "", 1, 1); err == nil {
		t.Error("a bucket without a name was accepted")
	}
}

func TestLocalWaitEndsWithItsContext(t *testing.T) {
	l := ratelimit.NewLocal(0.001, 1)
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err) // the burst
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx); err == nil {
		t.Errorf("Wait with a cancelled context = %v", err)
	}
}

// TestPerKeyRefusesOverTheRateAndOnlyThatKey: a key that spent its burst
// is refused with a wait, another key is not, and an overridden key has
// its own rate.
func TestPerKeyRefusesOverTheRateAndOnlyThatKey(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	p, err := ratelimit.NewPerKey(s.Pool, s.Name, "submit:", 1, 3, map[string]float64{"org-big": 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allowed := func(key string, n int) (int, time.Duration) {
		got, wait := 0, time.Duration(0)
		for range n {
			ok, w, err := p.Allow(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				got++
			} else {
				wait = w
			}
		}
		return got, wait
	}
	if got, wait := allowed("org-a", 10); got != 3 || wait <= 0 || wait > time.Second {
		t.Errorf("org-a: %d of 10 allowed (wait %v), want its burst of 3 and a wait under a second", got, wait)
	}
	if got, _ := allowed("org-b", 2); got != 2 {
		t.Errorf("org-b allowed %d of 2 while org-a was refused", got)
	}
	if got, _ := allowed("org-big", 40); got < 30 || got > 32 {
		t.Errorf("org-big (10/s, burst 30) allowed %d of 40", got)
	}
}
