package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

type decisionView struct {
	EventID             string `json:"eventId"`
	SubscriptionID      string `json:"subscriptionId"`
	SubscriptionVersion int    `json:"subscriptionVersion"`
	Outcome             string `json:"outcome"`
	Rule                *int   `json:"rule"`
	ActorType           string `json:"actorType"`
	Status              string `json:"status"`
	Detail              string `json:"detail"`
	ReviewID            string `json:"reviewId"`
	Reviews             []struct {
		Kind, Role, Status, Resolution, ResolvedBy, Follows, Note string
	} `json:"reviews"`
	Job *struct {
		Total, Done int
		Status      string
	} `json:"job"`
}

// TestReactionsDecideOncePerEvent: active subscriptions of tenant A on
// workflow.stuck.v1 decide each matching event by their policies (ALLOW,
// REQUIRE_APPROVAL, REQUIRE_HUMAN_REVIEW, DENY), once even when the event
// is delivered twice; tenant B's event and A's non-matching event lead to
// no decision; GET /v1/decisions says why, per correlation id.
func TestReactionsDecideOncePerEvent(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	author := p.Token(t, "org-a", "ana", "attendant")
	approver := p.Token(t, "org-a", "olga", "operator")
	post := func(token, path, body string) deploytest.Response {
		return do(t, http.MethodPost, url+path, token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	}
	// A type the workflow does not receive is refused: it could never fire.
	expectProblem(t, post(author, "/v1/subscriptions", `{"name":"x","eventTypes":["request.submitted.v1"],"policy":{"default":"ALLOW"},
		"reaction":{"kind":"review-task","role":"operator"}}`), http.StatusUnprocessableEntity)
	triage := activate(t, url, author, approver, `{"name":"stuck triage","eventTypes":["workflow.stuck.v1"],"filter":"payload.step == \"triage\"",
		"policy":{"default":"REQUIRE_HUMAN_REVIEW","rules":[
			{"when":"payload.definitionId == \"blocked\"","outcome":"DENY"},
			{"when":"payload.stuckAfterSeconds >= 86400","outcome":"REQUIRE_APPROVAL"}]},
		"reaction":{"kind":"review-task","role":"operator"}}`)
	decision := activate(t, url, author, approver, `{"name":"stuck decision","eventTypes":["workflow.stuck.v1"],"filter":"payload.step == \"decision\"",
		"policy":{"default":"ALLOW"},"reaction":{"kind":"review-task","role":"attendant"}}`)

	stuck := func(tenant, step, definition string, after int) envelope.Envelope {
		t.Helper()
		e, err := envelope.New("workflow.stuck.v1", tenant, "workflow-service", map[string]any{
			"processId": deploytest.NewID(t), "requestId": deploytest.NewID(t), "definitionId": definition, "taskId": deploytest.NewID(t), "step": step,
			"waitingSince": "2026-12-01T10:00:00Z", "stuckAfterSeconds": after})
		if err != nil {
			t.Fatal(err)
		}
		p.Publish(t, e)
		return e
	}
	review := stuck("org-a", "triage", "standard-review", 3600)
	approval := stuck("org-a", "triage", "standard-review", 259200)
	denied := stuck("org-a", "triage", "blocked", 259200)
	allowed := stuck("org-a", "decision", "standard-review", 3600)
	p.Publish(t, allowed) // delivered twice
	ignored := stuck("org-a", "document-check", "standard-review", 3600)
	other := stuck("org-b", "triage", "standard-review", 3600)
	decisions := func(token string, e envelope.Envelope) []decisionView {
		var out []decisionView
		do(t, http.MethodGet, url+"/v1/decisions?correlationId="+e.CorrelationID, token, nil, nil).JSON(t, &out)
		return out
	}
	// Handled, matched or not: every event's claim is in the reactions
	// consumer's inbox (committed with its decisions, if any).
	ids := []string{review.ID, approval.ID, denied.ID, allowed.ID, ignored.ID, other.ID}
	fabrictest.Eventually(t, 20*time.Second, "every event handled", func() bool {
		var n int
		_ = p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.Schema+`.inbox_message
			WHERE consumer = 'workflow.reactions' AND event_id::text = ANY($1)`, ids).Scan(&n)
		return n == len(ids)
	})

	rule := func(d decisionView) string {
		if d.Rule == nil {
			return "default"
		}
		return strconv.Itoa(*d.Rule)
	}
	for _, tc := range []struct {
		name          string
		e             envelope.Envelope
		sub           string
		outcome, rule string
		status        string
		opensReview   bool
	}{
		{"default: human review", review, triage, "REQUIRE_HUMAN_REVIEW", "default", "pending-review", true},
		{"rule 1: approval", approval, triage, "REQUIRE_APPROVAL", "1", "pending-approval", true},
		{"rule 0: deny", denied, triage, "DENY", "0", "denied", false},
		{"allow: the reaction runs", allowed, decision, "ALLOW", "default", "executed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decisions(author, tc.e)
			if len(got) != 1 {
				t.Fatalf("%d decisions, want exactly 1: %+v", len(got), got)
			}
			d := got[0]
			if d.EventID != tc.e.ID || d.SubscriptionID != tc.sub || d.SubscriptionVersion != 1 || d.Outcome != tc.outcome ||
				rule(d) != tc.rule || d.Status != tc.status || d.ActorType != "SYSTEM" || (d.ReviewID != "") != tc.opensReview {
				t.Errorf("decision %+v, want %s by rule %s, %s", d, tc.outcome, tc.rule, tc.status)
			}
		})
	}
	if got := decisions(author, ignored); len(got) != 0 {
		t.Errorf("a step no filter matches was decided: %+v", got)
	}
	if got := decisions(p.Token(t, "org-b", "bruno", "operator"), other); len(got) != 0 {
		t.Errorf("tenant B's event was decided by A's subscriptions: %+v", got)
	}
	var reviews int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.Schema+`.reaction_review`).Scan(&reviews); err != nil {
		t.Fatal(err)
	}
	if reviews != 3 { // the review, the approval, the allowed reaction's review task
		t.Errorf("%d reviews opened, want 3", reviews)
	}
	expectProblem(t, do(t, http.MethodGet, url+"/v1/decisions", author, nil, nil), http.StatusBadRequest)

	// People resolve what the policy left them. The approval is an
	// operator's: the attendant may not; once approved, the reaction it
	// held back runs (the review task opens, following it); twice is 409.
	approvalID := decisions(author, approval)[0].ReviewID
	resolve := func(token, id string, approve bool) deploytest.Response {
		return post(token, "/v1/reviews/"+id+"/resolve", `{"approve":`+strconv.FormatBool(approve)+`,"reason":"checked the process"}`)
	}
	var attendantReviews []struct{ ID, Kind, Role string }
	do(t, http.MethodGet, url+"/v1/reviews", author, nil, nil).JSON(t, &attendantReviews)
	if len(attendantReviews) != 1 || attendantReviews[0].Role != "attendant" || attendantReviews[0].Kind != "review" {
		t.Errorf("the attendant sees %+v, want only the allowed reaction's review task (the others are operators')", attendantReviews)
	}
	expectProblem(t, resolve(author, approvalID, true), http.StatusForbidden)
	if resp := resolve(approver, approvalID, true); resp.Status != http.StatusOK {
		t.Fatalf("approve = %d %s", resp.Status, resp.Body)
	}
	expectProblem(t, resolve(approver, approvalID, false), http.StatusConflict)
	expectProblem(t, post(approver, "/v1/reviews/"+approvalID+"/resolve", `{"reason":"x"}`), http.StatusUnprocessableEntity)
	got := decisions(author, approval)[0]
	if len(got.Reviews) != 2 || got.Reviews[0].Resolution != "approved" || got.Reviews[0].ResolvedBy != "olga" ||
		got.Reviews[1].Follows != approvalID || got.Reviews[1].Kind != "review" || got.Reviews[1].Status != "open" {
		t.Errorf("the approved decision's reviews = %+v, want the approval approved by olga and the review task it opened", got.Reviews)
	}
	// Rejecting a human review runs nothing more.
	reviewID := decisions(author, review)[0].ReviewID
	if resp := resolve(approver, reviewID, false); resp.Status != http.StatusOK {
		t.Fatalf("reject = %d %s", resp.Status, resp.Body)
	}
	if got := decisions(author, review)[0].Reviews; len(got) != 1 || got[0].Resolution != "rejected" {
		t.Errorf("the rejected review = %+v", got)
	}
	expectProblem(t, resolve(p.Token(t, "org-b", "bruno", "operator"), approvalID, true), http.StatusNotFound)
}

// TestWatchdogTriggersASubscription: the watchdog's workflow.stuck.v1 for
// a real process reaches the reactions queue and the tenant's active
// subscription decides on it, under the request's correlation id.
func TestWatchdogTriggersASubscription(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"slow","definitions":[
		{"id":"slow","stuckAfter":"1s","steps":[{"name":"triage","assigneeRole":"attendant","sla":"1h"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	url := p.start(t, map[string]string{"WORKFLOW_DEFINITIONS": defs, "WATCHDOG_CHECK_INTERVAL": "100ms"})
	author, approver := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	subID := activate(t, url, author, approver, `{"name":"stuck","eventTypes":["workflow.stuck.v1"],"filter":"payload.step == \"triage\"",
		"policy":{"default":"REQUIRE_HUMAN_REVIEW"},"reaction":{"kind":"review-task","role":"operator"}}`)
	submitted := p.submitted(t, "org-a", "citizen-1", "svc")
	var got []decisionView
	fabrictest.Eventually(t, 20*time.Second, "the stuck process decided", func() bool {
		do(t, http.MethodGet, url+"/v1/decisions?correlationId="+submitted.CorrelationID, author, nil, nil).JSON(t, &got)
		return len(got) > 0
	})
	if len(got) != 1 || got[0].SubscriptionID != subID || got[0].Outcome != "REQUIRE_HUMAN_REVIEW" || got[0].Status != "pending-review" {
		t.Errorf("decisions = %+v, want one human review from subscription %s", got, subID)
	}
}
