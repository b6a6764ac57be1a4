package fabrictest

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// observer watches messages on a platform exchange through a private,
// auto-deleted queue, keeping every envelope it has read.
type observer struct {
	ch    *amqp.Channel
	queue string
	// Seen holds every envelope read so far, in arrival order.
	Seen []envelope.Envelope
}

// Observe binds a fresh exclusive queue to platform.events for keys (topic
// patterns such as "workflow.#"); it goes away with the test.
func Observe(t testing.TB, conn *broker.Conn, keys ...string) *observer {
	t.Helper()
	return ObserveExchange(t, conn, topology.EventsExchange, keys...)
}

// ObserveExchange is Observe on exchange: commands and jobs travel on
// platform.commands and platform.work, keyed by their exact type.
func ObserveExchange(t testing.TB, conn *broker.Conn, exchange string, keys ...string) *observer {
	t.Helper()
	ch, err := conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := ch.QueueBind(q.Name, k, exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return &observer{ch: ch, queue: q.Name}
}

// Drain reads everything queued now into Seen.
func (o *observer) Drain(t testing.TB) {
	t.Helper()
	for {
		d, ok, err := o.ch.Get(o.queue, true)
		if err != nil {
			t.Fatalf("get %s: %v", o.queue, err)
		}
		if !ok {
			return
		}
		e, err := envelope.Decode(d.Body, 0)
		if err != nil {
			t.Fatalf("decode %s: %v", d.Body, err)
		}
		o.Seen = append(o.Seen, e)
	}
}

// Matching drains and returns every envelope seen that matches.
func (o *observer) Matching(t testing.TB, match func(envelope.Envelope) bool) []envelope.Envelope {
	t.Helper()
	o.Drain(t)
	var got []envelope.Envelope
	for _, e := range o.Seen {
		if match(e) {
			got = append(got, e)
		}
	}
	return got
}

// WaitFor waits (20 s) until n envelopes match, and returns them.
func (o *observer) WaitFor(t testing.TB, n int, what string, match func(envelope.Envelope) bool) []envelope.Envelope {
	t.Helper()
	var got []envelope.Envelope
	Eventually(t, 20*time.Second, what, func() bool {
		got = o.Matching(t, match)
		return len(got) >= n
	})
	return got
}

// Next waits for the first envelope that matches.
func (o *observer) Next(t testing.TB, what string, match func(envelope.Envelope) bool) envelope.Envelope {
	t.Helper()
	return o.WaitFor(t, 1, what, match)[0]
}
