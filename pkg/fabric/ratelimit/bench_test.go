package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// BenchmarkPacedConsumerOverhead measures what pacing costs a consumer
// that is not held back: 10,000 pre-published messages, a handler that
// does nothing, prefetch 100 and 4 handlers, without a pacer, with a
// local one and with a shared one (a Postgres bucket), each limit far
// above the consumer's speed. Compare the msg/s (goal: paced ≥ 0.95×
// unpaced).
func BenchmarkPacedConsumerOverhead(b *testing.B) {
	const n = 10_000
	spec := topology.Consumer{Queue: "bench.paced", Service: "bench",
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}
	for _, mode := range []string{"none", "local", "shared"} {
		b.Run("pace="+mode, func(b *testing.B) {
			for range b.N {
				f := fabrictest.NewFabric(b, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
				ctx := context.Background()
				var pend []*broker.Pending
				for i := range n {
					e, err := envelope.New("request.submitted.v1", "org-a", "bench", map[string]any{
						"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": fmt.Sprintf("AGR-2026-%06d", i), "serviceId": "svc",
						"formId": "f1", "formVersion": 1, "channel": "web", "citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
					if err != nil {
						b.Fatal(err)
					}
					p, err := f.Pub.PublishAsync(ctx, e)
					if err != nil {
						b.Fatal(err)
					}
					pend = append(pend, p)
				}
				for _, p := range pend {
					if err := p.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				opts := fabric.ConsumerOptions{Prefetch: 100, Concurrency: 4}
				switch mode {
				case "local":
					opts.Pace = ratelimit.NewLocal(1e6, 1000)
				case "shared":
					s := fabrictest.NewSchema(b, env)
					sh, err := ratelimit.NewShared(s.Pool, s.Name, "bench", 1e5, 1000)
					if err != nil {
						b.Fatal(err)
					}
					opts.Pace = sh
				}
				var done atomic.Int64
				finished := make(chan struct{})
				h := func(context.Context, envelope.Envelope) error {
					if done.Add(1) == n {
						close(finished)
					}
					return nil
				}
				start := time.Now()
				stop := f.Run(b, spec, h, opts)
				<-finished
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msg/s")
				stop()
			}
		})
	}
}
