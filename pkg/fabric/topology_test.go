package fabric_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

func TestTopologyApplyIsIdempotentAndDeclaresEverything(t *testing.T) {
	vh := fabrictest.NewVhost(t, testEnv)
	conn := vh.Dial(t)
	ctx := context.Background()
	c, err := conn.Connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	desc := topology.Platform()
	for i := 0; i < 2; i++ {
		if err := topology.Apply(ctx, c, desc); err != nil {
			t.Fatalf("Apply #%d: %v", i+1, err)
		}
	}
	qs := vh.Queues(t)
	for _, cons := range desc.Consumers {
		main, ok := qs[cons.Queue]
		if !ok || main.Type != "quorum" || !main.Durable {
			t.Errorf("queue %s = %+v, want durable quorum", cons.Queue, main)
		}
		if main.Arguments["x-dead-letter-exchange"] != topology.DeadLetterExchange || main.Arguments["x-dead-letter-routing-key"] != cons.Queue {
			t.Errorf("queue %s DLX args = %v", cons.Queue, main.Arguments)
		}
		if main.Arguments["x-delivery-limit"] == nil {
			t.Errorf("queue %s has no explicit x-delivery-limit", cons.Queue)
		}
		// The platform's tiers as docs/architecture.md states them, not as
		// the code under test computes them: 30 s, 5 min, 30 min, then the DLQ.
		for n, wantMS := range []int64{30_000, 300_000, 1_800_000} {
			r, ok := qs[cons.RetryQueue(n+1)]
			if !ok {
				t.Errorf("missing retry queue %s", cons.RetryQueue(n+1))
				continue
			}
			if ttl, _ := r.Arguments["x-message-ttl"].(float64); int64(ttl) != wantMS {
				t.Errorf("%s ttl = %v, want %d", r.Name, r.Arguments["x-message-ttl"], wantMS)
			}
			if r.Arguments["x-dead-letter-exchange"] != "" || r.Arguments["x-dead-letter-routing-key"] != cons.Queue {
				t.Errorf("%s must dead-letter to %s alone through the default exchange, args %v", r.Name, cons.Queue, r.Arguments)
			}
		}
		if _, extra := qs[cons.RetryQueue(4)]; extra {
			t.Errorf("%s has a fourth retry tier; the platform has three", cons.Queue)
		}
		if _, ok := qs[cons.DLQ()]; !ok {
			t.Errorf("missing DLQ %s", cons.DLQ())
		}
	}
	if len(qs) != len(desc.Consumers)*5 {
		t.Errorf("vhost has %d queues, want %d (main + 3 tiers + dlq each)", len(qs), len(desc.Consumers)*5)
	}

	// A conflicting redeclaration names the argument that differs.
	changed := topology.Platform()
	changed.Consumers[0].RetryTiers = []topology.Duration{topology.Duration(7 * time.Second)}
	err = topology.Apply(ctx, c, changed)
	var conflict *topology.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("Apply(conflicting) = %v, want *ConflictError", err)
	}
	if conflict.Argument != "x-message-ttl" || conflict.Name != changed.Consumers[0].RetryQueue(1) {
		t.Errorf("conflict = %+v, want x-message-ttl on %s", conflict, changed.Consumers[0].RetryQueue(1))
	}
	if !strings.Contains(err.Error(), "x-message-ttl") {
		t.Errorf("error %q does not name the argument", err)
	}
}

func TestTopologyFromYAML(t *testing.T) {
	d, err := topology.Load([]byte(`
consumers:
  - queue: billing.request-submitted
    service: billing
    retryTiers: [1s, 5s, 25s]
    bindings:
      - {exchange: platform.events, key: request.submitted.v1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Exchanges) != 4 || d.Consumers[0].Tiers()[2] != 25*time.Second {
		t.Fatalf("Load = %+v", d)
	}
	for _, bad := range []string{
		"consumers:\n  - queue: Bad Name\n    bindings: [{exchange: platform.events, key: a}]\n",
		"consumers:\n  - queue: a.b\n    bindings: [{exchange: nowhere, key: a}]\n",
		"consumers:\n  - queue: a.b\n",
		"consumers:\n  - queue: a.b\n    colour: red\n",
	} {
		if _, err := topology.Load([]byte(bad)); err == nil {
			t.Errorf("Load(%q) = nil error, want one", bad)
		}
	}
}
