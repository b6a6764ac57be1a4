package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/ops"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var env = fabrictest.EnvFrom(os.Getenv)

var spec = topology.Consumer{Queue: "test.ops", Service: "test",
	RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
	Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}

func submitted(t testing.TB, tenant, protocol string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", tenant, "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": protocol,
		"serviceId": "svc", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "cpf-123.456.789-00", "submittedAt": "2026-11-30T10:00:00Z",
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestStatusAndJourneyAreTheTenants runs a consumer that dead-letters
// protocol AGR-FAIL and commits the rest, with an outbox beside it, and
// reads the service's status and a journey as two tenants' operators.
func TestStatusAndJourneyAreTheTenants(t *testing.T) {
	ctx := context.Background()
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{})
	f.Run(t, spec, in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		var p struct{ Protocol string }
		_ = json.Unmarshal(e.Payload, &p)
		if p.Protocol == "AGR-FAIL" {
			return fabric.Permanent(errors.New("downstream rejected the request"))
		}
		return nil
	}), fabric.ConsumerOptions{})
	svc := ops.Service{Name: "test", Schema: s.Name, Queues: []string{spec.Queue}, Relay: true, Pool: s.Pool,
		Broker: f.Conn, Letters: dlq.New(f.Conn, f.Pub, f.Reg, s.Pool, s.Name)}

	// One correlation in org-a: a committed event, its dead-lettered
	// sibling, and an event caused by the first, still in the outbox (no
	// relay runs). The same correlation id in org-b: committed too.
	ok := submitted(t, "org-a", "AGR-OK")
	bad := submitted(t, "org-a", "AGR-FAIL")
	bad.CorrelationID = ok.CorrelationID
	other := submitted(t, "org-b", "AGR-OK")
	other.CorrelationID = ok.CorrelationID
	for _, e := range []envelope.Envelope{ok, bad, other} {
		if err := f.Pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	child := submitted(t, "org-a", "AGR-CHILD")
	child.CorrelationID, child.CausationID = ok.CorrelationID, ok.ID
	ob := outbox.New(f.Reg)
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Enqueue(ctx, tx, outbox.Item{Envelope: child, Aggregate: outbox.Aggregate{Type: "request", ID: "r1"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "one letter in the DLQ", func() bool { return f.Depth(t, spec.DLQ()) == 1 })
	fabrictest.Eventually(t, 10*time.Second, "two events committed", func() bool {
		var n int
		_ = s.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_message`).Scan(&n)
		return n == 2
	})

	a, err := svc.Status(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Queues) != 1 || a.Queues[0].Queue != spec.Queue || a.Queues[0].Consumers < 1 || a.Queues[0].DeadLetters != 1 ||
		a.Queues[0].OldestDeadLetterSeconds == nil || a.Queues[0].Error != "" {
		t.Errorf("org-a status = %+v", a.Queues)
	}
	if a.Outbox == nil || a.Outbox.Pending != 1 || a.Outbox.OldestPendingSeconds == nil {
		t.Errorf("org-a outbox = %+v, want 1 pending", a.Outbox)
	}
	b, err := svc.Status(ctx, "org-b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Queues[0].DeadLetters != 0 || b.Queues[0].OldestDeadLetterSeconds != nil || b.Outbox.Pending != 0 {
		t.Errorf("org-b sees org-a's letters or backlog: %+v %+v", b.Queues, b.Outbox)
	}

	j, err := svc.Journey(ctx, "org-a", ok.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Emitted) != 1 || j.Emitted[0].ID != child.ID || j.Emitted[0].CausationID != ok.ID || j.Emitted[0].PublishedAt != nil {
		t.Errorf("emitted = %+v, want the child, caused by %s, pending", j.Emitted, ok.ID)
	}
	if len(j.Consumed) != 1 || j.Consumed[0].EventID != ok.ID || j.Consumed[0].Consumer != spec.Queue {
		t.Errorf("consumed = %+v, want org-a's committed event only", j.Consumed)
	}
	if len(j.DeadLetters) != 1 || j.DeadLetters[0].MessageID != bad.ID || j.DeadLetters[0].CorrelationID != ok.CorrelationID {
		t.Errorf("dead letters = %+v, want %s", j.DeadLetters, bad.ID)
	}
	jb, err := svc.Journey(ctx, "org-b", ok.CorrelationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(jb.Emitted) != 0 || len(jb.DeadLetters) != 0 || len(jb.Consumed) != 1 || jb.Consumed[0].EventID != other.ID {
		t.Errorf("org-b journey = %+v, want its own committed event only", jb)
	}
}

func TestHandlerAdmitsOperatorsOfATenantOnly(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(context.Background(), keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	// Mounted as the host mounts it: behind the verifier, which puts the
	// token's claims where the handler reads them.
	h := auth.NewVerifier(set, auth.DevIssuer).Require()(ops.Handler(ops.Service{Name: "test"}))
	for _, tc := range []struct {
		name   string
		claims *auth.Claims
		path   string
		want   int
	}{
		{"no token", nil, "/v1/ops/status", http.StatusUnauthorized},
		{"attendant", &auth.Claims{Subject: "a", TenantID: "org-a", Roles: []string{auth.RoleAttendant}}, "/v1/ops/status", http.StatusForbidden},
		// The verifier refuses a token that names no tenant before the
		// handler sees it.
		{"operator without tenant", &auth.Claims{Subject: "a", Roles: []string{auth.RoleOperator}}, "/v1/ops/journeys/x", http.StatusUnauthorized},
		{"unknown route", &auth.Claims{Subject: "a", TenantID: "org-a", Roles: []string{auth.RoleOperator}}, "/v1/ops/nothing", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.claims != nil {
				token, err := keys.Mint(*tc.claims, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s = %d %s, want %d problem", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.want)
			}
		})
	}
}
