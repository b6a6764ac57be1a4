package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/document-worker/doctest"
)

// identityLines is the text of an identity card, as the citizen's scan
// shows it.
var identityLines = []string{
	"REPÚBLICA FEDERATIVA DO BRASIL",
	"CARTEIRA DE IDENTIDADE",
	"RG 12.345.678-9   CPF 123.456.789-00",
	"Nome: Maria da Silva Santos",
}

// TestDocumentResumesTheWaitingStep is seed 004 §87's first slice across
// the real services: the request's process waits on its document-check
// step; the citizen uploads a scan of an identity card; the document
// worker OCRs it and gives its verdict (document.validated.v1: readable,
// kind identity); the tenant's active subscription (filter: a valid
// identity document; policy ALLOW; reaction resume-workflow) resumes
// exactly that process, and the decision says why.
func TestDocumentResumesTheWaitingStep(t *testing.T) {
	h := harness.New(t, os.Getenv)
	h.RequireProcesses(t)
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"docs","definitions":[
		{"id":"docs","steps":[
			{"name":"document-check","assigneeRole":"attendant","sla":"1h","waitFor":"document.validated.v1"},
			{"name":"decision","assigneeRole":"attendant","sla":"1h"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Start(t, "request")
	h.Start(t, "document-worker")
	h.Start(t, "workflow", harness.Env{"WORKFLOW_DEFINITIONS": defs})
	tenant := "org-a-" + randHex(3)
	citizen := h.Token(tenant, "citizen-"+randHex(2), "citizen")
	attendant, operator := h.Token(tenant, "ana", "attendant"), h.Token(tenant, "olga", "operator")
	call := workflowCall(t, h)
	subID := activateSubscription(t, call, attendant, operator, `{"name":"identity documents",
		"eventTypes":["document.validated.v1"],"filter":"payload.valid && payload.kind == 'identity'",
		"policy":{"default":"ALLOW"},"reaction":{"kind":"resume-workflow"}}`)

	reqID := submitRequest(t, h.URL("request"), citizen)
	type proc struct {
		CurrentStep int `json:"currentStep"`
		Tasks       []struct {
			Status, CompletedBy string
		} `json:"tasks"`
	}
	processOf := func() (proc, bool) {
		var list struct{ Processes []proc }
		if call(http.MethodGet, "/v1/processes?requestId="+reqID, attendant, "", &list) != http.StatusOK || len(list.Processes) != 1 {
			return proc{}, false
		}
		return list.Processes[0], true
	}
	fabrictest.Eventually(t, time.Minute, "the process waiting on document-check", func() bool {
		p, ok := processOf()
		return ok && p.CurrentStep == 0
	})
	pngData, err := doctest.PNG(identityLines, 36)
	if err != nil {
		t.Fatal(err)
	}
	uploadDocument(t, h.URL("request"), citizen, reqID, "rg.png", pngData)
	var p proc
	fabrictest.Eventually(t, 2*time.Minute, "the document resuming the process", func() bool {
		var ok bool
		p, ok = processOf()
		return ok && p.CurrentStep == 1
	})
	if p.Tasks[0].Status != "completed" || !strings.HasPrefix(p.Tasks[0].CompletedBy, "subscription:"+subID) {
		t.Errorf("document-check = %+v, want completed by the subscription", p.Tasks[0])
	}
	correlation := requestCorrelation(t, h.URL("request"), citizen, reqID)
	var decisions []struct{ EventType, Outcome, Status, Detail string }
	call(http.MethodGet, "/v1/decisions?correlationId="+correlation, attendant, "", &decisions)
	if len(decisions) != 1 || decisions[0].EventType != "document.validated.v1" || decisions[0].Outcome != "ALLOW" || decisions[0].Status != "executed" {
		t.Errorf("decisions = %+v, want the document's ALLOW, executed", decisions)
	}

	// The decision is in the event's trace: a "decision" span under the
	// "reaction evaluation" span, under the workflow's consumer span of
	// document.validated.v1 (seed 004 §79).
	var decision, evaluation, consumer harness.Span
	fabrictest.Eventually(t, 10*time.Second, "the decision's span in the event's trace", func() bool {
		byID := map[string]harness.Span{}
		decision = harness.Span{}
		for _, sp := range harness.Spans(t, h.TracesDir) {
			byID[sp.SpanID] = sp
			if sp.Name == "decision" && sp.Attributes["agora.subscription.id"] == subID {
				decision = sp
			}
		}
		evaluation, consumer = byID[decision.ParentSpanID], byID[byID[decision.ParentSpanID].ParentSpanID]
		return decision.Name != "" && evaluation.Name != "" && consumer.Name != ""
	})
	if evaluation.Name != "reaction evaluation" || consumer.Name != "process document.validated.v1" || consumer.Service != "workflow" ||
		decision.TraceID != consumer.TraceID || decision.Attributes["agora.decision.outcome"] != "ALLOW" || decision.Attributes["agora.decision.status"] != "executed" {
		t.Errorf("decision span %+v under %q under %q (%s), want ALLOW/executed under the reaction evaluation under the consumer span",
			decision.Attributes, evaluation.Name, consumer.Name, consumer.Service)
	}
}
