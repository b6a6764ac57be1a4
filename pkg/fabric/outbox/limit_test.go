package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// TestPublishLimitsRefuseOverTheRate: a limit on one event type (2/s,
// bursts of two seconds' worth as the host configures it, one Postgres
// bucket shared by two outboxes as by two instances) admits four
// submissions at once and refuses the fifth,
// transient and naming the limit, with nothing of it written; another
// producer's type is not limited; after the wait it says, the type is
// admitted again.
func TestPublishLimitsRefuseOverTheRate(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	buckets, err := ratelimit.NewPerKey(s.Pool, s.Name, "publish-type:", 1, 2, map[string]float64{"request.submitted.v1": 2})
	if err != nil {
		t.Fatal(err)
	}
	limit := outbox.Limit{Name: "type", Limiter: buckets, Key: func(e envelope.Envelope) string {
		if e.Type == "request.submitted.v1" {
			return e.Type
		}
		return ""
	}}
	instances := []*outbox.Outbox{outbox.New(reg).WithLimits(nil, limit), outbox.New(reg).WithLimits(nil, limit)}
	ctx := context.Background()
	try := func(ob *outbox.Outbox, e envelope.Envelope) error {
		return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			return ob.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e})
		})
	}
	rows := func() int {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE event_type = 'request.submitted.v1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 4 {
		if err := try(instances[i%2], submitted(t, i, "svc")); err != nil {
			t.Fatalf("submission %d within the burst: %v", i, err)
		}
	}
	err = try(instances[0], submitted(t, 5, "svc"))
	var th *outbox.ThrottledError
	if !errors.As(err, &th) || fabric.ClassOf(err) != fabric.ClassTransient ||
		th.Limit != "type" || th.Key != "request.submitted.v1" || th.RetryAfter <= 0 || th.RetryAfter > time.Second {
		t.Fatalf("the fifth submission: %v (%+v), want a transient ThrottledError by type with a wait under 1 s", err, th)
	}
	if n := rows(); n != 4 {
		t.Errorf("%d rows written, want the 4 admitted", n)
	}
	cancelled, err := envelope.New("request.cancelled.v1", "org-a", "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "previousStatus": "submitted", "cancelledBy": "c-1",
		"cancelledAt": "2026-11-30T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	if err := try(instances[1], cancelled); err != nil {
		t.Errorf("a type no limit covers: %v", err)
	}
	time.Sleep(th.RetryAfter)
	if err := try(instances[1], submitted(t, 6, "svc")); err != nil {
		t.Errorf("after the wait it named: %v", err)
	}
}
