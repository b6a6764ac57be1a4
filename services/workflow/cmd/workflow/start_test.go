package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestEventsStartWorkflows: an active start-workflow subscription opens a
// process of its definition for the event's entity, exactly once per
// event and subscription: a redelivery the inbox drops starts nothing,
// and neither does one the inbox no longer remembers (its claim deleted,
// as retention or a replay leaves it), which only the process's unique
// key stops. The entity may be the request itself or another object of
// the request's (the payload's requestId); an event with neither starts
// nothing and says why. Past the subscription's blast radius (maxAffected
// running processes it started) the start waits for an operator's
// approval, and the process exists only once it is approved.
func TestEventsStartWorkflows(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	ctx := context.Background()
	author, approver := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	subID := activate(t, url, author, approver, `{"name":"escalate stuck triage","eventTypes":["workflow.stuck.v1"],
		"filter":"payload.step == \"triage\"","policy":{"default":"ALLOW"},
		"reaction":{"kind":"start-workflow","definitionId":"single-step","maxAffected":2}}`)
	activate(t, url, author, approver, `{"name":"on schedule","eventTypes":["workflow.schedule-fired.v1"],
		"policy":{"default":"ALLOW"},"reaction":{"kind":"start-workflow","definitionId":"single-step"}}`)

	stuck := func(requestID string, entity *envelope.Ref) envelope.Envelope {
		t.Helper()
		e, err := envelope.New("workflow.stuck.v1", "org-a", "workflow-service", map[string]any{
			"processId": deploytest.NewID(t), "requestId": requestID, "definitionId": "standard-review", "taskId": deploytest.NewID(t), "step": "triage",
			"waitingSince": "2026-12-01T10:00:00Z", "stuckAfterSeconds": 3600})
		if err != nil {
			t.Fatal(err)
		}
		e.Entity = entity
		p.Publish(t, e)
		return e
	}
	handled := func(e envelope.Envelope) {
		t.Helper()
		fabrictest.Eventually(t, 20*time.Second, "event "+e.ID+" handled", func() bool {
			var n int
			_ = p.Pool.QueryRow(ctx, `SELECT count(*) FROM `+p.Schema+`.inbox_message
				WHERE consumer = 'workflow.reactions' AND event_id = $1`, e.ID).Scan(&n)
			return n == 1
		})
	}
	started := func(e envelope.Envelope) (n int, requestID, entity string) {
		t.Helper()
		if err := p.Pool.QueryRow(ctx, `SELECT count(*), coalesce(max(request_id::text), ''), coalesce(max(entity_type || ':' || entity_id), '')
			FROM `+p.Schema+`.process_instance WHERE trigger_event_id = $1`, e.ID).Scan(&n, &requestID, &entity); err != nil {
			t.Fatal(err)
		}
		return n, requestID, entity
	}
	decision := func(e envelope.Envelope) decisionView { t.Helper(); return waitDecision(t, url, author, e) }

	// One event about a request: one process for it, derived from the event.
	r1 := deploytest.NewID(t)
	first := stuck(r1, &envelope.Ref{Type: "request", ID: r1})
	if d := decision(first); d.Outcome != "ALLOW" || d.Status != "executed" || d.SubscriptionID != subID {
		t.Fatalf("decision %+v, want ALLOW/executed by %s", d, subID)
	}
	if n, req, entity := started(first); n != 1 || req != r1 || entity != "request:"+r1 {
		t.Fatalf("%d processes for request %s (entity %s), want 1 for request %s", n, req, entity, r1)
	}
	if list := processes(t, url, approver, r1); len(list) != 1 || list[0].DefinitionID != "single-step" || len(list[0].Tasks) != 1 {
		t.Errorf("processes of request %s = %+v, want the single-step process with its first task", r1, list)
	}
	var causes int
	if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM `+p.Schema+`.outbox_event
		WHERE causation_id = $1 AND event_type = 'workflow.process-started.v1'`, first.ID).Scan(&causes); err != nil {
		t.Fatal(err)
	}
	if causes != 1 {
		t.Errorf("%d workflow.process-started.v1 caused by the event, want 1", causes)
	}

	// The same event again: dropped by the inbox; then once more after its
	// inbox claim is gone, so the reaction runs again and only the unique
	// key keeps the process single.
	p.Publish(t, first)
	if _, err := p.Pool.Exec(ctx, `DELETE FROM `+p.Schema+`.inbox_message WHERE consumer = 'workflow.reactions' AND event_id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	p.Publish(t, first)
	handled(first)
	if n, _, _ := started(first); n != 1 {
		t.Fatalf("the redelivered event left %d processes, want still 1", n)
	}

	// An entity that is not a request: the payload's request owns the process.
	r2, pid := deploytest.NewID(t), deploytest.NewID(t)
	second := stuck(r2, &envelope.Ref{Type: "process", ID: pid})
	if d := decision(second); d.Status != "executed" {
		t.Errorf("decision on an event about a process = %s (%s), want executed", d.Status, d.Detail)
	}
	if n, req, entity := started(second); n != 1 || req != r2 || entity != "process:"+pid {
		t.Errorf("%d processes for request %s (entity %s), want 1 for request %s about process %s", n, req, entity, r2, pid)
	}

	// Nothing to start a process for: no entity, no request.
	fired, err := envelope.New("workflow.schedule-fired.v1", "org-a", "workflow-service", map[string]any{
		"scheduleId": deploytest.NewID(t), "name": "nightly", "slot": "2026-12-01T00:00:00Z", "firedAt": "2026-12-01T00:00:01Z",
		"late": false, "skippedBefore": 0, "payload": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, fired)
	if d := decision(fired); d.Status != "not-run" || !strings.Contains(d.Detail, "no entity") {
		t.Errorf("decision on an event about nothing = %s (%s), want not-run naming the missing entity", d.Status, d.Detail)
	}

	// Two processes of the subscription run: a third start is past its
	// blast radius and waits for an operator.
	r3 := deploytest.NewID(t)
	third := stuck(r3, nil)
	d := decision(third)
	if d.Outcome != "REQUIRE_APPROVAL" || d.Status != "pending-approval" || len(d.Reviews) != 1 ||
		!strings.Contains(d.Reviews[0].Note, "2 running processes it started (limit 2)") {
		t.Fatalf("decision past the blast radius = %+v, want an approval carrying the estimate", d)
	}
	if n, _, _ := started(third); n != 0 {
		t.Fatalf("%d processes started before the approval, want 0", n)
	}
	if resp := post(t, url, approver, "/v1/reviews/"+d.ReviewID+"/resolve", `{"approve":true,"reason":"expected surge"}`); resp.Status != http.StatusOK {
		t.Fatalf("approve = %d %s", resp.Status, resp.Body)
	}
	if n, req, entity := started(third); n != 1 || req != r3 || entity != "request:"+r3 {
		t.Errorf("after the approval: %d processes for request %s (entity %s), want 1 for request %s", n, req, entity, r3)
	}
}
