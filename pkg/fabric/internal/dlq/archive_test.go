package dlq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

// TestArchiveKeepsExpiredLettersInTheLakeThenRemovesThem: retention takes
// out of the DLQ only the letters dead-lettered before the cutoff, each
// after its whole self (envelope, reason, class, attempts) went out as a
// confirmed platform.dead-letter-archived.v1 of the letter's tenant; a
// newer letter, one of no tenant and one of no readable time stay; the run
// is audited.
func TestArchiveKeepsExpiredLettersInTheLakeThenRemovesThem(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	archived := fabrictest.Observe(t, r.f.Conn, "platform.dead-letter-archived.v1")
	now := time.Now().UTC()
	old, recent, orphan, undated := submitted(t, "org-a"), submitted(t, "org-a"), submitted(t, "org-b"), submitted(t, "org-a")
	letters := []struct {
		e      envelope.Envelope
		tenant string
		at     string
	}{
		{old, "org-a", now.Add(-40 * 24 * time.Hour).Format(time.RFC3339Nano)},
		{recent, "org-a", now.Add(-time.Hour).Format(time.RFC3339Nano)},
		// Header and envelope disagree (a tenant mismatch, possibly forged):
		// the letter is no tenant's, so no tenant's partition takes it.
		{orphan, "org-a", now.Add(-40 * 24 * time.Hour).Format(time.RFC3339Nano)},
		{undated, "org-a", ""},
	}
	for _, l := range letters {
		body, err := l.e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		h := amqp.Table{wire.HeaderReason: wire.ReasonPermanent, wire.HeaderConsumer: spec.Queue,
			wire.HeaderErrorClass: "permanent", wire.HeaderError: "downstream rejected the request", wire.HeaderAttempts: int32(3)}
		if l.tenant != "" {
			h[wire.HeaderTenant] = l.tenant
		}
		if l.at != "" {
			h[wire.HeaderLastAttempt] = l.at
		}
		p, err := r.f.Pub.Send(ctx, broker.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: body, MessageID: l.e.ID, Type: l.e.Type, Headers: h})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 5*time.Second, "4 letters in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 4 })

	rep, err := r.ops.Archive(ctx, spec.Queue, now.Add(-30*24*time.Hour), "test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Succeeded != 1 || len(rep.Matched) != 2 || rep.Failed != 1 {
		t.Errorf("archive report = %+v, want the old letter archived and the orphan failed (kept)", rep)
	}
	got := archived.Next(t, "the archived letter", func(e envelope.Envelope) bool { return true })
	var p struct {
		Queue, MessageID, Reason, ErrorClass string
		Attempts                             int
		Letter                               envelope.Envelope
	}
	if err := json.Unmarshal(got.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if got.TenantID != "org-a" || p.MessageID != old.ID || p.Queue != spec.Queue || p.Reason != wire.ReasonPermanent ||
		p.ErrorClass != "permanent" || p.Attempts != 3 || p.Letter.ID != old.ID || string(p.Letter.Payload) != string(old.Payload) {
		t.Errorf("archived = tenant %s %+v, want org-a's letter %s whole", got.TenantID, p, old.ID)
	}
	fabrictest.Eventually(t, 5*time.Second, "3 letters left in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 3 })
	left, err := r.ops.List(ctx, spec.Queue, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, l := range left {
		ids[l.MessageID] = true
	}
	if !ids[recent.ID] || !ids[orphan.ID] || !ids[undated.ID] || ids[old.ID] {
		t.Errorf("letters left = %v, want the recent, the orphan and the undated ones", ids)
	}
	audit, err := r.ops.Audit(ctx, spec.Queue, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Action != "archive" || audit[0].Operator != "retention" || audit[0].Succeeded != 1 {
		t.Errorf("audit = %+v, want one archive run by retention", audit)
	}
}
