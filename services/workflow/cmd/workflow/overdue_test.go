package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestOverdueApprovalReportedOnce runs two instances sweeping due dates
// every 50 ms on one schema. An approval of a subscription whose reaction
// is due after 1 s is reported overdue once (workflow.review-overdue.v1,
// under the decision's correlation, published), however often the two
// sweep; a review of a subscription without dueAfter is due after
// REVIEW_DUE_AFTER (1h here) and not reported; resolving a review takes
// its due date off the sweep.
func TestOverdueApprovalReportedOnce(t *testing.T) {
	p := newPlatform(t)
	extra := map[string]string{"REVIEW_CHECK_INTERVAL": "50ms", "REVIEW_DUE_AFTER": "1h"}
	url := p.start(t, extra)
	p.start(t, extra)
	ctx := context.Background()
	obs := fabrictest.Observe(t, p.Conn, "workflow.review-overdue.v1")
	author, approver := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	activate(t, url, author, approver, `{"name":"urgent approvals","eventTypes":["workflow.stuck.v1"],"filter":"payload.step == \"triage\"",
		"policy":{"default":"REQUIRE_APPROVAL"},"reaction":{"kind":"review-task","role":"operator","dueAfter":"1s"}}`)
	activate(t, url, author, approver, `{"name":"slow reviews","eventTypes":["workflow.stuck.v1"],"filter":"payload.step == \"decision\"",
		"policy":{"default":"REQUIRE_HUMAN_REVIEW"},"reaction":{"kind":"review-task","role":"operator"}}`)
	stuck := func(step string) envelope.Envelope {
		t.Helper()
		e, err := envelope.New("workflow.stuck.v1", "org-a", "workflow-service", map[string]any{
			"processId": deploytest.NewID(t), "requestId": deploytest.NewID(t), "definitionId": "standard-review", "taskId": deploytest.NewID(t), "step": step,
			"waitingSince": "2026-12-01T10:00:00Z", "stuckAfterSeconds": 3600})
		if err != nil {
			t.Fatal(err)
		}
		p.Publish(t, e)
		return e
	}
	reviewOf := func(e envelope.Envelope) string {
		t.Helper()
		var got []decisionView
		fabrictest.Eventually(t, 20*time.Second, "the decision on "+e.ID, func() bool {
			do(t, http.MethodGet, url+"/v1/decisions?eventId="+e.ID, author, nil, nil).JSON(t, &got)
			return len(got) == 1 && got[0].ReviewID != ""
		})
		return got[0].ReviewID
	}
	overdue := func(reviewID string) func(envelope.Envelope) bool {
		return func(e envelope.Envelope) bool {
			var pl struct{ ReviewID string }
			_ = json.Unmarshal(e.Payload, &pl)
			return pl.ReviewID == reviewID
		}
	}

	slow := stuck("decision")
	slowReview := reviewOf(slow)
	urgent := stuck("triage")
	approval := reviewOf(urgent)
	first := obs.Next(t, "the approval reported overdue", overdue(approval))
	var got struct {
		Kind, Role, DecisionID, EventID string
		DueAt, CreatedAt                time.Time
	}
	if err := json.Unmarshal(first.Payload, &got); err != nil {
		t.Fatal(err)
	}
	if first.TenantID != "org-a" || first.CorrelationID != urgent.CorrelationID || got.Kind != "approval" || got.Role != "operator" ||
		got.EventID != urgent.ID || got.DueAt.Sub(got.CreatedAt) != time.Second {
		t.Errorf("overdue event %s (tenant %s, correlation %s), want org-a's approval of %s due 1 s after it opened",
			first.Payload, first.TenantID, first.CorrelationID, urgent.ID)
	}
	// Reported twice would come from a later sweep: a second approval
	// opened after the first was reported, reported and published, means
	// both instances swept many times over the first one's due date.
	marker := reviewOf(stuck("triage"))
	markerEvent := obs.Next(t, "the marker reported overdue", overdue(marker))
	fabrictest.WaitOutboxPublished(t, p.Pool, "workflow.review-overdue.v1", markerEvent.ID)
	if all := obs.Matching(t, overdue(approval)); len(all) != 1 {
		t.Errorf("the approval was reported overdue %d times, want once", len(all))
	}
	if n := len(obs.Matching(t, overdue(slowReview))); n != 0 {
		t.Errorf("the review due in 1h was reported overdue %d times", n)
	}

	var reviews []struct {
		ID               string
		DueAt, OverdueAt *time.Time
		CreatedAt        time.Time
	}
	do(t, http.MethodGet, url+"/v1/reviews", approver, nil, nil).JSON(t, &reviews)
	for _, r := range reviews {
		switch r.ID {
		case approval:
			if r.OverdueAt == nil || r.DueAt == nil {
				t.Errorf("the overdue approval shows due %v, overdue %v, want both", r.DueAt, r.OverdueAt)
			}
		case slowReview:
			if r.OverdueAt != nil || r.DueAt == nil || r.DueAt.Sub(r.CreatedAt) != time.Hour {
				t.Errorf("the review shows due %v (created %v), overdue %v, want due in REVIEW_DUE_AFTER and not overdue", r.DueAt, r.CreatedAt, r.OverdueAt)
			}
		}
	}
	if resp := post(t, url, approver, "/v1/reviews/"+slowReview+"/resolve", `{"approve":true,"reason":"looked at it"}`); resp.Status != http.StatusOK {
		t.Fatalf("resolve = %d %s", resp.Status, resp.Body)
	}
	var timers int
	if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM `+p.Schema+`.review_timer WHERE review_id = $1`, slowReview).Scan(&timers); err != nil {
		t.Fatal(err)
	}
	if timers != 0 {
		t.Errorf("the resolved review still has %d due timers", timers)
	}
}
