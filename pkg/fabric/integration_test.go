package fabric_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var testEnv = fabrictest.EnvFrom(os.Getenv)

const testQueue = "test.request-submitted"

// stack is one isolated fabric: its own vhost, topology, publisher.
type stack struct {
	vh   *fabrictest.Vhost
	conn *broker.Conn
	reg  *registry.Registry
	pub  *fabric.Publisher
	spec topology.Consumer
	desc topology.Description
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
	vh := fabrictest.NewVhost(t, testEnv)
	applied := func(ctx context.Context, c *amqp.Connection) error { return topology.Apply(ctx, c, desc) }
	conn := vh.Dial(t, applied)
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := fabric.NewPublisher(conn, reg, fabric.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return &stack{vh: vh, conn: conn, reg: reg, pub: pub, spec: spec, desc: desc}
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
func (s *stack) run(t *testing.T, h fabric.Handler, opts fabric.ConsumerOptions) *fabric.Consumer {
	t.Helper()
	c, err := fabric.NewConsumer(s.conn, s.pub, s.reg, s.spec, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer Run: %v", err)
		}
	})
	return c
}

// dlq reads every message in the DLQ (acking them).
func (s *stack) dlq(t *testing.T) []amqp.Delivery {
	t.Helper()
	ch, err := s.conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(s.spec.DLQ(), false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
		d.Ack(false)
	}
}

func (s *stack) depth(t *testing.T, queue string) int {
	t.Helper()
	ch, err := s.conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

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
		for n, d := range topology.DefaultRetryTiers() {
			r, ok := qs[cons.RetryQueue(n+1)]
			if !ok {
				t.Errorf("missing retry queue %s", cons.RetryQueue(n+1))
				continue
			}
			if ttl, _ := r.Arguments["x-message-ttl"].(float64); int64(ttl) != d.Milliseconds() {
				t.Errorf("%s ttl = %v, want %d", r.Name, r.Arguments["x-message-ttl"], d.Milliseconds())
			}
			if r.Arguments["x-dead-letter-exchange"] != "" || r.Arguments["x-dead-letter-routing-key"] != cons.Queue {
				t.Errorf("%s must dead-letter to %s alone through the default exchange, args %v", r.Name, cons.Queue, r.Arguments)
			}
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

func TestPublishConfirmsRoutesAndReturns(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if err := s.pub.Publish(ctx, submitted(t, "org-a", "ok")); err != nil {
		t.Fatalf("Publish routed: %v", err)
	}
	// No queue is bound to citizen.updated.v1 in this vhost: the broker acks
	// it anyway; only the mandatory return tells us.
	e, err := envelope.New("citizen.updated.v1", "org-a", "test", map[string]any{"citizenId": "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.pub.Publish(ctx, e); !errors.Is(err, fabric.ErrUnroutable) {
		t.Fatalf("Publish unroutable = %v, want ErrUnroutable", err)
	}
	bad := submitted(t, "org-a", "x")
	bad.Payload = []byte(`{"requestId":"nope"}`)
	if err := s.pub.Publish(ctx, bad); !errors.Is(err, registry.ErrSchema) {
		t.Fatalf("Publish schema-invalid = %v, want ErrSchema", err)
	}

	// Pipelined: 2,000 in flight through a window of 256, interleaved with
	// unroutable ones; every routed one confirmed, every unroutable one not.
	var pend, unr []*fabric.Pending
	for i := 0; i < 2000; i++ {
		p, err := s.pub.PublishAsync(ctx, submitted(t, "org-a", "bulk"))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
		if i%100 == 0 {
			u, _ := envelope.New("citizen.updated.v1", "org-a", "test", map[string]any{"citizenId": "c"})
			p, err := s.pub.PublishAsync(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			unr = append(unr, p)
		}
	}
	for _, p := range pend {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("pipelined publish: %v", err)
		}
	}
	for _, p := range unr {
		if err := p.Wait(ctx); !errors.Is(err, fabric.ErrUnroutable) {
			t.Fatalf("pipelined unroutable = %v, want ErrUnroutable", err)
		}
	}
	if n := s.depth(t, testQueue); n != 2001 {
		t.Fatalf("queue depth = %d, want 2001", n)
	}
}

func TestMessageAndPropertiesCarryContract(t *testing.T) {
	s := newStack(t)
	e := submitted(t, "org-a", "props")
	if err := s.pub.Publish(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	ch, _ := s.conn.Channel(context.Background())
	defer ch.Close()
	d, ok, err := ch.Get(testQueue, true)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if d.MessageId != e.ID || d.CorrelationId != e.CorrelationID || d.Type != e.Type ||
		d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent ||
		d.Headers[fabric.HeaderTenant] != "org-a" || d.Headers[fabric.HeaderCorrelation] != e.CorrelationID {
		t.Fatalf("delivery properties = %+v", d)
	}
}

// behaviour decides a handler's answer from the envelope's serviceId.
func behaviourHandler(calls *sync.Map) fabric.Handler {
	return func(ctx context.Context, e envelope.Envelope) error {
		var p struct {
			ServiceID string `json:"serviceId"`
		}
		_ = jsonUnmarshal(e.Payload, &p)
		n, _ := calls.LoadOrStore(e.ID, new(atomic.Int32))
		count := n.(*atomic.Int32).Add(1)
		switch p.ServiceID {
		case "ok":
			return nil
		case "transient":
			return fabric.Transient(errors.New("dependency down"))
		case "transient-once":
			if count == 1 {
				return fabric.Transient(errors.New("blip"))
			}
			return nil
		case "permanent":
			return fabric.Permanent(errors.New("service closed"))
		case "invalid":
			return fabric.Invalid(errors.New("form does not exist"))
		case "unknown":
			return errors.New("something odd")
		case "panic":
			panic("handler bug")
		}
		return nil
	}
}

func TestFailureClassesRoute(t *testing.T) {
	s := newStack(t, 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond)
	var calls sync.Map
	s.run(t, behaviourHandler(&calls), fabric.ConsumerOptions{UnknownRetries: 1})
	cases := []struct {
		marker    string
		wantCalls int32
		wantDLQ   bool
		reason    string
		class     string
	}{
		{"ok", 1, false, "", ""},
		{"transient-once", 2, false, "", ""},
		{"transient", 4, true, fabric.ReasonRetriesExhausted, "transient"}, // 1 + 3 tiers
		{"permanent", 1, true, fabric.ReasonPermanent, "permanent"},
		{"invalid", 1, true, fabric.ReasonHandlerInvalid, "invalid"},
		{"unknown", 2, true, fabric.ReasonRetriesExhausted, "unknown"}, // 1 + UnknownRetries
		{"panic", 2, true, fabric.ReasonRetriesExhausted, "unknown"},
	}
	ids := map[string]string{}
	for _, c := range cases {
		e := submitted(t, "org-a", c.marker)
		ids[c.marker] = e.ID
		if err := s.pub.Publish(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	var dead []amqp.Delivery
	fabrictest.Eventually(t, 10*time.Second, "5 dead letters", func() bool {
		dead = append(dead, s.dlq(t)...)
		return len(dead) >= 5
	})
	time.Sleep(300 * time.Millisecond) // anything extra would show up now
	dead = append(dead, s.dlq(t)...)
	byID := map[string]amqp.Delivery{}
	for _, d := range dead {
		byID[d.MessageId] = d
	}
	for _, c := range cases {
		t.Run(c.marker, func(t *testing.T) {
			n, _ := calls.Load(ids[c.marker])
			if got := n.(*atomic.Int32).Load(); got != c.wantCalls {
				t.Errorf("handler calls = %d, want %d", got, c.wantCalls)
			}
			d, dl := byID[ids[c.marker]]
			if dl != c.wantDLQ {
				t.Fatalf("in DLQ = %v, want %v", dl, c.wantDLQ)
			}
			if !dl {
				return
			}
			h := d.Headers
			if h[fabric.HeaderReason] != c.reason || h[fabric.HeaderErrorClass] != c.class ||
				h[fabric.HeaderEventID] != ids[c.marker] || h[fabric.HeaderConsumer] != testQueue ||
				fabric.Attempts(h) != int(c.wantCalls) || h[fabric.HeaderError] == "" || h[fabric.HeaderLastAttempt] == "" ||
				h[fabric.HeaderOrigExchange] != topology.EventsExchange || h[fabric.HeaderOrigRouting] != "request.submitted.v1" {
				t.Errorf("dead-letter headers = %v", h)
			}
		})
	}
	if n := len(dead); n != 5 {
		t.Errorf("DLQ holds %d messages, want 5", n)
	}
}

func TestMalformedMessagesAreDeadLetteredBeforeTheHandler(t *testing.T) {
	s := newStack(t)
	var handled atomic.Int32
	s.run(t, func(ctx context.Context, e envelope.Envelope) error { handled.Add(1); return nil }, fabric.ConsumerOptions{})

	deep := submitted(t, "org-a", "ok")
	for i := 0; i < 17; i++ {
		c, _ := envelope.Derive(deep, "request.submitted.v1", "test", jsonRaw(deep.Payload))
		deep = c
	}
	cyclic := submitted(t, "org-a", "ok")
	for i := 0; i < 3; i++ {
		c, _ := envelope.Derive(cyclic, "request.submitted.v1", "test", jsonRaw(cyclic.Payload))
		cyclic = c
	}
	cyclic.CausationChain[2].ID = cyclic.CausationChain[0].ID
	cyclic.CausationID = cyclic.CausationChain[0].ID
	unknown := submitted(t, "org-a", "ok")
	unknown.Type, unknown.Version = "request.exploded.v1", "1"
	schemaBad := submitted(t, "org-a", "ok")
	schemaBad.Payload = []byte(`{"requestId":1}`)
	noTenant := submitted(t, "", "ok")

	raw := func(e envelope.Envelope, tenantHeader string) fabric.Message {
		b, _ := e.Encode()
		h := amqp.Table{}
		if tenantHeader != "" {
			h[fabric.HeaderTenant] = tenantHeader
		}
		return fabric.Message{Exchange: topology.EventsExchange, RoutingKey: "request.submitted.v1", Body: b, MessageID: e.ID, Type: e.Type, Headers: h}
	}
	cases := []struct {
		name   string
		msg    fabric.Message
		reason string
	}{
		{"not json", fabric.Message{Exchange: topology.EventsExchange, RoutingKey: "request.submitted.v1", Body: []byte("{oops"), MessageID: "junk-1"}, fabric.ReasonInvalidEnvelope},
		{"unknown type", raw(unknown, "org-a"), fabric.ReasonUnknownType},
		{"schema", raw(schemaBad, "org-a"), fabric.ReasonSchema},
		{"no tenant", raw(noTenant, ""), fabric.ReasonTenantMissing},
		{"tenant mismatch", raw(submitted(t, "org-a", "ok"), "org-b"), fabric.ReasonTenantMismatch},
		{"depth", raw(deep, "org-a"), fabric.ReasonDepth},
		{"cycle", raw(cyclic, "org-a"), fabric.ReasonCycle},
	}
	for _, c := range cases {
		p, err := s.pub.Send(context.Background(), c.msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var dead []amqp.Delivery
	fabrictest.Eventually(t, 10*time.Second, "all malformed dead-lettered", func() bool {
		dead = append(dead, s.dlq(t)...)
		return len(dead) >= len(cases)
	})
	got := map[string]string{}
	for _, d := range dead {
		got[d.MessageId] = d.Headers[fabric.HeaderReason].(string)
		if fabric.Attempts(d.Headers) != 1 || d.Headers[fabric.HeaderErrorClass] != "invalid" {
			t.Errorf("%s: attempts %d class %v, want 1 invalid (no retries)", d.MessageId, fabric.Attempts(d.Headers), d.Headers[fabric.HeaderErrorClass])
		}
	}
	for _, c := range cases {
		if got[c.msg.MessageID] != c.reason {
			t.Errorf("%s: reason = %q, want %q", c.name, got[c.msg.MessageID], c.reason)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("handler ran %d times on refused messages, want 0", n)
	}
}

func TestPoisonMessageDoesNotBlockTheQueue(t *testing.T) {
	s := newStack(t, 200*time.Millisecond, 200*time.Millisecond)
	var good atomic.Int32
	s.run(t, func(ctx context.Context, e envelope.Envelope) error {
		if strings.Contains(string(e.Payload), `"poison"`) {
			panic("poison")
		}
		good.Add(1)
		return nil
	}, fabric.ConsumerOptions{Concurrency: 1, Prefetch: 1})
	ctx := context.Background()
	if err := s.pub.Publish(ctx, submitted(t, "org-a", "poison")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := s.pub.Publish(ctx, submitted(t, "org-a", "ok")); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 10*time.Second, "50 good messages past the poison one", func() bool { return good.Load() == 50 })
	var dead []amqp.Delivery
	fabrictest.Eventually(t, 10*time.Second, "poison in DLQ", func() bool { dead = append(dead, s.dlq(t)...); return len(dead) == 1 })
	if s.depth(t, testQueue) != 0 {
		t.Errorf("main queue not empty: nothing may requeue forever")
	}
}

func TestCompetingConsumersShareWithoutDuplicates(t *testing.T) {
	s := newStack(t)
	var mu sync.Mutex
	seen := map[string]int{}
	per := [2]atomic.Int32{}
	for i := 0; i < 2; i++ {
		i := i
		s.run(t, func(ctx context.Context, e envelope.Envelope) error {
			time.Sleep(time.Millisecond)
			mu.Lock()
			seen[e.ID]++
			mu.Unlock()
			per[i].Add(1)
			return nil
		}, fabric.ConsumerOptions{Prefetch: 10, Concurrency: 2})
	}
	const n = 400
	var pend []*fabric.Pending
	for i := 0; i < n; i++ {
		p, err := s.pub.PublishAsync(context.Background(), submitted(t, "org-a", "ok"))
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
	fabrictest.Eventually(t, 15*time.Second, "all consumed", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n })
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s handled %d times", id, c)
		}
	}
	if per[0].Load() == 0 || per[1].Load() == 0 {
		t.Errorf("work split %d/%d: both consumers must get some", per[0].Load(), per[1].Load())
	}
}

func TestTenantContextAndTracePropagation(t *testing.T) {
	s := newStack(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mp, metricsHandler, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := fabric.NewPublisher(s.conn, s.reg, fabric.PublisherOptions{Tracer: tp, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	got := make(chan string, 1)
	s.run(t, func(ctx context.Context, e envelope.Envelope) error {
		id, err := tenant.From(ctx)
		if err != nil {
			return fabric.Permanent(err)
		}
		got <- id
		return nil
	}, fabric.ConsumerOptions{Tracer: tp, Metrics: metrics})
	if err := pub.Publish(context.Background(), submitted(t, "org-tenant-x", "ok")); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "org-tenant-x" {
			t.Fatalf("tenant in handler ctx = %q, want org-tenant-x", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler never ran")
	}
	var producer, consumer sdktrace.ReadOnlySpan
	fabrictest.Eventually(t, 5*time.Second, "producer and consumer spans", func() bool {
		for _, sp := range rec.Ended() {
			switch {
			case strings.HasPrefix(sp.Name(), "publish "):
				producer = sp
			case strings.HasPrefix(sp.Name(), "process "):
				consumer = sp
			}
		}
		return producer != nil && consumer != nil
	})
	if consumer.Parent().SpanID() != producer.SpanContext().SpanID() || consumer.SpanContext().TraceID() != producer.SpanContext().TraceID() {
		t.Fatalf("consumer span parent %v, want producer %v", consumer.Parent(), producer.SpanContext())
	}
	rr := httptest.NewRecorder()
	metricsHandler.ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rr.Body)
	for _, want := range []string{"fabric_consumer_processed_total", `consumer="` + testQueue + `"`, "fabric_consumer_duration_seconds", "fabric_consumer_lag_seconds", "fabric_publisher_confirmed_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestReconnectAfterConnectionsAreClosed(t *testing.T) {
	s := newStack(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	s.run(t, func(ctx context.Context, e envelope.Envelope) error {
		mu.Lock()
		seen[e.ID] = true
		mu.Unlock()
		return nil
	}, fabric.ConsumerOptions{})
	ctx := context.Background()
	// Publish continuously while the broker drops every connection twice.
	var sent []string
	var lost int
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				pubDone <- nil
				return
			default:
			}
			e := submitted(t, "org-a", "ok")
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := s.pub.Publish(cctx, e)
			cancel()
			switch {
			case err == nil:
				sent = append(sent, e.ID)
			case errors.Is(err, fabric.ErrConnectionLost):
				lost++ // not confirmed: the caller knows it must resend
			default:
				pubDone <- err
				return
			}
		}
	}()
	for round := 0; round < 2; round++ {
		time.Sleep(300 * time.Millisecond)
		before := s.conn.Connects()
		if n := s.vh.CloseConnections(t); n == 0 {
			t.Fatal("close_all_connections closed nothing")
		}
		fabrictest.Eventually(t, 10*time.Second, "reconnect", func() bool { return s.conn.Connects() > before })
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatalf("publish during reconnects: %v", err)
	}
	if len(sent) == 0 {
		t.Fatal("nothing confirmed")
	}
	fabrictest.Eventually(t, 20*time.Second, "every confirmed message consumed after reconnects", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range sent {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	t.Logf("confirmed %d, reported lost (unconfirmed) %d, reconnects %d", len(sent), lost, s.conn.Connects()-1)
}

func TestTopologyIsRedeclaredOnReconnect(t *testing.T) {
	s := newStack(t)
	// Delete the queue behind the fabric's back, then drop the connection:
	// the reconnect hook must declare it again.
	ch, err := s.conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(testQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	before := s.conn.Connects()
	s.vh.CloseConnections(t)
	fabrictest.Eventually(t, 10*time.Second, "reconnect", func() bool { return s.conn.Connects() > before })
	if err := s.pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
		t.Fatalf("publish after reconnect (queue should be back): %v", err)
	}
}

func TestGracefulShutdownFinishesInFlightWork(t *testing.T) {
	s := newStack(t)
	var started, finished atomic.Int32
	c, err := fabric.NewConsumer(s.conn, s.pub, s.reg, s.spec, func(ctx context.Context, e envelope.Envelope) error {
		started.Add(1)
		time.Sleep(300 * time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		finished.Add(1)
		return nil
	}, fabric.ConsumerOptions{Prefetch: 4, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := s.pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	fabrictest.Eventually(t, 5*time.Second, "handlers started", func() bool { return started.Load() >= 4 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil on cancellation", err)
	}
	if started.Load() != finished.Load() {
		t.Fatalf("started %d, finished %d: shutdown cut handlers off", started.Load(), finished.Load())
	}
	fabrictest.Eventually(t, 5*time.Second, "remaining messages back in queue", func() bool {
		return s.depth(t, testQueue) == 20-int(finished.Load())
	})
}

func TestDeliveryLimitBackstopDeadLetters(t *testing.T) {
	// A consumer process that dies on a message before acking it (simulated
	// by nacking with requeue from a raw channel) must not loop forever: the
	// queue's explicit x-delivery-limit moves it to the DLQ.
	s := newStack(t)
	if err := s.pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
		t.Fatal(err)
	}
	ch, err := s.conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for i := 0; i < topology.DefaultDeliveryLimit+5; i++ {
		d, ok, err := ch.Get(testQueue, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		d.Nack(false, true)
	}
	fabrictest.Eventually(t, 5*time.Second, "message dead-lettered by delivery limit", func() bool { return s.depth(t, s.spec.DLQ()) == 1 })
}

func ExampleTransient() {
	err := fabric.Transient(fmt.Errorf("smtp: %w", errors.New("connection refused")))
	fmt.Println(fabric.ClassOf(err), fabric.ClassOf(errors.New("x")))
	// Output: transient unknown
}
