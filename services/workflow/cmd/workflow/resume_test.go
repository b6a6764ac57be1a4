package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestResumeWaitingStep is seed 004 §87's first slice on this service: a
// step waits for the document worker's verdict on its request's document
// (document.validated.v1); a subscription (filter: a valid identity
// document; ALLOW, resume-workflow) resumes exactly that process when such
// a verdict comes, at most once, and a verdict that comes before the step
// opens is kept and resumes it the moment it opens.
func TestResumeWaitingStep(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"docs","definitions":[
		{"id":"docs","steps":[
			{"name":"document-check","assigneeRole":"attendant","sla":"1h","waitFor":"document.validated.v1"},
			{"name":"decision","assigneeRole":"attendant","sla":"1h"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	url := p.start(t, map[string]string{"WORKFLOW_DEFINITIONS": defs})
	author, approver := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	subID := activate(t, url, author, approver, `{"name":"identity documents","eventTypes":["document.validated.v1"],
		"filter":"payload.valid && payload.kind == 'identity'","policy":{"default":"ALLOW"},"reaction":{"kind":"resume-workflow"}}`)
	validated := func(requestID, correlationID string, valid bool, kind string) envelope.Envelope {
		t.Helper()
		body := map[string]any{"documentId": deploytest.NewID(t), "requestId": requestID, "valid": valid, "kind": kind,
			"checks": []map[string]any{{"name": "readable", "passed": valid}, {"name": "kind", "passed": kind != "unknown"}}}
		if !valid {
			body["reason"] = "unreadable: 3 letters of text, want at least 20"
		}
		e, err := envelope.New("document.validated.v1", "org-a", "document-worker", body)
		if err != nil {
			t.Fatal(err)
		}
		e.CorrelationID = correlationID
		p.Publish(t, e)
		return e
	}
	decisionsOf := func(e envelope.Envelope) []decisionView {
		var out []decisionView
		do(t, http.MethodGet, url+"/v1/decisions?eventId="+e.ID, author, nil, nil).JSON(t, &out)
		return out
	}
	status := func(e envelope.Envelope) string {
		var got []decisionView
		fabrictest.Eventually(t, 20*time.Second, "a decision on "+e.ID, func() bool { got = decisionsOf(e); return len(got) == 1 })
		return got[0].Status
	}

	// On time: the step waits, the document comes, the process moves on.
	sub := p.submitted(t, "org-a", "citizen-1", "svc")
	requestID := requestIDOf(t, sub)
	proc := waitProcess(t, url, author, requestID)
	if proc.CurrentStep != 0 {
		t.Fatalf("process at step %d, want the waiting document-check", proc.CurrentStep)
	}
	// The filter holds on neither: nothing happens.
	unreadable := validated(requestID, sub.CorrelationID, false, "unknown")
	otherKind := validated(requestID, sub.CorrelationID, true, "proof-of-address")
	readable := validated(requestID, sub.CorrelationID, true, "identity")
	if got := status(readable); got != "executed" {
		t.Fatalf("decision on the readable document: %s", got)
	}
	proc = waitProcess(t, url, author, requestID)
	if proc.CurrentStep != 1 || proc.Tasks[0].Status != "completed" || !strings.HasPrefix(proc.Tasks[0].CompletedBy, "subscription:"+subID) {
		t.Errorf("process after the resume: step %d, first task %+v; want it completed by the subscription and decision open", proc.CurrentStep, proc.Tasks[0])
	}
	for name, e := range map[string]envelope.Envelope{"the unreadable document": unreadable, "a document of another kind": otherKind} {
		fabrictest.Eventually(t, 20*time.Second, name+" handled", func() bool {
			var n int
			_ = p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.Schema+`.inbox_message
			WHERE consumer = 'workflow.reactions' AND event_id = $1`, e.ID).Scan(&n)
			return n == 1
		})
		if got := decisionsOf(e); len(got) != 0 {
			t.Errorf("%s was decided: %+v", name, got)
		}
	}
	// At most once, delivered twice: the same event again is skipped by
	// the inbox (counted as a duplicate), decided once, and resumes
	// nothing more.
	p.Publish(t, readable)
	fabrictest.WaitCounter(t, 20*time.Second, url+"/metrics", "fabric_consumer_duplicates_total",
		map[string]string{"consumer": "workflow.reactions", "type": "document.validated.v1"}, 1)
	if got := decisionsOf(readable); len(got) != 1 {
		t.Errorf("the redelivered document has %d decisions, want 1", len(got))
	}
	if proc = waitProcess(t, url, author, requestID); proc.CurrentStep != 1 || proc.Tasks[1].Status != "open" {
		t.Errorf("after the redelivery: step %d, tasks %+v; want the decision step open", proc.CurrentStep, proc.Tasks)
	}
	// At most once: a second document finds no step waiting.
	if got := status(validated(requestID, sub.CorrelationID, true, "identity")); got != "not-run" {
		t.Errorf("a second document's decision: %s, want not-run", got)
	}

	// Early: the document is judged before the request's process
	// starts; it is kept, and resumes the step the moment it opens.
	early := deploytest.NewID(t)
	earlyEvent := validated(early, deploytest.NewID(t), true, "identity")
	if got := status(earlyEvent); got != "waiting" {
		t.Fatalf("the early document's decision: %s, want waiting", got)
	}
	env, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{
		"requestId": early, "protocol": "AGR-2026-000002", "serviceId": "svc", "formId": "f", "formVersion": 1,
		"channel": "web", "citizenId": "citizen-2", "submittedAt": time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, env)
	fabrictest.Eventually(t, 20*time.Second, "the early request's process past its waiting step", func() bool {
		return waitProcess(t, url, author, early).CurrentStep == 1
	})
}
