package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/pipetx"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var env = fabrictest.EnvFrom(os.Getenv)

var spec = topology.Consumer{Queue: "test.inbox", Service: "test",
	RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
	Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}

func submitted(t testing.TB, tenantID, serviceID string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", tenantID, "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": serviceID, "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z",
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestPayloadHashIgnoresWhitespace(t *testing.T) {
	a := inbox.PayloadHash([]byte(`{"a": 1, "b": [1, 2]}`))
	b := inbox.PayloadHash([]byte(`{"a":1,"b":[1,2]}`))
	c := inbox.PayloadHash([]byte(`{"a":2,"b":[1,2]}`))
	if string(a) != string(b) || string(a) == string(c) {
		t.Fatalf("hashes: %x %x %x", a, b, c)
	}
}

// TestDuplicatesAreSkippedConflictsDeadLettered sends one event three
// times (same bytes), then the same id with another payload and with
// another tenant. The effect runs once; the two forgeries go to the DLQ
// with reason INBOX_CONFLICT and leave security events.
func TestDuplicatesAreSkippedConflictsDeadLettered(t *testing.T) {
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL, tenant text)`); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{})
	f.Run(t, spec, in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		calls.Add(1)
		var tenantSetting string
		if err := tx.QueryRow(ctx, `SELECT current_setting('app.tenant_id', true)`).Scan(&tenantSetting); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO effect (event_id, tenant) VALUES ($1, $2)`, e.ID, tenantSetting)
		return err
	}), fabric.ConsumerOptions{Concurrency: 1})

	orig := submitted(t, "org-a", "alvara")
	for i := 0; i < 3; i++ {
		if err := f.Pub.Publish(ctx, orig); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 10*time.Second, "first effect", func() bool { return calls.Load() >= 1 })
	otherPayload := orig
	otherPayload.Payload, _ = json.Marshal(map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": "forged", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
	otherTenant := orig
	otherTenant.TenantID = "org-b"
	for _, e := range []envelope.Envelope{otherPayload, otherTenant} {
		if err := f.Pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	var dead []string
	fabrictest.Eventually(t, 10*time.Second, "two forgeries dead-lettered", func() bool {
		for _, d := range f.Drain(t, spec.DLQ()) {
			dead = append(dead, d.Headers[wire.HeaderReason].(string))
		}
		return len(dead) == 2
	})
	for _, r := range dead {
		if r != wire.ReasonInboxConflict {
			t.Errorf("dead-letter reason = %s, want %s", r, wire.ReasonInboxConflict)
		}
	}
	var effects, security int
	var tenantSeen string
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), max(tenant) FROM effect`).Scan(&effects, &tenantSeen); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_security_event WHERE event_id = $1`, orig.ID).Scan(&security); err != nil {
		t.Fatal(err)
	}
	if effects != 1 || calls.Load() != 1 {
		t.Errorf("effects %d, handler calls %d; want 1 and 1", effects, calls.Load())
	}
	if tenantSeen != "org-a" {
		t.Errorf("app.tenant_id in the handler's transaction = %q, want org-a", tenantSeen)
	}
	if security != 2 {
		t.Errorf("security events = %d, want 2", security)
	}
}

func TestRetentionDeletesOldClaims(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{})
	for i := 0; i < 12; i++ {
		e := submitted(t, "org-a", "x")
		err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			first, err := in.Claim(ctx, tx, e)
			if err == nil && !first {
				t.Errorf("first claim of %s reported as duplicate", e.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE inbox_message SET received_at = now() - interval '40 days' WHERE event_id IN (SELECT event_id FROM inbox_message LIMIT 10)`); err != nil {
		t.Fatal(err)
	}
	n, err := in.DeleteOlderThan(ctx, 30*24*time.Hour, 3)
	if err != nil || n != 10 {
		t.Fatalf("DeleteOlderThan = %d, %v; want 10", n, err)
	}
}

// TestBatchKeepsEachMessagesFate queues messages before the consumer
// starts, so they arrive in batches: one transaction per batch, yet each
// message keeps its own tenant setting, its own failure class and its own
// rollback; duplicates in the same batch run once; a reused id is refused.
func TestBatchKeepsEachMessagesFate(t *testing.T) {
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL, tenant text, service text)`); err != nil {
		t.Fatal(err)
	}
	var events []envelope.Envelope
	for i := range 40 {
		events = append(events, submitted(t, []string{"org-a", "org-b"}[i%2], "ok"))
	}
	invalid := submitted(t, "org-a", "invalid")
	flaky := submitted(t, "org-b", "transient-once")
	// Its handler succeeds but leaves a deferred write that fails: the
	// failure is its own, wherever the write travels.
	deferredFails := submitted(t, "org-a", "deferred-write-fails")
	forged := events[3]
	forged.Payload, _ = json.Marshal(map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": "forged", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
	queued := append(append([]envelope.Envelope{}, events[:20]...), invalid, events[5], flaky, forged, deferredFails)
	queued = append(queued, events[20:]...)
	publishAll(t, f, queued)

	metrics, scrape := promMetrics(t)
	in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{Metrics: metrics})
	var flakyCalls atomic.Int32
	h := in.BatchHandler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		var p struct{ ServiceID string }
		_ = json.Unmarshal(e.Payload, &p)
		if _, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, current_setting('app.tenant_id', true), $2)`, e.ID, p.ServiceID); err != nil {
			return err
		}
		switch {
		case p.ServiceID == "invalid":
			return fabric.Invalid(errors.New("no such form"))
		case p.ServiceID == "transient-once" && flakyCalls.Add(1) == 1:
			return fabric.Transient(errors.New("blip"))
		case p.ServiceID == "deferred-write-fails":
			tx.(pipetx.Deferrer).Defer(`SELECT 1/0`)
		}
		return nil
	})
	biggest := runBatched(t, f, h, metrics)

	var dead = map[string]string{}
	fabrictest.Eventually(t, 15*time.Second, "every message settled", func() bool {
		for _, d := range f.Drain(t, spec.DLQ()) {
			dead[d.MessageId+"/"+d.Headers[wire.HeaderReason].(string)] = d.Headers[wire.HeaderReason].(string)
		}
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_message WHERE consumer = $1`, spec.Queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		// 40 + the flaky one; invalid, forged and the failing write dead-lettered
		return n == len(events)+1 && len(dead) == 3
	})
	if b := biggest.Load(); b < 2 {
		t.Fatalf("largest batch = %d: the test never exercised a batch", b)
	}
	// Operators see the batching: the histogram's sum exceeds its count.
	if sum, count := scrape("fabric_consumer_batch_size_sum"), scrape("fabric_consumer_batch_size_count"); count == 0 || sum <= count {
		t.Errorf("fabric_consumer_batch_size sum %v, count %v: want batches of more than one message recorded", sum, count)
	}
	// The failing messages sent their batches down the savepoint path.
	if n := scrape("fabric_consumer_batch_retried_total"); n < 1 {
		t.Errorf("fabric_consumer_batch_retried_total = %v, want at least 1", n)
	}
	if _, ok := dead[invalid.ID+"/"+wire.ReasonHandlerInvalid]; !ok {
		t.Errorf("invalid message not dead-lettered as %s: %v", wire.ReasonHandlerInvalid, dead)
	}
	if _, ok := dead[deferredFails.ID+"/"+wire.ReasonRetriesExhausted]; !ok {
		t.Errorf("message whose deferred write fails not dead-lettered as %s: %v", wire.ReasonRetriesExhausted, dead)
	}
	if _, ok := dead[forged.ID+"/"+wire.ReasonInboxConflict]; !ok {
		t.Errorf("reused id not dead-lettered as %s: %v", wire.ReasonInboxConflict, dead)
	}
	rows, err := s.Pool.Query(ctx, `SELECT event_id::text, tenant, service FROM effect`)
	if err != nil {
		t.Fatal(err)
	}
	effects := map[string]int{}
	tenantOf := map[string]string{}
	for rows.Next() {
		var id, tn, svc string
		if err := rows.Scan(&id, &tn, &svc); err != nil {
			t.Fatal(err)
		}
		effects[id]++
		tenantOf[id] = tn
		if svc == "invalid" || svc == "forged" || svc == "deferred-write-fails" {
			t.Errorf("effect of a refused message %s (%s) was committed", id, svc)
		}
	}
	for _, e := range append(events, flaky) {
		if effects[e.ID] != 1 || tenantOf[e.ID] != e.TenantID {
			t.Errorf("event %s: %d effects under app.tenant_id %q, want 1 under %q", e.ID, effects[e.ID], tenantOf[e.ID], e.TenantID)
		}
	}
	// At least twice: one failure, one retry. A third run happens when
	// its retry shares a batch with the failing deferred write's retry:
	// the batch runs again one message at a time, and only one run of it
	// commits (its effect is counted once above).
	if n := flakyCalls.Load(); n < 2 || n > 3 {
		t.Errorf("flaky message handled %d times, want 2 or 3 (one failure, one retry, maybe rerun in its batch)", n)
	}
}

// TestCleanBatchRunsTogether: a batch in which nothing fails runs without
// savepoints, one transaction and one statement of claims for the whole
// batch. A row written in a savepoint carries the subtransaction's own
// xid, so the inbox rows of a batch share one xmin only when the batch ran
// together. A redelivery inside a batch is skipped there too.
func TestCleanBatchRunsTogether(t *testing.T) {
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL, tenant text)`); err != nil {
		t.Fatal(err)
	}
	var events []envelope.Envelope
	for i := range 40 {
		events = append(events, submitted(t, []string{"org-a", "org-b", "org-b"}[i%3], "ok"))
	}
	queued := append(append([]envelope.Envelope{}, events[:10]...), events[4]) // redelivered
	queued = append(queued, events[10:]...)
	publishAll(t, f, queued)
	metrics, scrape := promMetrics(t)
	in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{Metrics: metrics})
	h := in.BatchHandler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, current_setting('app.tenant_id', true))`, e.ID)
		return err
	})
	var batches atomic.Int32
	biggest := runBatched(t, f, func(ctx context.Context, b []fabric.Received) []error {
		batches.Add(1)
		return h(ctx, b)
	}, metrics)
	fabrictest.Eventually(t, 15*time.Second, "every message handled", func() bool {
		return scrape("fabric_consumer_processed_total") == float64(len(queued))
	})
	if b := biggest.Load(); b < 2 {
		t.Fatalf("largest batch = %d: the test never exercised a batch", b)
	}
	var claims, xids, effects, wrongTenant int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM inbox_message WHERE consumer = $1`,
		spec.Queue).Scan(&claims, &xids); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE e.tenant IS DISTINCT FROM i.tenant_id)
		FROM effect e LEFT JOIN inbox_message i ON i.event_id = e.event_id`).Scan(&effects, &wrongTenant); err != nil {
		t.Fatal(err)
	}
	if claims != len(events) || effects != len(events) || wrongTenant != 0 {
		t.Errorf("%d claims, %d effects (%d under another tenant), want %d and %d under each message's tenant",
			claims, effects, wrongTenant, len(events), len(events))
	}
	if n := batches.Load(); xids > int(n) {
		t.Errorf("%d transaction ids among the claims of %d batches: batches ran in savepoints", xids, n)
	}
	if n := scrape("fabric_consumer_batch_retried_total"); n != 0 {
		t.Errorf("fabric_consumer_batch_retried_total = %v, want 0: nothing failed", n)
	}
	if n := scrape("fabric_consumer_duplicates_total"); n != 1 {
		t.Errorf("fabric_consumer_duplicates_total = %v, want 1 (the redelivery)", n)
	}
}

// promMetrics returns fabric metrics and a reader of their Prometheus
// exposition: the sum of every series whose name is name.
func promMetrics(t *testing.T) (*telemetry.Metrics, func(name string) float64) {
	t.Helper()
	mp, handler, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	return metrics, func(name string) float64 {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		total := 0.0
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && (f[0] == name || strings.HasPrefix(f[0], name+"{")) {
				v, _ := strconv.ParseFloat(f[1], 64)
				total += v
			}
		}
		return total
	}
}

// runBatched runs h on spec's queue, one handler goroutine, and returns
// the largest batch it got. Messages are queued before it starts; while
// the first batch is busy the rest of the queue moves into the client
// (prefetch 64 holds it all), so the next calls get real batches.
func runBatched(t *testing.T, f *fabrictest.Fabric, h fabric.BatchHandler, metrics *telemetry.Metrics) *atomic.Int32 {
	t.Helper()
	var calls, biggest atomic.Int32
	f.RunBatch(t, spec, func(ctx context.Context, b []fabric.Received) []error {
		if calls.Add(1) == 1 {
			awaitMoved(ctx, f, spec.Queue)
		}
		for n := int32(len(b)); ; {
			cur := biggest.Load()
			if n <= cur || biggest.CompareAndSwap(cur, n) {
				break
			}
		}
		return h(ctx, b)
	}, fabric.ConsumerOptions{Concurrency: 1, Prefetch: 64, MaxBatch: 16, Metrics: metrics})
	return &biggest
}

// awaitMoved holds the first batch until the rest of queue has moved into
// the client: until the queue has no ready message left, or 5 s have
// passed (then the caller's check of the largest batch tells). The broker
// announces no delivery, so the ready count is polled. It reports nothing
// itself: it runs in the consumer's goroutine, where t must not be used.
func awaitMoved(ctx context.Context, f *fabrictest.Fabric, queue string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ch, err := f.Conn.Channel(ctx)
	if err != nil {
		return
	}
	defer ch.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil || q.Messages == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// publishAll publishes envelopes in order.
func publishAll(t *testing.T, f *fabrictest.Fabric, envelopes []envelope.Envelope) {
	t.Helper()
	for _, e := range envelopes {
		if err := f.Pub.Publish(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeferredWriteFailureIsItsMessagesOwn: a handler that succeeds but
// leaves a deferred write that fails (pipetx) fails its own message,
// wherever it sits in the batch, and every other message commits once.
// Without the flush after each handler on the one-at-a-time path, the
// failure lands on the next message's claim, or on the batch's COMMIT.
func TestDeferredWriteFailureIsItsMessagesOwn(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	in := inbox.New(s.Pool, s.Name, "test.deferred", inbox.Options{})
	for _, bad := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("failing message at %d of 4", bad), func(t *testing.T) {
			batch := make([]fabric.Received, 4)
			for i := range batch {
				batch[i] = fabric.Received{Ctx: ctx, Env: submitted(t, "org-a", fmt.Sprintf("m%d", i))}
			}
			h := in.BatchHandler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
				if _, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1)`, e.ID); err != nil {
					return err
				}
				if e.ID == batch[bad].Env.ID {
					return tx.(pipetx.Deferrer).Defer(`SELECT 1/0`)
				}
				return nil
			})
			errs := h(ctx, batch)
			for i, err := range errs {
				if (i == bad) != (err != nil) {
					t.Errorf("message %d: error %v (the failing write is message %d's)", i, err, bad)
				}
			}
			var deferred *pipetx.DeferredError
			if !errors.As(errs[bad], &deferred) || fabric.ClassOf(errs[bad]) != fabric.ClassTransient {
				t.Errorf("message %d: error %v, want a transient *pipetx.DeferredError", bad, errs[bad])
			}
			for i, m := range batch {
				var n int
				if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM effect WHERE event_id = $1`, m.Env.ID).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: 0, false: 1}[i == bad]; n != want {
					t.Errorf("message %d: %d effects, want %d", i, n, want)
				}
			}
		})
	}
}
