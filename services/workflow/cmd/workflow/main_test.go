package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

type taskView struct {
	ID           string    `json:"id"`
	Step         string    `json:"step"`
	AssigneeRole string    `json:"assigneeRole"`
	Status       string    `json:"status"`
	Outcome      string    `json:"outcome"`
	DueAt        time.Time `json:"dueAt"`
	CreatedAt    time.Time `json:"createdAt"`
	SLABreached  bool      `json:"slaBreached"`
	CompletedBy  string    `json:"completedBy"`
	Reason       string    `json:"reason"`
}

type processView struct {
	ID           string     `json:"id"`
	RequestID    string     `json:"requestId"`
	DefinitionID string     `json:"definitionId"`
	Status       string     `json:"status"`
	Outcome      string     `json:"outcome"`
	CurrentStep  int        `json:"currentStep"`
	Tasks        []taskView `json:"tasks"`
	SEI          *seiView   `json:"seiRegistration"`
}

type seiView struct {
	Status       string     `json:"status"`
	Number       string     `json:"seiNumber"`
	Unit         string     `json:"unit"`
	Attempts     int        `json:"attempts"`
	LastError    string     `json:"lastError"`
	RegisteredAt *time.Time `json:"registeredAt"`
}

func processes(t *testing.T, url, token, requestID string) []processView {
	t.Helper()
	resp := do(t, http.MethodGet, url+"/v1/processes?requestId="+requestID, token, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/processes = %d %s", resp.Status, resp.Body)
	}
	var body struct{ Processes []processView }
	resp.JSON(t, &body)
	return body.Processes
}

// waitProcess waits until the request's process exists and returns it.
func waitProcess(t *testing.T, url, token, requestID string) processView {
	t.Helper()
	var list []processView
	fabrictest.Eventually(t, 20*time.Second, "process of request "+requestID, func() bool {
		list = processes(t, url, token, requestID)
		return len(list) == 1
	})
	return list[0]
}

func complete(t *testing.T, url, token, taskID, body string) deploytest.Response {
	t.Helper()
	h := map[string]string{}
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	return do(t, http.MethodPost, url+"/v1/tasks/"+taskID+"/complete", token, strings.NewReader(body), h)
}

// wantReason is the reason a completion body gives, as stored: without
// surrounding blanks.
func wantReason(t *testing.T, body string) string {
	t.Helper()
	if body == "" {
		return ""
	}
	var b struct{ Reason string }
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.Reason)
}

func TestRequestSubmittedStartsProcess(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	obs := fabrictest.Observe(t, p.Conn, "workflow.#")
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")
	tests := []struct {
		serviceID, definition, firstStep, role string
		sla                                    time.Duration
	}{
		{"building-permit", "building-permit", "document-check", "attendant", 48 * time.Hour},
		{"iptu-segunda-via", "single-step", "issue", "attendant", 8 * time.Hour},
		{"unknown-service", "standard-review", "triage", "attendant", 24 * time.Hour},
	}
	queued := 0 // messages sent to the consumer's queue so far
	for _, tc := range tests {
		t.Run(tc.serviceID, func(t *testing.T) {
			sub := p.submitted(t, "org-a", "citizen-1", tc.serviceID)
			queued++
			requestID := requestIDOf(t, sub)
			proc := waitProcess(t, url, attendant, requestID)
			if proc.DefinitionID != tc.definition || proc.Status != "running" || len(proc.Tasks) != 1 {
				t.Fatalf("process = %+v, want running %s with one task", proc, tc.definition)
			}
			task := proc.Tasks[0]
			if task.Step != tc.firstStep || task.AssigneeRole != tc.role || task.Status != "open" {
				t.Errorf("first task = %+v, want open %s for %s", task, tc.firstStep, tc.role)
			}
			if got := task.DueAt.Sub(task.CreatedAt); got != tc.sla {
				t.Errorf("task due %s after creation, want the SLA %s", got, tc.sla)
			}
			started := obs.WaitFor(t, 1, "workflow.process-started.v1", deploytest.AboutRequest("workflow.process-started.v1", requestID))[0]
			if started.CausationID != sub.ID || started.CorrelationID != sub.CorrelationID || started.TenantID != "org-a" {
				t.Errorf("process-started causation %s correlation %s tenant %s, want %s %s org-a",
					started.CausationID, started.CorrelationID, started.TenantID, sub.ID, sub.CorrelationID)
			}
			if !strings.Contains(string(started.Payload), task.ID) {
				t.Errorf("process-started payload %s lacks firstTaskId %s", started.Payload, task.ID)
			}

			// A redelivery and a second event for the same request start nothing new.
			p.Publish(t, sub)
			again, err := envelope.New(sub.Type, sub.TenantID, sub.Producer, sub.Payload)
			if err != nil {
				t.Fatal(err)
			}
			p.Publish(t, again)
			marker := p.submitted(t, "org-a", "citizen-1", tc.serviceID)
			queued += 3
			waitHandled(t, p, url, queued, marker)
			if n := len(processes(t, url, attendant, requestID)); n != 1 {
				t.Errorf("%d processes after duplicates, want 1", n)
			}
			if n := len(obs.Matching(t, deploytest.AboutRequest("workflow.process-started.v1", requestID))); n != 1 {
				t.Errorf("%d process-started events, want 1", n)
			}
		})
	}
}

// waitHandled is the positive signal behind "nothing new happened": the
// marker, sent after the messages under test, has started its process;
// the consumer has acked queued messages, all it was sent so far; and
// every process-started event is out of the outbox. The marker alone is
// not enough: the consumer runs several handlers at once, so it can
// overtake the messages ahead of it. The processed counter counts acks,
// which follow the commits.
func waitHandled(t *testing.T, p *platform, url string, queued int, marker envelope.Envelope) {
	t.Helper()
	waitProcess(t, url, p.Token(t, marker.TenantID, "attendant-1", "attendant"), requestIDOf(t, marker))
	fabrictest.WaitCounter(t, 20*time.Second, url+"/metrics", "fabric_consumer_processed_total",
		map[string]string{"consumer": "workflow.request-submitted"}, float64(queued))
	fabrictest.WaitOutboxPublished(t, p.Pool, "workflow.process-started.v1", "")
}

func TestTaskCompletionChain(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	obs := fabrictest.Observe(t, p.Conn, "workflow.#")
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")
	operator := p.Token(t, "org-a", "operator-1", "operator")
	tests := []struct {
		name      string
		serviceID string
		decisions []string // outcome body per task, in order
		steps     []string // steps expected to be completed
		outcome   string
	}{
		{"approved through three steps", "building-permit", []string{``, `{"outcome":"done"}`, `{"outcome":"approved"}`},
			[]string{"document-check", "technical-review", "decision"}, "approved"},
		{"rejected at the second step", "building-permit", []string{`{"outcome":"approved","reason":"documents complete"}`,
			`{"outcome":"rejected","reason":"  a planta não tem assinatura  "}`},
			[]string{"document-check", "technical-review"}, "rejected"},
		{"single step done", "iptu-segunda-via", []string{``}, []string{"issue"}, "completed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub := p.submitted(t, "org-a", "citizen-1", tc.serviceID)
			requestID := requestIDOf(t, sub)
			proc := waitProcess(t, url, attendant, requestID)
			for i, body := range tc.decisions {
				open := proc.Tasks[len(proc.Tasks)-1]
				if open.Status != "open" || open.Step != tc.steps[i] {
					t.Fatalf("task %d = %+v, want open %s", i, open, tc.steps[i])
				}
				token := attendant
				if open.AssigneeRole == "operator" {
					token = operator
				}
				resp := complete(t, url, token, open.ID, body)
				if resp.Status != http.StatusOK {
					t.Fatalf("complete %s = %d %s", open.Step, resp.Status, resp.Body)
				}
				resp.JSON(t, &proc)
			}
			if proc.Status != "completed" || proc.Outcome != tc.outcome || len(proc.Tasks) != len(tc.steps) {
				t.Errorf("process = %+v, want completed %s with %d tasks", proc, tc.outcome, len(tc.steps))
			}
			for i, task := range proc.Tasks {
				if task.Status != "completed" || task.CompletedBy == "" {
					t.Errorf("task %+v, want completed with its completer", task)
				}
				if want := wantReason(t, tc.decisions[i]); task.Reason != want {
					t.Errorf("task %s reason = %q, want %q", task.Step, task.Reason, want)
				}
			}
			if seen := processes(t, url, attendant, requestID)[0]; seen.Tasks[len(seen.Tasks)-1].Reason != proc.Tasks[len(proc.Tasks)-1].Reason {
				t.Errorf("GET /v1/processes shows reason %q, the completion returned %q", seen.Tasks[len(seen.Tasks)-1].Reason, proc.Tasks[len(proc.Tasks)-1].Reason)
			}
			done := obs.WaitFor(t, len(tc.steps), "task-completed events", deploytest.AboutRequest("workflow.task-completed.v1", requestID))
			for _, e := range done {
				var ev struct{ Step, Reason string }
				if err := json.Unmarshal(e.Payload, &ev); err != nil {
					t.Fatal(err)
				}
				i := slices.Index(tc.steps, ev.Step)
				if want := wantReason(t, tc.decisions[i]); ev.Reason != want {
					t.Errorf("task-completed of %s carries reason %q, want %q", ev.Step, ev.Reason, want)
				}
			}
			final := obs.WaitFor(t, 1, "process-completed", deploytest.AboutRequest("workflow.process-completed.v1", requestID))
			if !strings.Contains(string(final[0].Payload), `"outcome":"`+tc.outcome+`"`) {
				t.Errorf("process-completed payload = %s, want outcome %s", final[0].Payload, tc.outcome)
			}
			for _, e := range append(done, final...) {
				if e.CorrelationID != sub.CorrelationID || e.TenantID != "org-a" {
					t.Errorf("%s correlation %s tenant %s, want %s org-a", e.Type, e.CorrelationID, e.TenantID, sub.CorrelationID)
				}
			}
		})
	}
}

func TestCompleteTaskRejects(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")
	sub := p.submitted(t, "org-a", "citizen-1", "building-permit")
	proc := waitProcess(t, url, attendant, requestIDOf(t, sub))
	first := proc.Tasks[0].ID
	if resp := complete(t, url, attendant, first, ""); resp.Status != http.StatusOK {
		t.Fatalf("complete first task = %d %s", resp.Status, resp.Body)
	}
	proc = processes(t, url, attendant, requestIDOf(t, sub))[0]
	operatorStep := proc.Tasks[1].ID // technical-review, assigned to operators

	operator := p.Token(t, "org-a", "operator-1", "operator")
	tests := []struct {
		name   string
		token  string
		task   string
		body   string
		ctype  string
		status int
	}{
		{"no token", "", operatorStep, "", "", 401},
		{"citizen", p.Token(t, "org-a", "citizen-1", "citizen"), operatorStep, "", "", 403},
		{"attendant on an operator step", attendant, operatorStep, "", "", 403},
		{"another tenant", p.Token(t, "org-b", "operator-1", "operator"), operatorStep, "", "", 404},
		{"not a task id", attendant, "nope", "", "", 404},
		{"unknown task", attendant, deploytest.NewID(t), "", "", 404},
		{"already completed", attendant, first, "", "", 409},
		{"bad outcome", operator, operatorStep, `{"outcome":"maybe"}`, "application/json", 422},
		{"malformed JSON", attendant, operatorStep, `{"outcome":`, "application/json", 400},
		{"unknown field", attendant, operatorStep, `{"verdict":"approved"}`, "application/json", 400},
		{"not JSON", attendant, operatorStep, `outcome=approved`, "application/x-www-form-urlencoded", 415},
		{"rejected without a reason", operator, operatorStep, `{"outcome":"rejected"}`, "application/json", 422},
		{"rejected with a blank reason", operator, operatorStep, `{"outcome":"rejected","reason":" \t\n "}`, "application/json", 422},
		{"a reason over 1000 characters", operator, operatorStep, `{"outcome":"done","reason":"` + strings.Repeat("é", 1001) + `"}`, "application/json", 422},
		{"a reason that is no string", operator, operatorStep, `{"outcome":"rejected","reason":1}`, "application/json", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.ctype != "" {
				h["Content-Type"] = tc.ctype
			}
			resp := do(t, http.MethodPost, url+"/v1/tasks/"+tc.task+"/complete", tc.token, strings.NewReader(tc.body), h)
			expectProblem(t, resp, tc.status)
			if strings.Contains(tc.name, "reason") && !strings.Contains(tc.name, "no string") {
				var p struct {
					Errors map[string]string `json:"errors"`
				}
				resp.JSON(t, &p)
				if p.Errors["reason"] == "" {
					t.Errorf("problem %s does not name the reason", resp.Body)
				}
			}
		})
	}
	if got := processes(t, url, attendant, requestIDOf(t, sub))[0].Tasks[1].Status; got != "open" {
		t.Errorf("operator step status = %s after refused completions, want open", got)
	}
}

func TestProcessesVisibility(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	sub := p.submitted(t, "org-a", "citizen-1", "building-permit")
	requestID := requestIDOf(t, sub)
	waitProcess(t, url, p.Token(t, "org-a", "attendant-1", "attendant"), requestID)
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"attendant of the tenant", p.Token(t, "org-a", "attendant-1", "attendant"), 1},
		{"operator of the tenant", p.Token(t, "org-a", "operator-1", "operator"), 1},
		{"the citizen who submitted", p.Token(t, "org-a", "citizen-1", "citizen"), 1},
		{"another citizen", p.Token(t, "org-a", "citizen-2", "citizen"), 0},
		{"attendant of another tenant", p.Token(t, "org-b", "attendant-1", "attendant"), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(processes(t, url, tc.token, requestID)); got != tc.want {
				t.Errorf("GET /v1/processes = %d processes, want %d", got, tc.want)
			}
		})
	}
	t.Run("requestId missing", func(t *testing.T) {
		expectProblem(t, do(t, http.MethodGet, url+"/v1/processes", p.Token(t, "org-a", "attendant-1", "attendant"), nil, nil), 400)
	})
	t.Run("no token", func(t *testing.T) {
		expectProblem(t, do(t, http.MethodGet, url+"/v1/processes?requestId="+requestID, "", nil, nil), 401)
	})
}

// TestSLABreachReportedOnceAcrossInstances runs two instances on one
// schema with a short SLA: every overdue task is reported exactly once,
// and a task completed in time is never reported.
func TestSLABreachReportedOnceAcrossInstances(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"fast","definitions":[
		{"id":"fast","steps":[{"name":"triage","assigneeRole":"attendant","sla":"2s"},{"name":"decision","assigneeRole":"attendant","sla":"1h"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPlatform(t)
	extra := map[string]string{"WORKFLOW_DEFINITIONS": defs, "SLA_CHECK_INTERVAL": "100ms", "SLA_BATCH": "3"}
	url := p.start(t, extra)
	p.start(t, extra)
	obs := fabrictest.Observe(t, p.Conn, "task.#")
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")

	// Completed well within its two seconds: never breached.
	inTime := requestIDOf(t, p.submitted(t, "org-a", "citizen-1", "svc"))
	proc := waitProcess(t, url, attendant, inTime)
	if resp := complete(t, url, attendant, proc.Tasks[0].ID, ""); resp.Status != http.StatusOK {
		t.Fatalf("complete in time = %d %s", resp.Status, resp.Body)
	}

	const overdue = 8
	var ids []string
	for i := range overdue {
		tenant := []string{"org-a", "org-b"}[i%2]
		ids = append(ids, requestIDOf(t, p.submitted(t, tenant, "citizen-1", "svc")))
	}
	breaches := obs.WaitFor(t, overdue, "task.sla-breached.v1 for every overdue task", func(e envelope.Envelope) bool {
		return e.Type == "task.sla-breached.v1"
	})
	// A breach reported twice would come from a later sweep. A marker task
	// due two seconds from now is reported by a sweep that runs after
	// both instances swept (every 100 ms) for those two seconds; once its
	// breach is out and every breach enqueued before it too, whatever
	// those sweeps reported is in the observer's queue.
	marker := requestIDOf(t, p.submitted(t, "org-a", "citizen-1", "svc"))
	markerBreach := obs.Next(t, "the marker task's breach", deploytest.AboutRequest("task.sla-breached.v1", marker))
	fabrictest.WaitOutboxPublished(t, p.Pool, "task.sla-breached.v1", markerBreach.ID)
	breaches = obs.Matching(t, func(e envelope.Envelope) bool {
		return e.Type == "task.sla-breached.v1" && !deploytest.AboutRequest("task.sla-breached.v1", marker)(e)
	})
	if n := len(obs.Matching(t, deploytest.AboutRequest("task.sla-breached.v1", marker))); n != 1 {
		t.Errorf("marker task reported %d times, want 1", n)
	}
	seen := map[string]bool{}
	for _, e := range breaches {
		var tenantOK bool
		for i, id := range ids {
			if strings.Contains(string(e.Payload), id) {
				tenantOK = e.TenantID == []string{"org-a", "org-b"}[i%2]
			}
		}
		if !tenantOK {
			t.Errorf("breach %s (tenant %s) is not one of the overdue requests in its tenant", e.Payload, e.TenantID)
		}
		if seen[string(e.Payload)] {
			t.Errorf("breach reported twice: %s", e.Payload)
		}
		seen[string(e.Payload)] = true
	}
	if len(breaches) != overdue {
		t.Errorf("%d breaches, want %d", len(breaches), overdue)
	}
	task := waitProcess(t, url, attendant, ids[0]).Tasks[0]
	if !task.SLABreached || task.Status != "open" {
		t.Errorf("overdue task = %+v, want open and breached", task)
	}
	if got := waitProcess(t, url, attendant, inTime).Tasks; got[0].SLABreached || got[1].SLABreached {
		t.Errorf("tasks of the request completed in time = %+v, want none breached", got)
	}
}

// TestRowLevelSecurity: after a request's process ran to an SEI
// registration, every table of the schema (timers and the fabric's
// included) keeps org-a's rows from any other tenant's session.
func TestRowLevelSecurity(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	requestID := requestIDOf(t, p.submitted(t, "org-a", "citizen-1", "svc"))
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")
	// Approved through both steps of standard-review: an SEI registration
	// row too (pending: SEI is off here).
	for _, body := range []string{``, `{"outcome":"approved"}`} {
		proc := waitProcess(t, url, attendant, requestID)
		if resp := complete(t, url, attendant, proc.Tasks[len(proc.Tasks)-1].ID, body); resp.Status != http.StatusOK {
			t.Fatalf("complete = %d %s", resp.Status, resp.Body)
		}
	}
	if sei := processes(t, url, attendant, requestID)[0].SEI; sei == nil || sei.Status != "pending" {
		t.Fatalf("SEI registration after the approval = %+v, want pending", sei)
	}
	p.CheckRowSecurity(t, "org-a", nil)
}

func cancelledEvent(t *testing.T, submitted envelope.Envelope) envelope.Envelope {
	t.Helper()
	var sub struct{ RequestID, CitizenID string }
	if err := json.Unmarshal(submitted.Payload, &sub); err != nil {
		t.Fatal(err)
	}
	env, err := envelope.New("request.cancelled.v1", submitted.TenantID, "request-service", map[string]any{
		"requestId": sub.RequestID, "previousStatus": "in_progress", "cancelledBy": sub.CitizenID,
		"cancelledAt": time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	env.CorrelationID = submitted.CorrelationID
	return env
}

// A cancelled request stops its process: the process and its open task
// become cancelled. A cancellation that overtakes its submission (they
// travel on two queues) keeps the process from ever starting.
func TestCancelledRequestStopsItsProcess(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	attendant := p.Token(t, "org-a", "attendant-1", "attendant")

	running := p.submitted(t, "org-a", "citizen-1", "building-permit")
	before := waitProcess(t, url, attendant, requestIDOf(t, running))
	if before.Status != "running" || len(before.Tasks) != 1 || before.Tasks[0].Status != "open" {
		t.Fatalf("process before the cancellation = %+v, want running with one open task", before)
	}
	p.Publish(t, cancelledEvent(t, running))
	var after processView
	fabrictest.Eventually(t, 20*time.Second, "the process cancelled", func() bool {
		after = processes(t, url, attendant, requestIDOf(t, running))[0]
		return after.Status == "cancelled"
	})
	if len(after.Tasks) != 1 || after.Tasks[0].Status != "cancelled" {
		t.Errorf("tasks after the cancellation = %+v, want the one task cancelled", after.Tasks)
	}
	var timers int
	if err := p.Pool.QueryRow(context.Background(), "SELECT count(*) FROM sla_timer WHERE task_id = $1", after.Tasks[0].ID).Scan(&timers); err != nil || timers != 0 {
		t.Errorf("SLA timers of the cancelled task = %d (%v), want 0", timers, err)
	}

	// The cancellation first, then the submission.
	late, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{
		"requestId": deploytest.NewID(t), "protocol": "AGR-2026-000002", "serviceId": "building-permit", "formId": "f",
		"formVersion": 1, "channel": "web", "citizenId": "citizen-2", "submittedAt": time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, cancelledEvent(t, late))
	first := waitProcess(t, url, attendant, requestIDOf(t, late))
	if first.Status != "cancelled" || len(first.Tasks) != 0 {
		t.Fatalf("process after an early cancellation = %+v, want cancelled with no task", first)
	}
	p.Publish(t, late)
	// Both submissions handled (a positive signal), and still no task.
	fabrictest.WaitCounter(t, 20*time.Second, url+"/metrics", "fabric_consumer_processed_total",
		map[string]string{"consumer": "workflow.request-submitted"}, 2)
	if got := processes(t, url, attendant, requestIDOf(t, late)); len(got) != 1 || got[0].Status != "cancelled" || len(got[0].Tasks) != 0 {
		t.Errorf("process after the late submission = %+v, want still cancelled with no task", got)
	}
}
