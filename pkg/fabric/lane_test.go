package fabric_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// laneRig is a consumer with a priority lane (or, without, one queue bound
// to both types), a backlog of low-priority request.submitted.v1 whose
// handler takes a millisecond each, and workflow.stuck.v1 as the urgent
// type.
type laneRig struct {
	f         *fabrictest.Fabric
	spec      topology.Consumer
	lane      topology.Consumer
	hasLane   bool
	lowLeft   atomic.Int64
	urgentAt  chan time.Time
	lowOnHigh atomic.Int64 // low messages still waiting when the urgent one was handled
}

func newLaneRig(t testing.TB, withLane bool, backlog int) *laneRig {
	ev := func(keys ...string) []topology.Binding {
		var b []topology.Binding
		for _, k := range keys {
			b = append(b, topology.Binding{Exchange: topology.EventsExchange, Key: k})
		}
		return b
	}
	spec := topology.Consumer{Queue: "test.lanes", Service: "test", Bindings: ev("request.submitted.v1", "workflow.stuck.v1")}
	if withLane {
		spec.Bindings, spec.Priority = ev("request.submitted.v1"), ev("workflow.stuck.v1")
	}
	desc := topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}}.WithLanes()
	r := &laneRig{f: fabrictest.NewFabric(t, testEnv, desc), spec: spec, urgentAt: make(chan time.Time, 1)}
	r.lane, r.hasLane = desc.Consumer(spec.Queue + ".priority")
	ctx := context.Background()
	var pend []*broker.Pending
	for i := range backlog {
		p, err := r.f.Pub.PublishAsync(ctx, submitted(t, "org-a", "low-"+string(rune('a'+i%26))))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	waitConfirmed(t, pend)
	r.lowLeft.Store(int64(backlog))
	h := func(ctx context.Context, e envelope.Envelope) error {
		if e.Type == "workflow.stuck.v1" {
			r.lowOnHigh.Store(r.lowLeft.Load())
			r.urgentAt <- time.Now()
			return nil
		}
		time.Sleep(time.Millisecond) // a write, say
		r.lowLeft.Add(-1)
		return nil
	}
	r.f.Run(t, spec, h, fabric.ConsumerOptions{Prefetch: 32, Concurrency: 4})
	if withLane {
		r.f.Run(t, r.lane, h, fabric.ConsumerOptions{Prefetch: 8, Concurrency: 1})
	}
	return r
}

// urgent publishes one workflow.stuck.v1 and returns how long until its
// handler ran.
func (r *laneRig) urgent(t testing.TB) time.Duration {
	e, err := envelope.New("workflow.stuck.v1", "org-a", "test", map[string]any{
		"processId": "0192d3a0-0000-7000-8000-000000000001", "definitionId": "d", "taskId": "0192d3a0-0000-7000-8000-000000000002",
		"step": "triage", "waitingSince": "2026-12-01T10:00:00Z", "stuckAfterSeconds": 60})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r.f.Pub.Publish(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-r.urgentAt:
		return at.Sub(start)
	case <-time.After(2 * time.Minute):
		t.Fatal("the urgent message was never handled")
		return 0
	}
}

// TestPriorityLaneOvertakesTheBacklog: with a lane, the urgent message is
// handled while most of a 2,000-message backlog still waits.
func TestPriorityLaneOvertakesTheBacklog(t *testing.T) {
	r := newLaneRig(t, true, 2000)
	fabrictest.Eventually(t, 10*time.Second, "the backlog being worked", func() bool { return r.lowLeft.Load() < 1990 })
	r.urgent(t)
	if left := r.lowOnHigh.Load(); left < 1000 {
		t.Errorf("the urgent message was handled with %d low ones left, want it ahead of most of the backlog", left)
	}
}

// BenchmarkPriorityLane: a backlog of 10,000 low-priority messages (1 ms
// of work each, 4 handlers), then one urgent message: how long until it is
// handled, in its own lane and in one shared queue. Goal: within 1 s with
// the lane.
func BenchmarkPriorityLane(b *testing.B) {
	for _, withLane := range []bool{true, false} {
		name := "lane"
		if !withLane {
			name = "one-queue"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				r := newLaneRig(b, withLane, 10_000)
				fabrictest.Eventually(b, 10*time.Second, "the backlog being worked", func() bool { return r.lowLeft.Load() < 9_900 })
				d := r.urgent(b)
				b.ReportMetric(float64(d.Microseconds())/1000, "urgent_ms")
				b.ReportMetric(float64(r.lowOnHigh.Load()), "low_left")
			}
		})
	}
}
