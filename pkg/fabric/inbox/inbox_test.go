package inbox_test

import (
	"context"
	"encoding/json"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
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
