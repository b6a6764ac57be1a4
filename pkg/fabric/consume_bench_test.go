package fabric_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// fillQueue puts n distinct 1 KiB envelopes on the stack's queue, as the
// fabric publishes them, and waits until the broker holds them all, so a
// consumer benchmark times the consuming alone.
func fillQueue(b *testing.B, s *stack, n int) {
	b.Helper()
	e := kibEnvelope(b)
	ctx := context.Background()
	pend := make([]*broker.Pending, 0, n)
	for range n {
		id, _ := envelope.New(e.Type, e.TenantID, e.Producer, struct{}{})
		e.ID = id.ID
		m, err := broker.EnvelopeMessage(s.Reg, e)
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.Pub.Send(ctx, m)
		if err != nil {
			b.Fatal(err)
		}
		pend = append(pend, p)
	}
	waitConfirmed(b, pend)
	if d := s.Depth(b, testQueue); d != n {
		b.Fatalf("queue holds %d messages, want %d", d, n)
	}
}

// BenchmarkConsumeFabric drains a queue of 1 KiB envelopes through the
// fabric's consumer with a handler that does nothing: the envelope decoded
// and checked against its type's reader schema, the tenant header checked,
// metrics recorded, each message acked. Defaults otherwise (prefetch 32,
// four handlers at once).
func BenchmarkConsumeFabric(b *testing.B) {
	s := newStackB(b)
	fillQueue(b, s, b.N)
	mp, _, err := telemetry.Prometheus()
	if err != nil {
		b.Fatal(err)
	}
	metrics, err := telemetry.NewMetrics(mp)
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	done := make(chan struct{})
	h := func(context.Context, envelope.Envelope) error {
		if handled.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	}
	b.ResetTimer()
	start := time.Now()
	s.Run(b, s.spec, h, fabric.ConsumerOptions{Metrics: metrics})
	waitBench(b, done, &handled)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkConsumeRaw is the baseline: amqp091-go alone, the same queue
// and prefetch, each delivery acked as it comes, nothing read.
func BenchmarkConsumeRaw(b *testing.B) {
	s := newStackB(b)
	fillQueue(b, s, b.N)
	ctx := context.Background()
	ch, err := s.Conn.Channel(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Qos(32, 0, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	ds, err := ch.Consume(testQueue, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	done := make(chan struct{})
	go func() {
		for d := range ds {
			if err := d.Ack(false); err != nil {
				return
			}
			if handled.Add(1) == int64(b.N) {
				close(done)
				return
			}
		}
	}()
	waitBench(b, done, &handled)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// waitBench waits until done closes, failing the benchmark when the
// consumer stops making progress for 30 s.
func waitBench(b *testing.B, done <-chan struct{}, handled *atomic.Int64) {
	b.Helper()
	last, at := handled.Load(), time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if n := handled.Load(); n != last {
				last, at = n, time.Now()
			} else if time.Since(at) > 30*time.Second {
				b.Fatalf("stuck at %d of %d messages for 30 s", n, b.N)
			}
		}
	}
}

// BenchmarkAdmitCPU is the consumer's work on one delivery before its
// handler, without a broker: the 1 KiB envelope decoded and checked against
// its type's reader schema. It is most of what BenchmarkConsumeFabric spends
// beyond BenchmarkConsumeRaw.
func BenchmarkAdmitCPU(b *testing.B) {
	reg, err := registry.Default()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := kibEnvelope(b).Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		e, err := envelope.Decode(raw, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := reg.CheckIncoming(e); err != nil {
			b.Fatal(err)
		}
	}
}
