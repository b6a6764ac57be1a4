package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
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
			dead = append(dead, d.Headers[fabric.HeaderReason].(string))
		}
		return len(dead) == 2
	})
	for _, r := range dead {
		if r != fabric.ReasonInboxConflict {
			t.Errorf("dead-letter reason = %s, want %s", r, fabric.ReasonInboxConflict)
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
	forged := events[3]
	forged.Payload, _ = json.Marshal(map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": "forged", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
	queued := append(append([]envelope.Envelope{}, events[:20]...), invalid, events[5], flaky, forged)
	queued = append(queued, events[20:]...)
	for _, e := range queued {
		if err := f.Pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}

	in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{})
	var flakyCalls, biggest atomic.Int32
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
		}
		return nil
	})
	mp, scrape, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	f.RunBatch(t, spec, func(ctx context.Context, b []fabric.Received) []error {
		if calls.Add(1) == 1 {
			// While the first batch is busy, the rest of the queue moves
			// into the client (prefetch 64 holds it all): the next calls
			// get real batches. The queue's ready count says when.
			// (Read here without t: this is the consumer's goroutine.)
			ch, err := f.Conn.Channel(ctx)
			for deadline := time.Now().Add(5 * time.Second); err == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				q, qerr := ch.QueueDeclarePassive(spec.Queue, true, false, false, false, nil)
				if qerr != nil || q.Messages == 0 {
					break
				}
			}
			if err == nil {
				ch.Close()
			}
		}
		for n := int32(len(b)); ; {
			cur := biggest.Load()
			if n <= cur || biggest.CompareAndSwap(cur, n) {
				break
			}
		}
		return h(ctx, b)
	}, fabric.ConsumerOptions{Concurrency: 1, Prefetch: 64, MaxBatch: 16, Metrics: metrics})

	var dead = map[string]string{}
	fabrictest.Eventually(t, 15*time.Second, "every message settled", func() bool {
		for _, d := range f.Drain(t, spec.DLQ()) {
			dead[d.MessageId+"/"+d.Headers[fabric.HeaderReason].(string)] = d.Headers[fabric.HeaderReason].(string)
		}
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_message WHERE consumer = $1`, spec.Queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(events)+1 && len(dead) == 2 // 40 + the flaky one; invalid and forged dead-lettered
	})
	if b := biggest.Load(); b < 2 {
		t.Fatalf("largest batch = %d: the test never exercised a batch", b)
	}
	// Operators see the batching: the histogram's sum exceeds its count.
	rec := httptest.NewRecorder()
	scrape.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var sum, count float64
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && strings.HasPrefix(f[0], "fabric_consumer_batch_size_sum"):
			sum, _ = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && strings.HasPrefix(f[0], "fabric_consumer_batch_size_count"):
			count, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if count == 0 || sum <= count {
		t.Errorf("fabric_consumer_batch_size sum %v, count %v: want batches of more than one message recorded", sum, count)
	}
	if _, ok := dead[invalid.ID+"/"+fabric.ReasonHandlerInvalid]; !ok {
		t.Errorf("invalid message not dead-lettered as %s: %v", fabric.ReasonHandlerInvalid, dead)
	}
	if _, ok := dead[forged.ID+"/"+fabric.ReasonInboxConflict]; !ok {
		t.Errorf("reused id not dead-lettered as %s: %v", fabric.ReasonInboxConflict, dead)
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
		if svc == "invalid" || svc == "forged" {
			t.Errorf("effect of a refused message %s (%s) was committed", id, svc)
		}
	}
	for _, e := range append(events, flaky) {
		if effects[e.ID] != 1 || tenantOf[e.ID] != e.TenantID {
			t.Errorf("event %s: %d effects under app.tenant_id %q, want 1 under %q", e.ID, effects[e.ID], tenantOf[e.ID], e.TenantID)
		}
	}
	if flakyCalls.Load() != 2 {
		t.Errorf("flaky message handled %d times, want 2 (one failure, one retry)", flakyCalls.Load())
	}
}
