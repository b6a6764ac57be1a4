package fabric_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestShutdownRightAfterABurstOfAcksLosesNone stops a consumer while it
// acks a burst of deliveries (batches of 1,000 out of a 2,000 prefetch) and
// checks that no acked message comes back once the queue has let go of
// the consumer. A quorum queue's channel holds acks back while 32 or more
// of its commands await the queue, and drops them when it closes
// (rabbitmq-server#10327); without the consumer's pause before closing,
// tens of messages come back in most runs, and a basic.qos round trip in
// its place does not help (the channel answers it at once).
func TestShutdownRightAfterABurstOfAcksLosesNone(t *testing.T) {
	s := newStack(t)
	const n = 5000
	pend := make([]*broker.Pending, 0, n)
	for range n {
		p, err := s.Pub.PublishAsync(context.Background(), submitted(t, "org-a", "ok"))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	for _, p := range pend {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int32
	c, err := broker.NewConsumer(s.Conn, s.Pub, s.Reg, s.spec, func(_ context.Context, b []fabric.Received) []error {
		acked.Add(int32(len(b)))
		cancel() // stop while the prefetched deliveries are handled and acked
		return make([]error, len(b))
	}, fabric.ConsumerOptions{Prefetch: 2000, MaxBatch: 1000, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	// A quorum queue counts a consumer, cancelled or not, until every
	// delivery it holds is settled, or returned when its channel goes: with
	// the count at 0 the depth is final.
	ch, err := s.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var depth int
	fabrictest.Eventually(t, 10*time.Second, "the queue letting go of the consumer", func() bool {
		q, err := ch.QueueDeclarePassive(testQueue, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		depth = q.Messages
		return q.Consumers == 0
	})
	if back := depth - (n - int(acked.Load())); back != 0 {
		t.Fatalf("%d of %d acked messages are back in the queue: acks were lost when the channel closed", back, acked.Load())
	}
}
