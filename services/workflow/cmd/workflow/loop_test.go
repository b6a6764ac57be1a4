package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestReactionLoopIsStopped: a chain of reactions is bounded by the
// fabric's causation depth (envelope.DefaultMaxDepth). An event that
// arrives at the limit, as the tail of a loop would, is decided but its
// resume is not run (what the step emits would be one level deeper than
// any consumer accepts): the decision says loop-stopped and the loop
// metric counts it. One level deeper, the consumer refuses the event
// itself (dead-lettered, counted by reason). A shallow event resumes the
// same step, so the depth alone stopped the first.
func TestReactionLoopIsStopped(t *testing.T) {
	l := startLoop(t, `{"name":"decision","assigneeRole":"attendant","sla":"1h"}`)
	p, url, author, sub, requestID := l.p, l.url, l.author, l.sub, l.requestID
	if proc := waitProcess(t, url, author, requestID); proc.CurrentStep != 0 {
		t.Fatalf("process at step %d, want the waiting document-check", proc.CurrentStep)
	}
	// processedAt returns a document.processed.v1 about the request with
	// depth ancestors, each derived from the one before, as a loop
	// re-emitting it would leave them.
	processedAt := func(depth int) envelope.Envelope {
		t.Helper()
		e, err := envelope.New("document.processed.v1", "org-a", "document-worker", map[string]any{
			"documentId": deploytest.NewID(t), "requestId": requestID, "textObjectKey": "tenant=org-a/x.txt", "pages": 1, "characters": 900})
		if err != nil {
			t.Fatal(err)
		}
		e.CorrelationID = sub.CorrelationID
		for range depth {
			if e, err = envelope.Derive(e, e.Type, "document-worker", e.Payload); err != nil {
				t.Fatal(err)
			}
		}
		if len(e.CausationChain) != depth {
			t.Fatalf("built a chain of %d, want %d", len(e.CausationChain), depth)
		}
		return e
	}
	decisionOf := func(e envelope.Envelope) decisionView { t.Helper(); return l.decisionOf(t, e) }
	metrics := url + "/metrics"

	atLimit := processedAt(envelope.DefaultMaxDepth)
	p.Publish(t, atLimit)
	if d := decisionOf(atLimit); d.Outcome != "DENY" || d.Status != "loop-stopped" {
		t.Fatalf("decision at the depth limit: %s/%s (%s), want DENY/loop-stopped", d.Outcome, d.Status, d.Detail)
	}
	// The decision and any resume commit together: the step still waits.
	if proc := waitProcess(t, url, author, requestID); proc.CurrentStep != 0 {
		t.Errorf("the loop's tail resumed the step (now %d)", proc.CurrentStep)
	}
	if got := fabrictest.Counter(t, metrics, "workflow_reaction_loops_stopped_total", nil); got != 1 {
		t.Errorf("workflow_reaction_loops_stopped_total = %v, want 1", got)
	}

	beyond := processedAt(envelope.DefaultMaxDepth + 1)
	p.Publish(t, beyond)
	fabrictest.WaitCounter(t, 20*time.Second, metrics, "fabric_consumer_dead_lettered_total",
		map[string]string{"consumer": "workflow.reactions", "reason": "REACTION_DEPTH_EXCEEDED"}, 1)

	shallow := processedAt(0)
	p.Publish(t, shallow)
	if d := decisionOf(shallow); d.Outcome != "ALLOW" || d.Status != "executed" {
		t.Fatalf("decision on a shallow event: %s/%s (%s), want ALLOW/executed", d.Outcome, d.Status, d.Detail)
	}
	if proc := waitProcess(t, url, author, requestID); proc.CurrentStep != 1 {
		t.Errorf("a shallow event left the step at %d, want resumed", proc.CurrentStep)
	}
	for _, c := range []struct {
		outcome, status string
	}{{"DENY", "loop-stopped"}, {"ALLOW", "executed"}} {
		if got := fabrictest.Counter(t, metrics, "workflow_reaction_decisions_total",
			map[string]string{"outcome": c.outcome, "status": c.status}); got != 1 {
			t.Errorf("workflow_reaction_decisions_total{%s,%s} = %v, want 1", c.outcome, c.status, got)
		}
	}
}

// TestRepeatingPatternIsStoppedAtItsSecondTurn: a loop that mints fresh
// ids each turn (A → B → A) is stopped when the same subscription would
// react a second time to A in one causation chain, long before the depth
// limit; a chain as deep whose earlier A this subscription never reacted
// to runs.
func TestRepeatingPatternIsStoppedAtItsSecondTurn(t *testing.T) {
	l := startLoop(t, `{"name":"decision","assigneeRole":"attendant","sla":"1h","waitFor":"document.processed.v1"},
		{"name":"archive","assigneeRole":"attendant","sla":"1h"}`)
	p, url, author, sub, requestID := l.p, l.url, l.author, l.sub, l.requestID
	waitProcess(t, url, author, requestID)
	processed := func() envelope.Envelope {
		t.Helper()
		e, err := envelope.New("document.processed.v1", "org-a", "document-worker", map[string]any{
			"documentId": deploytest.NewID(t), "requestId": requestID, "textObjectKey": "tenant=org-a/x.txt", "pages": 1, "characters": 900})
		if err != nil {
			t.Fatal(err)
		}
		e.CorrelationID = sub.CorrelationID
		return e
	}
	// after returns a fresh A whose chain runs through first and one B.
	after := func(first envelope.Envelope) envelope.Envelope {
		t.Helper()
		b, err := envelope.Derive(first, "workflow.task-completed.v1", "workflow", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		a, err := envelope.Derive(b, "document.processed.v1", "document-worker", processed().Payload)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	decisionOf := func(e envelope.Envelope) decisionView { t.Helper(); return l.decisionOf(t, e) }

	// Never reacted to: a chain through an A the subscription never saw runs.
	unseen := after(processed())
	p.Publish(t, unseen)
	if d := decisionOf(unseen); d.Status != "executed" {
		t.Fatalf("a chain whose earlier A was never reacted to: %s/%s (%s), want executed", d.Outcome, d.Status, d.Detail)
	}
	first := processed()
	p.Publish(t, first)
	if d := decisionOf(first); d.Status != "executed" {
		t.Fatalf("the first turn: %s/%s (%s), want executed", d.Outcome, d.Status, d.Detail)
	}
	second := after(first)
	p.Publish(t, second)
	d := decisionOf(second)
	if d.Outcome != "DENY" || d.Status != "loop-stopped" || !strings.Contains(d.Detail, "repeating pattern") ||
		!strings.Contains(d.Detail, "document.processed.v1 → workflow.task-completed.v1 → document.processed.v1") {
		t.Fatalf("the second turn: %s/%s (%s), want DENY/loop-stopped naming the pattern", d.Outcome, d.Status, d.Detail)
	}
	if proc := waitProcess(t, url, author, requestID); proc.CurrentStep != 2 {
		t.Errorf("the process is at step %d, want 2: two turns resumed it, the third did not", proc.CurrentStep)
	}
}

// loop is a workflow whose process waits on document-check for
// document.processed.v1, with an active subscription that resumes it, and
// one submitted request of org-a.
type loop struct {
	p           *platform
	url, author string
	sub         envelope.Envelope
	requestID   string
}

// startLoop starts it; steps are the definition's steps after
// document-check, as JSON objects.
func startLoop(t *testing.T, steps string) loop {
	t.Helper()
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"docs","definitions":[{"id":"docs","steps":[
		{"name":"document-check","assigneeRole":"attendant","sla":"1h","waitFor":"document.processed.v1"},`+steps+`]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	l := loop{p: newPlatform(t)}
	l.url = l.p.start(t, map[string]string{"WORKFLOW_DEFINITIONS": defs})
	l.author = l.p.Token(t, "org-a", "ana", "attendant")
	activate(t, l.url, l.author, l.p.Token(t, "org-a", "olga", "operator"), `{"name":"readable documents","eventTypes":["document.processed.v1"],
		"filter":"payload.characters > 0","policy":{"default":"ALLOW"},"reaction":{"kind":"resume-workflow"}}`)
	l.sub = l.p.submitted(t, "org-a", "citizen-1", "svc")
	l.requestID = requestIDOf(t, l.sub)
	return l
}

// decisionOf waits for the one decision on e and returns it.
func (l loop) decisionOf(t *testing.T, e envelope.Envelope) decisionView {
	t.Helper()
	return waitDecision(t, l.url, l.author, e)
}
