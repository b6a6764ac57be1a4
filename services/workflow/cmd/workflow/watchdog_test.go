package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestWatchdogReportsAStuckStepOnce runs two instances sweeping every
// 100 ms on one schema, with definitions that call a step stuck after 1 s:
// a step left waiting is reported once (workflow.stuck.v1), its next step
// is watched afresh, and a process that finished in time is never
// reported.
func TestWatchdogReportsAStuckStepOnce(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"slow","definitions":[
		{"id":"slow","stuckAfter":"1s","steps":[{"name":"triage","assigneeRole":"attendant","sla":"1h"},{"name":"decision","assigneeRole":"attendant","sla":"1h"}]},
		{"id":"quick","services":["quick"],"stuckAfter":"1s","steps":[{"name":"only","assigneeRole":"attendant","sla":"1h"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	extra := map[string]string{"WORKFLOW_DEFINITIONS": defs, "WATCHDOG_CHECK_INTERVAL": "100ms", "WATCHDOG_STUCK_AFTER": "1h"}
	url := p.start(t, extra)
	p.start(t, extra)
	obs := fabrictest.Observe(t, p.Conn, "workflow.stuck.v1")
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")

	// Finished well within its second: never reported.
	quick := requestIDOf(t, p.submitted(t, "org-a", "citizen-1", "quick"))
	if resp := complete(t, url, attendant, waitProcess(t, url, attendant, quick).Tasks[0].ID, ""); resp.Status != http.StatusOK {
		t.Fatalf("complete the quick task = %d %s", resp.Status, resp.Body)
	}

	slow := requestIDOf(t, p.submitted(t, "org-b", "citizen-2", "svc"))
	first := obs.Next(t, "the waiting triage reported stuck", deploytest.AboutRequest("workflow.stuck.v1", slow))
	var got struct {
		ProcessID, DefinitionID, TaskID, Step string
		StuckAfterSeconds                     int64
	}
	if err := json.Unmarshal(first.Payload, &got); err != nil {
		t.Fatal(err)
	}
	proc := waitProcess(t, url, p.Token(t, "org-b", "attendant-2", "attendant"), slow)
	if first.TenantID != "org-b" || got.Step != "triage" || got.DefinitionID != "slow" || got.StuckAfterSeconds != 1 ||
		got.TaskID != proc.Tasks[0].ID || first.CorrelationID == "" {
		t.Errorf("stuck event %s (tenant %s), want org-b's triage of definition slow after 1 s", first.Payload, first.TenantID)
	}
	// Its workflow context, which a consumer's handler reads through
	// fabric.ExecutionOf: the process and the step it is stuck at.
	if w := string(first.Extensions["workflow"]); w != `{"processId":"`+proc.ID+`","step":"triage"}` {
		t.Errorf("stuck event's workflow extension = %s, want process %s at triage", w, proc.ID)
	}

	// Its next step is watched afresh.
	if resp := complete(t, url, p.Token(t, "org-b", "attendant-2", "attendant"), got.TaskID, ""); resp.Status != http.StatusOK {
		t.Fatalf("complete triage = %d %s", resp.Status, resp.Body)
	}
	second := obs.Next(t, "the waiting decision reported stuck", func(e envelope.Envelope) bool {
		return deploytest.AboutRequest("workflow.stuck.v1", slow)(e) && e.ID != first.ID
	})
	// Reported twice would come from a later sweep: once a marker started
	// after the decision has been reported, and everything enqueued
	// before it is published, every sweep of those seconds is in.
	marker := requestIDOf(t, p.submitted(t, "org-a", "citizen-3", "svc"))
	markerStuck := obs.Next(t, "the marker reported stuck", deploytest.AboutRequest("workflow.stuck.v1", marker))
	fabrictest.WaitOutboxPublished(t, p.Pool, "workflow.stuck.v1", markerStuck.ID)
	if all := obs.Matching(t, deploytest.AboutRequest("workflow.stuck.v1", slow)); len(all) != 2 {
		t.Errorf("the slow request was reported %d times, want twice (triage, then decision)", len(all))
	}
	if n := len(obs.Matching(t, deploytest.AboutRequest("workflow.stuck.v1", quick))); n != 0 {
		t.Errorf("the quick request, finished in time, was reported %d times", n)
	}
	var next struct{ Step, TaskID string }
	if err := json.Unmarshal(second.Payload, &next); err != nil || next.Step != "decision" || next.TaskID == got.TaskID {
		t.Errorf("second report %s, want the decision step's task", second.Payload)
	}
}
