package fabric_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var testEnv = fabrictest.EnvFrom(os.Getenv)

const testQueue = "test.request-submitted"

// stack is one isolated fabric for a test: its own vhost, a test consumer
// queue with short retry tiers, and a publisher.
type stack struct {
	*fabrictest.Fabric
	spec topology.Consumer
}

func newStack(t *testing.T, tiers ...time.Duration) *stack { return newStackB(t, tiers...) }

func newStackB(t testing.TB, tiers ...time.Duration) *stack {
	t.Helper()
	if len(tiers) == 0 {
		tiers = []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}
	}
	var rt []topology.Duration
	for _, d := range tiers {
		rt = append(rt, topology.Duration(d))
	}
	spec := topology.Consumer{Queue: testQueue, Service: "test", RetryTiers: rt,
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}
	desc := topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}}
	return &stack{Fabric: fabrictest.NewFabric(t, testEnv, desc), spec: spec}
}

func submitted(t testing.TB, tenantID, marker string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", tenantID, "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": marker, "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z",
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// run starts a consumer on the stack's queue and stops it at cleanup.
func (s *stack) run(t *testing.T, h fabric.Handler, opts fabric.ConsumerOptions) {
	t.Helper()
	s.Run(t, s.spec, h, opts)
}

// waitConfirmed waits for every publish of pend to be confirmed.
func waitConfirmed(t testing.TB, pend []*broker.Pending) {
	t.Helper()
	for _, p := range pend {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// dlq reads (and acks) every message in the stack queue's DLQ.
func (s *stack) dlq(t *testing.T) []amqp.Delivery { return s.Drain(t, s.spec.DLQ()) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// jsonRaw lets a raw payload be passed where envelope.New marshals a value.
func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }
