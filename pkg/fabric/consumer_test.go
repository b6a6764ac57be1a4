package fabric_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
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
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

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
	// One handler at a time: the marker below relies on FIFO handling.
	s.run(t, behaviourHandler(&calls), fabric.ConsumerOptions{UnknownRetries: 1, Concurrency: 1})
	cases := []struct {
		marker    string
		wantCalls int32
		wantDLQ   bool
		reason    string
		class     string
	}{
		{"ok", 1, false, "", ""},
		{"transient-once", 2, false, "", ""},
		{"transient", 4, true, wire.ReasonRetriesExhausted, "transient"}, // 1 + 3 tiers
		{"permanent", 1, true, wire.ReasonPermanent, "permanent"},
		{"invalid", 1, true, wire.ReasonHandlerInvalid, "invalid"},
		{"unknown", 2, true, wire.ReasonRetriesExhausted, "unknown"}, // 1 + UnknownRetries
		{"panic", 2, true, wire.ReasonRetriesExhausted, "unknown"},
	}
	ids := map[string]string{}
	for _, c := range cases {
		e := submitted(t, "org-a", c.marker)
		ids[c.marker] = e.ID
		if err := s.Pub.Publish(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	var dead []amqp.Delivery
	fabrictest.Eventually(t, 10*time.Second, "5 dead letters", func() bool {
		dead = append(dead, s.dlq(t)...)
		return len(dead) >= 5
	})
	// Five letters do not prove the cases are final: a message wrongly
	// still in a retry tier would be called again, or dead-lettered twice,
	// later. A marker sent now along the longest path (every tier, then the
	// DLQ) stays behind anything already on its way, since each queue is
	// FIFO and one handler runs at a time; once the marker is a dead letter,
	// whatever the cases were going to do has been done.
	marker := submitted(t, "org-a", "transient")
	if err := s.Pub.Publish(context.Background(), marker); err != nil {
		t.Fatal(err)
	}
	byID := map[string]amqp.Delivery{}
	fabrictest.Eventually(t, 10*time.Second, "the marker dead-lettered after every retry tier", func() bool {
		dead = append(dead, s.dlq(t)...)
		for _, d := range dead {
			byID[d.MessageId] = d
		}
		_, ok := byID[marker.ID]
		return ok
	})
	delete(byID, marker.ID)
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
			if h[wire.HeaderReason] != c.reason || h[wire.HeaderErrorClass] != c.class ||
				h[wire.HeaderEventID] != ids[c.marker] || h[wire.HeaderConsumer] != testQueue ||
				wire.Attempts(h) != int(c.wantCalls) || h[wire.HeaderError] == "" || h[wire.HeaderLastAttempt] == "" ||
				h[wire.HeaderOrigExchange] != topology.EventsExchange || h[wire.HeaderOrigRouting] != "request.submitted.v1" {
				t.Errorf("dead-letter headers = %v", h)
			}
		})
	}
	if n := len(dead) - 1; n != 5 {
		t.Errorf("DLQ holds %d letters besides the marker, want 5", n)
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
	// A type the catalog knows, under another type's routing key: what a
	// publisher allowed only request.submitted.v1 could send.
	relabelled, err := envelope.New("citizen.updated.v1", "org-a", "request", map[string]any{"citizenId": "c-1"})
	if err != nil {
		t.Fatal(err)
	}

	raw := func(e envelope.Envelope, tenantHeader string) broker.Message {
		b, _ := e.Encode()
		h := amqp.Table{}
		if tenantHeader != "" {
			h[wire.HeaderTenant] = tenantHeader
		}
		return broker.Message{Exchange: topology.EventsExchange, RoutingKey: "request.submitted.v1", Body: b, MessageID: e.ID, Type: e.Type, Headers: h}
	}
	cases := []struct {
		name   string
		msg    broker.Message
		reason string
	}{
		{"not json", broker.Message{Exchange: topology.EventsExchange, RoutingKey: "request.submitted.v1", Body: []byte("{oops"), MessageID: "junk-1"}, wire.ReasonInvalidEnvelope},
		{"unknown type", raw(unknown, "org-a"), wire.ReasonUnknownType},
		{"schema", raw(schemaBad, "org-a"), wire.ReasonSchema},
		{"no tenant", raw(noTenant, ""), wire.ReasonTenantMissing},
		{"tenant mismatch", raw(submitted(t, "org-a", "ok"), "org-b"), wire.ReasonTenantMismatch},
		{"depth", raw(deep, "org-a"), wire.ReasonDepth},
		{"cycle", raw(cyclic, "org-a"), wire.ReasonCycle},
		{"type not its routing key", raw(relabelled, "org-a"), wire.ReasonTypeNotRouted},
	}
	for _, c := range cases {
		p, err := s.Pub.Send(context.Background(), c.msg)
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
		got[d.MessageId] = d.Headers[wire.HeaderReason].(string)
		if wire.Attempts(d.Headers) != 1 || d.Headers[wire.HeaderErrorClass] != "invalid" {
			t.Errorf("%s: attempts %d class %v, want 1 invalid (no retries)", d.MessageId, wire.Attempts(d.Headers), d.Headers[wire.HeaderErrorClass])
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
	if err := s.Pub.Publish(ctx, submitted(t, "org-a", "poison")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if err := s.Pub.Publish(ctx, submitted(t, "org-a", "ok")); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 10*time.Second, "50 good messages past the poison one", func() bool { return good.Load() == 50 })
	var dead []amqp.Delivery
	fabrictest.Eventually(t, 10*time.Second, "poison in DLQ", func() bool { dead = append(dead, s.dlq(t)...); return len(dead) == 1 })
	if s.Depth(t, testQueue) != 0 {
		t.Errorf("main queue not empty: nothing may requeue forever")
	}
}

func TestCompetingConsumersShareWithoutDuplicates(t *testing.T) {
	s := newStack(t)
	var mu sync.Mutex
	seen := map[string]int{}
	per := [2]atomic.Int32{}
	for i := 0; i < 2; i++ {
		s.run(t, func(ctx context.Context, e envelope.Envelope) error {
			mu.Lock()
			seen[e.ID]++
			mu.Unlock()
			per[i].Add(1)
			return nil
		}, fabric.ConsumerOptions{Prefetch: 10, Concurrency: 2})
	}
	// Both subscribed before the first message: the queue then hands
	// messages to its consumers in turn.
	fabrictest.Eventually(t, 5*time.Second, "two consumers on the queue", func() bool { return consumers(t, s) == 2 })
	const n = 400
	var pend []*broker.Pending
	for i := 0; i < n; i++ {
		p, err := s.Pub.PublishAsync(context.Background(), submitted(t, "org-a", "ok"))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	waitConfirmed(t, pend)
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

// consumers returns how many consumers the stack's queue counts.
func consumers(t *testing.T, s *stack) int {
	t.Helper()
	ch, err := s.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(testQueue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", testQueue, err)
	}
	return q.Consumers
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
	pub, err := broker.NewPublisher(s.Conn, s.Reg, broker.PublisherOptions{Tracer: tp, Metrics: metrics})
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
	for _, want := range []string{"fabric_consumer_processed_total", `consumer="` + testQueue + `"`, "fabric_consumer_duration_seconds", "fabric_consumer_lag_seconds", "fabric_publisher_confirmed_total", "fabric_consumer_queue_depth", "fabric_consumer_retry_depth"} {
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
	var confirmed atomic.Int32 // read while the publisher runs; sent is read after it stopped
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	var pubErr atomic.Value // the error that stopped the publisher, for the waits below
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
			err := s.Pub.Publish(cctx, e)
			cancel()
			switch {
			case err == nil:
				sent = append(sent, e.ID)
				confirmed.Add(1)
			case errors.Is(err, broker.ErrConnectionLost):
				lost++ // not confirmed: the caller knows it must resend
			default:
				pubErr.Store(err)
				pubDone <- err
				return
			}
		}
	}()
	// Each fault and the end wait until the publisher has confirmed more
	// messages since the last one: publishing goes on across every reconnect.
	publishing := func(what string) {
		t.Helper()
		from := confirmed.Load()
		fabrictest.Eventually(t, 20*time.Second, what, func() bool {
			if err, _ := pubErr.Load().(error); err != nil {
				t.Fatalf("%s: the publisher stopped: %v", what, err)
			}
			return confirmed.Load() >= from+20
		})
	}
	for round := 0; round < 2; round++ {
		publishing(fmt.Sprintf("20 confirms before fault %d", round+1))
		before := s.Conn.Connects()
		if n := s.Vhost.CloseConnections(t); n == 0 {
			t.Fatal("close_all_connections closed nothing")
		}
		fabrictest.Eventually(t, 10*time.Second, "reconnect", func() bool { return s.Conn.Connects() > before })
	}
	publishing("20 confirms after the last reconnect")
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
	t.Logf("confirmed %d, reported lost (unconfirmed) %d, reconnects %d", len(sent), lost, s.Conn.Connects()-1)
}

func TestTopologyIsRedeclaredOnReconnect(t *testing.T) {
	s := newStack(t)
	// Delete the queue behind the fabric's back, then drop the connection:
	// the reconnect hook must declare it again.
	ch, err := s.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(testQueue, false, false, false); err != nil {
		t.Fatal(err)
	}
	ch.Close()
	before := s.Conn.Connects()
	s.Vhost.CloseConnections(t)
	fabrictest.Eventually(t, 10*time.Second, "reconnect", func() bool { return s.Conn.Connects() > before })
	if err := s.Pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
		t.Fatalf("publish after reconnect (queue should be back): %v", err)
	}
}

func TestGracefulShutdownFinishesInFlightWork(t *testing.T) {
	s := newStack(t)
	var started, finished atomic.Int32
	inFlight := make(chan struct{}, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := broker.NewConsumer(s.Conn, s.Pub, s.Reg, s.spec, func(hctx context.Context, e envelope.Envelope) error {
		started.Add(1)
		inFlight <- struct{}{}
		<-ctx.Done() // every handler is still at work when the shutdown begins
		// Then 300 ms more of it (simulated work, not a wait for
		// anything), which the shutdown must let finish.
		select {
		case <-hctx.Done():
			return hctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		finished.Add(1)
		return nil
	}, fabric.ConsumerOptions{Prefetch: 4, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if err := s.Pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for range 4 {
		select {
		case <-inFlight:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d handlers started, want 4", started.Load())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil on cancellation", err)
	}
	if started.Load() != finished.Load() {
		t.Fatalf("started %d, finished %d: shutdown cut handlers off", started.Load(), finished.Load())
	}
	fabrictest.Eventually(t, 5*time.Second, "remaining messages back in queue", func() bool {
		return s.Depth(t, testQueue) == 20-int(finished.Load())
	})
}

func TestDeliveryLimitBackstopDeadLetters(t *testing.T) {
	// A consumer process that dies on a message before acking it (simulated
	// by nacking with requeue from a raw channel) must not loop forever: the
	// queue's explicit x-delivery-limit moves it to the DLQ.
	s := newStack(t)
	if err := s.Pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Conn.Channel(context.Background())
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
	fabrictest.Eventually(t, 5*time.Second, "message dead-lettered by delivery limit", func() bool { return s.Depth(t, s.spec.DLQ()) == 1 })
}

// TestRunReturnsOnlyAfterItsGoroutinesEnd: when Run returns, on
// cancellation or because the application closed the connection, the
// goroutines it started (queue-depth watcher, handler workers) have ended.
func TestRunReturnsOnlyAfterItsGoroutinesEnd(t *testing.T) {
	s := newStack(t)
	const watcher, workers = "broker.(*Consumer).watchDepth", "broker.(*Consumer).session"
	var handled atomic.Int32
	h := func(ctx context.Context, e envelope.Envelope) error { handled.Add(1); return nil }
	start := func(conn *broker.Conn, ctx context.Context) <-chan error {
		c, err := broker.NewConsumer(conn, s.Pub, s.Reg, s.spec, h, fabric.ConsumerOptions{DepthInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		return done
	}
	running := func(what string) {
		want := handled.Load() + 1
		if err := s.Pub.Publish(context.Background(), submitted(t, "org-a", "ok")); err != nil {
			t.Fatal(err)
		}
		fabrictest.Eventually(t, 10*time.Second, what, func() bool {
			return handled.Load() >= want && fabrictest.GoroutinesIn(watcher) > 0
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := start(s.Conn, ctx)
	running("a message handled and the depth watcher running")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil on cancellation", err)
	}
	if n, m := fabrictest.GoroutinesIn(watcher), fabrictest.GoroutinesIn(workers); n != 0 || m != 0 {
		t.Fatalf("after Run returned on cancellation: %d depth watchers and %d workers still running", n, m)
	}

	// The application closes the connection: Run gives up with an error
	// while its ctx is still live.
	conn := s.Vhost.Dial(t)
	done = start(conn, context.Background())
	running("a message handled and the depth watcher running")
	conn.Close()
	if err := <-done; !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("Run = %v, want broker.ErrClosed", err)
	}
	if n, m := fabrictest.GoroutinesIn(watcher), fabrictest.GoroutinesIn(workers); n != 0 || m != 0 {
		t.Fatalf("after Run returned on a closed connection: %d depth watchers and %d workers still running", n, m)
	}
}

// syncBuffer is a log destination handlers write to concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHandlerPanicIsLoggedWithItsStack: a panicking handler, single or
// batch, is still classified unknown (retried, then dead-lettered), and the
// log shows where it panicked.
func TestHandlerPanicIsLoggedWithItsStack(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "handler", true: "batch handler"}[batch], func(t *testing.T) {
			s := newStack(t)
			var logs syncBuffer
			opts := fabric.ConsumerOptions{UnknownRetries: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
			var calls sync.Map
			if batch {
				h := behaviourHandler(&calls)
				s.RunBatch(t, s.spec, func(ctx context.Context, in []fabric.Received) []error {
					errs := make([]error, len(in))
					for i, m := range in {
						errs[i] = h(m.Ctx, m.Env)
					}
					return errs
				}, opts)
			} else {
				s.run(t, behaviourHandler(&calls), opts)
			}
			e := submitted(t, "org-a", "panic")
			if err := s.Pub.Publish(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			var dead []amqp.Delivery
			fabrictest.Eventually(t, 10*time.Second, "the panicking message dead-lettered", func() bool {
				dead = append(dead, s.dlq(t)...)
				return len(dead) == 1
			})
			if c := dead[0].Headers[wire.HeaderErrorClass]; c != string(fabric.ClassUnknown) {
				t.Errorf("class = %v, want unknown", c)
			}
			// The handler ran twice (once, one retry): both panics logged.
			var withStack int
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "handler bug") && strings.Contains(line, "behaviourHandler") &&
					strings.Contains(line, "consumer_test.go:") && strings.Contains(line, e.ID) {
					withStack++
				}
			}
			if withStack < 2 {
				t.Fatalf("%d log lines show the panic with the handler's stack, want one per call (2):\n%s", withStack, logs.String())
			}
		})
	}
}
