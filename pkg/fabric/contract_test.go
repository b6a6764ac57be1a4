package fabric_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// rawEvent is an envelope as another producer wrote it: bytes the fabric's
// own (strict) publisher would refuse to send.
type rawEvent struct {
	name string
	typ  string
	id   string
	body []byte
}

// rawSubmitted builds request.submitted.v1 bytes from a valid envelope,
// with payload fields replaced or added (extra) and top-level fields
// replaced or added (envelopeExtra), both as raw JSON.
func rawSubmitted(t *testing.T, name string, payload map[string]string, envelopeExtra map[string]string) rawEvent {
	t.Helper()
	fields := map[string]string{
		"requestId": `"0192d3a0-0000-7000-8000-000000000001"`, "protocol": `"AGR-2026-000001"`,
		"serviceId": `"alvara"`, "formId": `"f1"`, "formVersion": `1`, "channel": `"web"`,
		"citizenId": `"c-1"`, "submittedAt": `"2026-11-30T10:00:00Z"`,
	}
	for k, v := range payload {
		fields[k] = v
	}
	return rawEnvelope(t, name, "request.submitted.v1", fields, envelopeExtra)
}

func rawEnvelope(t *testing.T, name, typ string, payload, envelopeExtra map[string]string) rawEvent {
	t.Helper()
	var p bytes.Buffer
	p.WriteByte('{')
	first := true
	for k, v := range payload {
		if !first {
			p.WriteByte(',')
		}
		first = false
		p.WriteString(`"` + k + `":` + v)
	}
	p.WriteByte('}')
	e, err := envelope.New(typ, "org-a", "other-team", json.RawMessage(p.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]json.RawMessage{}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for k, v := range envelopeExtra {
		fields[k] = json.RawMessage(v)
	}
	body, err := json.Marshal(fields)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var id string
	_ = json.Unmarshal(fields["id"], &id)
	return rawEvent{name: name, typ: typ, id: id, body: body}
}

// TestTolerantReaderThroughTheBroker publishes what docs/contract-evolution.md calls
// compatible changes, and hostile inputs, to a consumer built from today's
// catalog: the compatible ones are processed with nothing lost, the others
// dead-lettered with their reason.
func TestTolerantReaderThroughTheBroker(t *testing.T) {
	spec := topology.Consumer{Queue: "test.request-events", Service: "test",
		RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
		Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.#"}}}
	f := fabrictest.NewFabric(t, testEnv, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})

	var mu sync.Mutex
	handled := map[string][]byte{} // id → the envelope as a forwarder would re-send it
	f.Run(t, spec, func(_ context.Context, e envelope.Envelope) error {
		b, err := e.Encode()
		if err != nil {
			return fabric.Invalid(err)
		}
		mu.Lock()
		handled[e.ID] = b
		mu.Unlock()
		return nil
	}, fabric.ConsumerOptions{})

	v4 := rawSubmitted(t, "UUIDv4 id", nil, nil)
	v4.body = bytes.ReplaceAll(v4.body, []byte(v4.id), []byte("3b241101-e2bb-4255-8caf-4136c566a962")) // id and correlationId
	v4.id = "3b241101-e2bb-4255-8caf-4136c566a962"
	cases := []struct {
		ev        rawEvent
		processed bool
		reason    string   // dead-letter reason when not processed
		keeps     []string // fragments the re-encoded envelope must still hold
	}{
		{rawSubmitted(t, "added optional payload field", map[string]string{"priority": `{"level":"high"}`}, nil), true, "", []string{`"priority":{"level":"high"}`}},
		{rawSubmitted(t, "added envelope field", nil, map[string]string{"traceLevel": `"debug"`, "x-origin": `{"system":"sei","ids":[1,2]}`}), true, "",
			[]string{`"traceLevel":"debug"`, `"x-origin":{"system":"sei","ids":[1,2]}`}},
		{rawSubmitted(t, "new value of an extensible enum", map[string]string{"channel": `"kiosk"`}, nil), true, "", []string{`"channel":"kiosk"`}},
		{v4, true, "", []string{`"id":"3b241101-e2bb-4255-8caf-4136c566a962"`}},
		{rawEnvelope(t, "new value of a closed enum", "request.status-changed.v1", map[string]string{
			"requestId": `"0192d3a0-0000-7000-8000-000000000001"`, "status": `"archived"`, "changedAt": `"2026-11-30T10:00:00Z"`}, nil),
			false, wire.ReasonSchema, nil},
		{rawSubmitted(t, "integer beyond int64", map[string]string{"formVersion": `1e400`}, nil), false, wire.ReasonSchema, nil},
		{rawSubmitted(t, "unknown schemaVersion", nil, map[string]string{"schemaVersion": `"banana"`}), false, wire.ReasonInvalidEnvelope, nil},
		{rawSubmitted(t, "envelope field named twice", nil, nil), false, wire.ReasonInvalidEnvelope, nil},
	}
	dup := &cases[len(cases)-1].ev
	dup.body = bytes.Replace(dup.body, []byte(`"tenantId":"org-a"`), []byte(`"tenantId":"org-a","tenantId":"org-b"`), 1)

	for _, c := range cases {
		pd, err := f.Pub.Send(context.Background(), broker.Message{
			Exchange: topology.EventsExchange, RoutingKey: c.ev.typ, Body: c.ev.body, MessageID: c.ev.id,
			Type: c.ev.typ, Headers: amqp.Table{wire.HeaderTenant: "org-a"}, Timestamp: time.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := pd.Wait(context.Background()); err != nil {
			t.Fatalf("%s: publish: %v", c.ev.name, err)
		}
	}
	wantDead := 0
	for _, c := range cases {
		if !c.processed {
			wantDead++
		}
	}
	dead := map[string]amqp.Delivery{}
	fabrictest.Eventually(t, 15*time.Second, "every case handled or dead-lettered", func() bool {
		for _, d := range f.Drain(t, spec.DLQ()) {
			dead[d.MessageId] = d
		}
		mu.Lock()
		defer mu.Unlock()
		return len(dead)+len(handled) >= len(cases)
	})
	for _, c := range cases {
		t.Run(c.ev.name, func(t *testing.T) {
			mu.Lock()
			got, ok := handled[c.ev.id]
			mu.Unlock()
			d, isDead := dead[c.ev.id]
			if ok != c.processed || isDead == c.processed {
				t.Fatalf("processed = %v, dead-lettered = %v (reason %v, error %v); want processed = %v",
					ok, isDead, d.Headers[wire.HeaderReason], d.Headers[wire.HeaderError], c.processed)
			}
			if !c.processed {
				if r := d.Headers[wire.HeaderReason]; r != c.reason {
					t.Errorf("dead-letter reason = %v, want %s (error: %v)", r, c.reason, d.Headers[wire.HeaderError])
				}
				if !bytes.Equal(d.Body, c.ev.body) {
					t.Errorf("dead letter body changed:\n%s\nwant\n%s", d.Body, c.ev.body)
				}
				return
			}
			for _, frag := range c.keeps {
				if !strings.Contains(string(got), frag) {
					t.Errorf("re-encoded envelope lost %s:\n%s", frag, got)
				}
			}
		})
	}
}

// TestVersionsSideBySide is the migration of docs/contract-evolution.md: the producer
// enqueues v1 and v2 of one fact in one outbox transaction; a consumer
// built before v2 keeps its binding to v1, a new one binds v2; each sees
// exactly its version and nothing is dead-lettered.
func TestVersionsSideBySide(t *testing.T) {
	tiers := []topology.Duration{topology.Duration(100 * time.Millisecond)}
	oldSpec := topology.Consumer{Queue: "old.request-submitted", Service: "old", RetryTiers: tiers,
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}
	newSpec := topology.Consumer{Queue: "new.request-submitted", Service: "new", RetryTiers: tiers,
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v2"}}}
	f := fabrictest.NewFabric(t, testEnv, topology.Description{Exchanges: topology.PlatformExchanges(),
		Consumers: []topology.Consumer{oldSpec, newSpec}})

	type seen struct {
		typ, correlation string
	}
	var mu sync.Mutex
	got := map[string][]seen{}
	record := func(queue string) fabric.Handler {
		return func(_ context.Context, e envelope.Envelope) error {
			mu.Lock()
			defer mu.Unlock()
			got[queue] = append(got[queue], seen{e.Type, e.CorrelationID})
			return nil
		}
	}
	f.Run(t, oldSpec, record(oldSpec.Queue), fabric.ConsumerOptions{})
	f.Run(t, newSpec, record(newSpec.Queue), fabric.ConsumerOptions{})
	db := fabrictest.NewSchema(t, testEnv)
	ob := outbox.New(f.Reg)
	relay := relay.New(db.Pool, db.Name, f.Pub, relay.Options{PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-relayDone; err != nil {
			t.Errorf("relay: %v", err)
		}
	})

	const n = 20
	for i := range n {
		v1, err := envelope.New("request.submitted.v1", "org-a", "request", map[string]any{
			"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
			"serviceId": "alvara", "formId": "f1", "formVersion": 2, "channel": "web",
			"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z", "fieldCount": i,
		})
		if err != nil {
			t.Fatal(err)
		}
		v2, err := envelope.Alongside(v1, "request.submitted.v2", map[string]any{
			"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
			"serviceId": "alvara", "form": map[string]any{"id": "f1", "version": "2.0.0"}, "fieldCount": i,
			"channel": "web", "citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z",
		})
		if err != nil {
			t.Fatal(err)
		}
		agg := outbox.Aggregate{Type: "request", ID: fmt.Sprint(i)}
		if err := pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
			return ob.Enqueue(context.Background(), tx, outbox.Item{Aggregate: agg, Envelope: v1}, outbox.Item{Aggregate: agg, Envelope: v2})
		}); err != nil {
			t.Fatalf("enqueue v1 and v2: %v", err)
		}
	}
	fabrictest.Eventually(t, 15*time.Second, "both consumers to see all their messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[oldSpec.Queue]) >= n && len(got[newSpec.Queue]) >= n
	})
	// Both consumers have had all 2n messages routed; a misrouted one would
	// have arrived among them (one queue each, FIFO) — count and types say.
	mu.Lock()
	defer mu.Unlock()
	for queue, want := range map[string]string{oldSpec.Queue: "request.submitted.v1", newSpec.Queue: "request.submitted.v2"} {
		if len(got[queue]) != n {
			t.Errorf("%s saw %d messages, want %d", queue, len(got[queue]), n)
		}
		for _, s := range got[queue] {
			if s.typ != want {
				t.Errorf("%s saw %s, want only %s", queue, s.typ, want)
			}
		}
	}
	correlations := map[string]int{}
	for _, list := range got {
		for _, s := range list {
			correlations[s.correlation]++
		}
	}
	for c, k := range correlations {
		if k != 2 {
			t.Errorf("correlation %s seen %d times, want 2 (one per version)", c, k)
		}
	}
	for _, q := range []string{oldSpec.DLQ(), newSpec.DLQ()} {
		if d := f.Depth(t, q); d != 0 {
			t.Errorf("%s holds %d dead letters, want 0", q, d)
		}
	}
}
