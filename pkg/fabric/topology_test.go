package fabric_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

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
		// the code under test computes them: 30 s, 5 min, 30 min, then the
		// DLQ. The delay is each tier's policy, not an argument
		// (docs/topologies.md), so the tier can change in place.
		policies := map[string]any{}
		for _, q := range cons.Queues() {
			if q.Policy != nil {
				policies[q.Name] = q.Policy.Definition["message-ttl"]
			}
		}
		for n, wantMS := range []int64{30_000, 300_000, 1_800_000} {
			r, ok := qs[cons.RetryQueue(n+1)]
			if !ok {
				t.Errorf("missing retry queue %s", cons.RetryQueue(n+1))
				continue
			}
			if ttl, ok := r.Arguments["x-message-ttl"]; ok {
				t.Errorf("%s declared with x-message-ttl %v: its delay belongs to its policy", r.Name, ttl)
			}
			if got := policies[r.Name]; got != wantMS {
				t.Errorf("%s policy message-ttl = %v, want %d", r.Name, got, wantMS)
			}
			if r.Arguments["x-dead-letter-exchange"] != topology.RetryExchange || r.Arguments["x-dead-letter-routing-key"] != cons.Queue {
				t.Errorf("%s must dead-letter to %s alone through %s, args %v", r.Name, cons.Queue, topology.RetryExchange, r.Arguments)
			}
			if r.Arguments["x-dead-letter-strategy"] != "at-least-once" || r.Arguments["x-overflow"] != "reject-publish" {
				t.Errorf("%s must dead-letter at least once (reject-publish), args %v", r.Name, r.Arguments)
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

	// platform.retry is a topic exchange on which exactly Q (key Q) and
	// each Q.retry.<n> (key Q.retry.<n>) of every consumer are bound, as
	// spelled out here rather than computed by the code under test.
	var ex struct {
		Type    string `json:"type"`
		Durable bool   `json:"durable"`
	}
	if err := vh.Mgmt(http.MethodGet, "/api/exchanges/"+url.PathEscape(vh.Name)+"/"+topology.RetryExchange, nil, &ex); err != nil {
		t.Fatalf("exchange %s: %v", topology.RetryExchange, err)
	}
	if ex.Type != "topic" || !ex.Durable {
		t.Errorf("exchange %s = %+v, want durable topic", topology.RetryExchange, ex)
	}
	got, want := retryBindings(t, vh), map[string]bool{}
	for _, cons := range desc.Consumers {
		for _, q := range []string{cons.Queue, cons.Queue + ".retry.1", cons.Queue + ".retry.2", cons.Queue + ".retry.3"} {
			want[q+" <- "+q] = true
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s bindings = %v, want %v", topology.RetryExchange, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}

	// Other retry delays declare nothing new: the tiers' delays are
	// policies, which Apply does not touch.
	retimed := topology.Platform()
	retimed.Consumers[0].RetryTiers = []topology.Duration{topology.Duration(7 * time.Second),
		topology.Duration(time.Minute), topology.Duration(time.Hour)}
	if err := topology.Apply(ctx, c, retimed); err != nil {
		t.Errorf("Apply(other tier delays) = %v, want nil: a tier's delay is no argument", err)
	}

	// A conflicting redeclaration names the argument that differs.
	changed := topology.Platform()
	changed.Consumers[0].DeliveryLimit = topology.DefaultDeliveryLimit + 5
	err = topology.Apply(ctx, c, changed)
	var conflict *topology.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("Apply(conflicting) = %v, want *ConflictError", err)
	}
	if conflict.Argument != "x-delivery-limit" || conflict.Name != changed.Consumers[0].Queue {
		t.Errorf("conflict = %+v, want x-delivery-limit on %s", conflict, changed.Consumers[0].Queue)
	}
	if !strings.Contains(err.Error(), "x-delivery-limit") {
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
	if len(d.Exchanges) != 5 || d.Consumers[0].Tiers()[2] != 25*time.Second {
		t.Fatalf("Load = %+v", d)
	}
	for _, bad := range []string{
		"consumers:\n  - queue: Bad Name\n    bindings: [{exchange: platform.events, key: a}]\n",
		"consumers:\n  - queue: a.b\n    bindings: [{exchange: nowhere, key: a}]\n",
		"consumers:\n  - queue: a.b\n",
		"consumers:\n  - queue: a.b\n    colour: red\n",
		// platform.retry is required, and a topic exchange.
		"exchanges:\n  - {name: platform.events, type: topic}\n  - {name: platform.dead-letter, type: direct}\n" +
			"consumers:\n  - queue: a.b\n    bindings: [{exchange: platform.events, key: a}]\n",
		"exchanges:\n  - {name: platform.events, type: topic}\n  - {name: platform.dead-letter, type: direct}\n  - {name: platform.retry, type: direct}\n" +
			"consumers:\n  - queue: a.b\n    bindings: [{exchange: platform.events, key: a}]\n",
	} {
		if _, err := topology.Load([]byte(bad)); err == nil {
			t.Errorf("Load(%q) = nil error, want one", bad)
		}
	}
}

// retryBindings returns platform.retry's bindings in vh as "queue <- key".
func retryBindings(t *testing.T, vh *fabrictest.Vhost) map[string]bool {
	t.Helper()
	var bs []struct {
		Destination     string `json:"destination"`
		DestinationType string `json:"destination_type"`
		RoutingKey      string `json:"routing_key"`
	}
	if err := vh.Mgmt(http.MethodGet, "/api/exchanges/"+url.PathEscape(vh.Name)+"/"+topology.RetryExchange+"/bindings/source", nil, &bs); err != nil {
		t.Fatalf("bindings of %s: %v", topology.RetryExchange, err)
	}
	out := map[string]bool{}
	for _, b := range bs {
		out[b.Destination+" <- "+b.RoutingKey] = b.DestinationType == "queue"
	}
	return out
}

// Retry tiers of earlier versions differ from today's declaration: tier 1
// as it was declared before platform.retry existed (dead-lettering through
// the default exchange, its delay an x-message-ttl argument), tier 2 as it
// was declared before policies carried the delay (x-message-ttl). Their
// arguments cannot change in place, so Apply keeps them as they are and
// leaves their bindings alone (`fabricctl topology apply` upgrades them,
// TestTopologyApplyUpgradesLegacyRetryTiers), and a message still returns
// to Q alone when the old TTL ends. Any other difference is still a
// conflict.
func TestTopologyApplyKeepsRetryQueuesOfEarlierVersions(t *testing.T) {
	vh := fabrictest.NewVhost(t, testEnv)
	ctx := context.Background()
	c, err := vh.Dial(t).Connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons := topology.Consumer{Queue: "legacy.request-events", Service: "legacy",
		RetryTiers: []topology.Duration{topology.Duration(200 * time.Millisecond), topology.Duration(time.Minute), topology.Duration(time.Hour)},
		Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.#"}}}
	desc := topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{cons}}
	if err := topology.Apply(ctx, c, topology.Description{Exchanges: topology.PlatformExchanges()}); err != nil {
		t.Fatal(err)
	}
	// The earlier versions' declarations, spelled out, each bound as the
	// version that declared it bound it.
	earlier := func(dlx string, ttl int64) amqp.Table {
		return amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": cons.Queue,
			"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish", "x-message-ttl": ttl}
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for q, args := range map[string]amqp.Table{cons.RetryQueue(1): earlier("", 200), cons.RetryQueue(2): earlier(topology.RetryExchange, 60_000)} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, q, topology.RetryExchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	ch.Close()
	for i := 0; i < 2; i++ {
		if err := topology.Apply(ctx, c, desc); err != nil {
			t.Fatalf("Apply #%d over retry queues of earlier versions: %v", i+1, err)
		}
	}
	qs := vh.Queues(t)
	if a := qs[cons.RetryQueue(1)].Arguments; a["x-dead-letter-exchange"] != "" || a["x-message-ttl"] != float64(200) {
		t.Errorf("%s args = %v, want the earlier DLX \"\" and x-message-ttl 200 kept", cons.RetryQueue(1), a)
	}
	if a := qs[cons.RetryQueue(2)].Arguments; a["x-dead-letter-exchange"] != topology.RetryExchange || a["x-message-ttl"] != float64(60_000) {
		t.Errorf("%s args = %v, want %s and the earlier x-message-ttl 60000 kept", cons.RetryQueue(2), a, topology.RetryExchange)
	}
	if a := qs[cons.RetryQueue(3)].Arguments; a["x-dead-letter-exchange"] != topology.RetryExchange || a["x-message-ttl"] != nil {
		t.Errorf("%s args = %v, want today's: %s, no x-message-ttl", cons.RetryQueue(3), a, topology.RetryExchange)
	}
	if b := retryBindings(t, vh); !b[cons.RetryQueue(1)+" <- "+cons.RetryQueue(1)] || !b[cons.RetryQueue(3)+" <- "+cons.RetryQueue(3)] || !b[cons.Queue+" <- "+cons.Queue] {
		t.Errorf("%s bindings = %v", topology.RetryExchange, b)
	}

	// A retry through platform.retry still comes back to Q after the TTL.
	ch, err = c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.PublishWithContext(ctx, topology.RetryExchange, cons.RetryQueue(1), true, false,
		amqp.Publishing{MessageId: "legacy-1", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "the retried message back in "+cons.Queue, func() bool {
		return vh.Queues(t)[cons.Queue].Messages == 1
	})

	// Apply does not bind an earlier tier again: once `fabricctl topology
	// apply` has unbound it to move its messages out, a service that
	// starts meanwhile must not route retries back into it.
	if err := ch.QueueUnbind(cons.RetryQueue(2), cons.RetryQueue(2), topology.RetryExchange, nil); err != nil {
		t.Fatal(err)
	}
	if err := topology.Apply(ctx, c, desc); err != nil {
		t.Fatal(err)
	}
	if b := retryBindings(t, vh); b[cons.RetryQueue(2)+" <- "+cons.RetryQueue(2)] {
		t.Errorf("Apply bound %s, a tier of an earlier version, again", cons.RetryQueue(2))
	}

	// Another difference in a retry queue is still a conflict.
	if _, err := ch.QueueDeclare(cons.Queue+".retry.4", true, false, false, false, amqp.Table{"x-queue-type": "quorum",
		"x-dead-letter-exchange": topology.RetryExchange, "x-dead-letter-routing-key": "elsewhere",
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish", "x-message-ttl": int64(1000)}); err != nil {
		t.Fatal(err)
	}
	four := desc
	four.Consumers = []topology.Consumer{cons}
	four.Consumers[0].RetryTiers = append(append([]topology.Duration(nil), cons.RetryTiers...), topology.Duration(time.Second))
	var conflict *topology.ConflictError
	if err := topology.Apply(ctx, c, four); !errors.As(err, &conflict) || conflict.Argument != "x-dead-letter-routing-key" {
		t.Errorf("Apply(other dead-letter key) = %v, want a conflict on x-dead-letter-routing-key", err)
	}
}
