package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/workflow/seitest"
)

// startCommand builds workflow.start.v1 as an integration (through the
// request service) sends it; citizen may be empty.
func startCommand(t *testing.T, tenant, requestID, serviceID, citizen string) envelope.Envelope {
	t.Helper()
	p := map[string]any{"requestId": requestID, "serviceId": serviceID}
	if citizen != "" {
		p["citizenId"] = citizen
	}
	env, err := envelope.New("workflow.start.v1", tenant, "request-service", p)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestStartCommand(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	obs := fabrictest.Observe(t, p.Conn, "workflow.#")
	staffA := p.Token(t, "org-a", "attendant-1", "attendant")
	staffB := p.Token(t, "org-b", "attendant-1", "attendant")
	sent := 0 // commands sent to workflow.start-commands so far
	send := func(env envelope.Envelope) {
		t.Helper()
		p.Publish(t, env)
		sent++
	}
	// settled is the positive signal behind "nothing else happened": the
	// consumer has acked every command sent so far (acks follow commits)
	// and every process-started event is out of the outbox.
	settled := func(t *testing.T) {
		t.Helper()
		fabrictest.WaitCounter(t, 20*time.Second, url+"/metrics", "fabric_consumer_processed_total",
			map[string]string{"consumer": "workflow.start-commands"}, float64(sent))
		fabrictest.WaitOutboxPublished(t, p.Pool, "workflow.process-started.v1", "")
	}
	startedEvents := func(t *testing.T, requestID string) int {
		t.Helper()
		return len(obs.Matching(t, deploytest.AboutRequest("workflow.process-started.v1", requestID)))
	}

	t.Run("starts one process, and repeats are no-ops", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		cmd := startCommand(t, "org-a", requestID, "building-permit", "citizen-1")
		send(cmd)
		proc := waitProcess(t, url, staffA, requestID)
		if proc.DefinitionID != "building-permit" || proc.Status != "running" || len(proc.Tasks) != 1 || proc.Tasks[0].Step != "document-check" {
			t.Fatalf("process = %+v, want running building-permit with its first task", proc)
		}
		started := obs.WaitFor(t, 1, "workflow.process-started.v1", deploytest.AboutRequest("workflow.process-started.v1", requestID))[0]
		if started.CausationID != cmd.ID || started.CorrelationID != cmd.CorrelationID || started.TenantID != "org-a" {
			t.Errorf("process-started causation %s correlation %s tenant %s, want %s %s org-a",
				started.CausationID, started.CorrelationID, started.TenantID, cmd.ID, cmd.CorrelationID)
		}
		if got := processes(t, url, p.Token(t, "org-a", "citizen-1", "citizen"), requestID); len(got) != 1 {
			t.Errorf("the command's citizen sees %d processes, want 1", len(got))
		}

		send(cmd)                                                                  // redelivered: the inbox skips it
		send(startCommand(t, "org-a", requestID, "iptu-segunda-via", "citizen-1")) // another command, same request
		settled(t)
		if got := processes(t, url, staffA, requestID); len(got) != 1 || got[0].ID != proc.ID || got[0].DefinitionID != "building-permit" {
			t.Errorf("processes after repeated commands = %+v, want the first one alone", got)
		}
		if n := startedEvents(t, requestID); n != 1 {
			t.Errorf("%d process-started events, want 1", n)
		}
	})

	t.Run("a start after request.submitted is a no-op", func(t *testing.T) {
		sub := p.submitted(t, "org-a", "citizen-1", "building-permit")
		requestID := requestIDOf(t, sub)
		proc := waitProcess(t, url, staffA, requestID)
		send(startCommand(t, "org-a", requestID, "iptu-segunda-via", "citizen-1"))
		settled(t)
		if got := processes(t, url, staffA, requestID); len(got) != 1 || got[0].ID != proc.ID || got[0].DefinitionID != "building-permit" {
			t.Errorf("processes = %+v, want the submission's alone", got)
		}
		if n := startedEvents(t, requestID); n != 1 {
			t.Errorf("%d process-started events, want 1", n)
		}
	})

	t.Run("a cancelled request's tombstone wins", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		late, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{
			"requestId": requestID, "protocol": "AGR-2026-000003", "serviceId": "building-permit", "formId": "f",
			"formVersion": 1, "channel": "web", "citizenId": "citizen-1", "submittedAt": time.Now().UTC().Format(time.RFC3339Nano)})
		if err != nil {
			t.Fatal(err)
		}
		p.Publish(t, cancelledEvent(t, late)) // only its payload is read
		if first := waitProcess(t, url, staffA, requestID); first.Status != "cancelled" {
			t.Fatalf("process after the cancellation = %+v, want cancelled", first)
		}
		send(startCommand(t, "org-a", requestID, "building-permit", "citizen-1"))
		settled(t)
		if got := processes(t, url, staffA, requestID); len(got) != 1 || got[0].Status != "cancelled" || len(got[0].Tasks) != 0 {
			t.Errorf("process after the start command = %+v, want still cancelled with no task", got)
		}
	})

	t.Run("tenants are apart", func(t *testing.T) {
		// The same request id in two tenants: two processes, each seen by
		// its own tenant alone.
		requestID := deploytest.NewID(t)
		send(startCommand(t, "org-a", requestID, "building-permit", "citizen-1"))
		send(startCommand(t, "org-b", requestID, "iptu-segunda-via", "citizen-1"))
		a := waitProcess(t, url, staffA, requestID)
		b := waitProcess(t, url, staffB, requestID)
		if a.ID == b.ID || a.DefinitionID != "building-permit" || b.DefinitionID != "single-step" {
			t.Errorf("org-a %+v, org-b %+v: want a process each, from each tenant's command", a, b)
		}
		settled(t)
		for _, tc := range []struct {
			token, want string
		}{{staffA, a.ID}, {staffB, b.ID}} {
			if got := processes(t, url, tc.token, requestID); len(got) != 1 || got[0].ID != tc.want {
				t.Errorf("processes = %+v, want %s alone", got, tc.want)
			}
		}
	})

	t.Run("no citizenId: staff only; an unknown service: the default definition", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		send(startCommand(t, "org-a", requestID, "not-a-service", ""))
		proc := waitProcess(t, url, staffA, requestID)
		if proc.DefinitionID != "standard-review" {
			t.Errorf("definition = %s, want the default standard-review", proc.DefinitionID)
		}
		if got := processes(t, url, p.Token(t, "org-a", "citizen-1", "citizen"), requestID); len(got) != 0 {
			t.Errorf("a citizen sees %d processes of a command without citizenId, want 0", len(got))
		}
	})
}

// seiDefinitions: one step, so a single approval completes the process,
// filed under an SEI unit.
const seiDefinitions = `{"default":"one","definitions":[
	{"id":"one","seiUnit":"SEMAD-PROTOCOLO","steps":[{"name":"decision","assigneeRole":"attendant","sla":"1h"}]}]}`

// approve starts a process for requestID in tenant with a start command
// (under seiDefinitions: one step) and approves its task; it returns the
// process as the approval answered it.
func (p *platform) approve(t *testing.T, url, tenant, requestID string) processView {
	t.Helper()
	p.Publish(t, startCommand(t, tenant, requestID, "svc", "citizen-1"))
	staff := p.Token(t, tenant, "attendant-1", "attendant")
	proc := waitProcess(t, url, staff, requestID)
	resp := complete(t, url, staff, proc.Tasks[0].ID, `{"outcome":"approved","reason":"tudo certo"}`)
	if resp.Status != http.StatusOK {
		t.Fatalf("approve = %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &proc)
	if proc.Outcome != "approved" || proc.SEI == nil || proc.SEI.Status != "pending" && proc.SEI.Status != "registered" {
		t.Fatalf("approved process = %+v (SEI %+v), want approved with its SEI registration under way", proc, proc.SEI)
	}
	return proc
}

// waitSEI waits until the request's SEI registration has status and
// returns it as token sees it.
func waitSEI(t *testing.T, url, token, requestID, status string) seiView {
	t.Helper()
	var got *seiView
	fabrictest.Eventually(t, 30*time.Second, "SEI registration "+status+" of request "+requestID, func() bool {
		list := processes(t, url, token, requestID)
		if len(list) == 1 {
			got = list[0].SEI
		}
		return got != nil && got.Status == status
	})
	return *got
}

func TestSEIRegistration(t *testing.T) {
	p := newPlatform(t)
	fake := seitest.Start(t)
	url := p.start(t, map[string]string{"WORKFLOW_DEFINITIONS": writeDefinitions(t, seiDefinitions),
		"SEI_URL": fake.URL, "SEI_TIMEOUT": "300ms", "RETRY_TIERS": "100ms,200ms,300ms",
		// A one-second hold plays the deployment's ten minutes: the
		// pauses scale with it, so an hour of SEI down is six holds.
		"OUTAGE_HOLD": "1s"})
	staff := p.Token(t, "org-a", "attendant-1", "attendant")
	citizen := p.Token(t, "org-a", "citizen-1", "citizen")
	operator := p.Token(t, "org-a", "operator-1", "operator")
	metrics := url + "/metrics"
	seiQueue := map[string]string{"consumer": "workflow.sei-register"}

	t.Run("approved: registered once, its number in the view", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		p.approve(t, url, "org-a", requestID)
		got := waitSEI(t, url, staff, requestID, "registered")
		regs := fake.Registered("org-a", requestID)
		if len(regs) != 1 || got.Number != regs[0].Number || got.Number == "" {
			t.Fatalf("view %+v, SEI's registrations %+v: want one, its number shown", got, regs)
		}
		if got.Unit != "SEMAD-PROTOCOLO" || got.Attempts != 1 || got.RegisteredAt == nil || got.LastError != "" {
			t.Errorf("registration = %+v, want unit SEMAD-PROTOCOLO, 1 attempt, a time, no error", got)
		}
		calls := fake.Calls(requestID)
		if len(calls) != 1 || calls[0].IdempotencyKey != requestID || calls[0].Unit != "SEMAD-PROTOCOLO" || calls[0].TenantID != "org-a" {
			t.Errorf("SEI calls = %+v, want one keyed by the request id, with the unit and tenant", calls)
		}
		if seen := waitSEI(t, url, citizen, requestID, "registered"); seen.Number != got.Number {
			t.Errorf("the citizen sees number %q, want %q", seen.Number, got.Number)
		}

		// The command again (redelivered, or sent by hand): skipped, SEI
		// not called.
		before := fabrictest.Counter(t, metrics, "fabric_consumer_processed_total", seiQueue)
		again, err := envelope.New("integration.sei.register.v1", "org-a", "workflow-service", map[string]any{"requestId": requestID})
		if err != nil {
			t.Fatal(err)
		}
		p.Publish(t, again)
		fabrictest.WaitCounter(t, 20*time.Second, metrics, "fabric_consumer_processed_total", seiQueue, before+1)
		if n := len(fake.Calls(requestID)); n != 1 {
			t.Errorf("%d SEI calls after the repeated command, want still 1", n)
		}
	})

	t.Run("503 twice: registered after two retries", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		fake.Unavailable(requestID, 2)
		p.approve(t, url, "org-a", requestID)
		got := waitSEI(t, url, staff, requestID, "registered")
		calls := fake.Calls(requestID)
		if len(calls) != 3 || calls[0].Status != 503 || calls[1].Status != 503 || calls[2].Status != 201 {
			t.Errorf("SEI calls = %+v, want 503, 503, 201", calls)
		}
		if regs := fake.Registered("org-a", requestID); len(regs) != 1 || regs[0].Number != got.Number {
			t.Errorf("registrations %+v, view %+v: want one, shown", regs, got)
		}
		if got.Attempts != 3 || got.LastError != "" {
			t.Errorf("registration = %+v, want 3 attempts and the error cleared", got)
		}
	})

	t.Run("SEI down for an hour (six holds): every registration once, none dead-lettered", func(t *testing.T) {
		deadLettered := map[string]string{"consumer": "workflow.sei-register"}
		dlqBefore := fabrictest.Counter(t, metrics, "fabric_consumer_dead_lettered_total", deadLettered)
		retriedBefore := fabrictest.Counter(t, metrics, "fabric_consumer_retried_total", deadLettered)
		fake.Down(true)
		var ids []string
		for range 6 {
			id := deploytest.NewID(t)
			ids = append(ids, id)
			p.approve(t, url, "org-a", id)
		}
		// Every command reached SEI and was refused: the outage is on.
		fabrictest.Eventually(t, 30*time.Second, "a call of every command during the outage", func() bool {
			for _, id := range ids {
				if len(fake.Calls(id)) == 0 {
					return false
				}
			}
			return true
		})
		outageStart := time.Now()
		// Six holds and a little more: each command goes back to its
		// queue six times, as an hour of SEI down would with the
		// deployment's ten-minute hold.
		fabrictest.Eventually(t, 30*time.Second, "the hour's end (six one-second holds)", func() bool {
			return time.Since(outageStart) >= 6100*time.Millisecond
		})
		for _, id := range ids {
			if regs := fake.Registered("org-a", id); len(regs) != 0 {
				t.Fatalf("request %s registered while SEI was down: %+v", id, regs)
			}
		}
		fake.Down(false)
		for _, id := range ids {
			got := waitSEI(t, url, staff, id, "registered")
			if regs := fake.Registered("org-a", id); len(regs) != 1 || regs[0].Number != got.Number {
				t.Errorf("request %s: registrations %+v, view %+v; want one, shown", id, regs, got)
			}
			if calls := fake.Calls(id); len(calls) < 3 {
				t.Errorf("request %s: %d calls through the outage, want it called again and again", id, len(calls))
			}
		}
		if n := fabrictest.Counter(t, metrics, "fabric_consumer_dead_lettered_total", deadLettered); n != dlqBefore {
			t.Errorf("%v messages dead-lettered during the outage, want none", n-dlqBefore)
		}
		if n := fabrictest.Counter(t, metrics, "fabric_consumer_retried_total", deadLettered); n != retriedBefore {
			t.Errorf("%v retries scheduled during the outage, want none: an outage is waited out, not retried", n-retriedBefore)
		}
	})

	t.Run("stalled past the timeout: an outage, then registered once", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		fake.Stall(requestID, 1) // SEI registers, but answers too late
		p.approve(t, url, "org-a", requestID)
		got := waitSEI(t, url, staff, requestID, "registered")
		calls := fake.Calls(requestID)
		if len(calls) != 2 || calls[0].Status != 0 || calls[1].Status != 200 {
			t.Errorf("SEI calls = %+v, want a stalled one, then 200 (the key seen before)", calls)
		}
		if regs := fake.Registered("org-a", requestID); len(regs) != 1 || regs[0].Number != got.Number {
			t.Errorf("registrations %+v, view %+v: want one, its number shown", regs, got)
		}
		if got.Attempts != 2 {
			t.Errorf("attempts = %d, want 2", got.Attempts)
		}
	})

	t.Run("rejected: recorded with the reason, dead-lettered, not retried, reported", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		failures := fabrictest.Observe(t, p.Conn, "workflow.integration-failed.v1")
		fake.Reject(requestID, "unidade SEMAD-PROTOCOLO encerrada")
		before := fabrictest.Counter(t, metrics, "fabric_consumer_dead_lettered_total",
			map[string]string{"consumer": "workflow.sei-register", "reason": "SEI_REJECTED"})
		p.approve(t, url, "org-a", requestID)
		got := waitSEI(t, url, staff, requestID, "rejected")
		if !strings.Contains(got.LastError, "unidade SEMAD-PROTOCOLO encerrada") || got.Number != "" || got.Attempts != 1 {
			t.Errorf("registration = %+v, want SEI's reason, no number, 1 attempt", got)
		}
		if seen := waitSEI(t, url, citizen, requestID, "rejected"); seen.LastError != "" {
			t.Errorf("the citizen sees SEI's error %q, want it for staff only", seen.LastError)
		}
		// Dead-lettering ends the message's life: no retry can follow.
		fabrictest.WaitCounter(t, 20*time.Second, metrics, "fabric_consumer_dead_lettered_total",
			map[string]string{"consumer": "workflow.sei-register", "reason": "SEI_REJECTED"}, before+1)
		if calls := fake.Calls(requestID); len(calls) != 1 || calls[0].Status != 422 {
			t.Errorf("SEI calls = %+v, want the one refusal", calls)
		}
		// The workflow gave up on it: workflow.integration-failed.v1, once,
		// derived from the command. Recorded as rejected again (the command
		// sent by hand), nothing more is reported.
		failed := failures.Next(t, "the integration failure", deploytest.AboutRequest("workflow.integration-failed.v1", requestID))
		var f struct {
			Integration, Operation, Failure, Reason string
			Attempts                                int
		}
		if err := json.Unmarshal(failed.Payload, &f); err != nil {
			t.Fatal(err)
		}
		if f.Integration != "sei" || f.Operation != "register" || f.Failure != "rejected" || !strings.Contains(f.Reason, "encerrada") ||
			f.Attempts != 1 || failed.CausationID == "" || failed.TenantID != "org-a" {
			t.Errorf("integration failure %s (causation %q), want SEI's rejection with its reason, derived from the command", failed.Payload, failed.CausationID)
		}
		again, err := envelope.New("integration.sei.register.v1", "org-a", "workflow-service", map[string]any{"requestId": requestID})
		if err != nil {
			t.Fatal(err)
		}
		p.Publish(t, again)
		fabrictest.WaitCounter(t, 20*time.Second, metrics, "fabric_consumer_dead_lettered_total",
			map[string]string{"consumer": "workflow.sei-register", "reason": "SEI_REJECTED"}, before+2)
		marker := deploytest.NewID(t)
		fake.Reject(marker, "unidade encerrada")
		p.approve(t, url, "org-a", marker)
		markerEvent := failures.Next(t, "the marker's integration failure", deploytest.AboutRequest("workflow.integration-failed.v1", marker))
		fabrictest.WaitOutboxPublished(t, p.Pool, "workflow.integration-failed.v1", markerEvent.ID)
		if n := len(failures.Matching(t, deploytest.AboutRequest("workflow.integration-failed.v1", requestID))); n != 1 {
			t.Errorf("the rejection was reported %d times, want once", n)
		}
		// The tenant's operator finds it in the DLQ API, with the reason.
		resp := do(t, http.MethodGet, url+"/v1/dlq/workflow.sei-register", operator, nil, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("GET /v1/dlq/workflow.sei-register = %d %s", resp.Status, resp.Body)
		}
		var letters []struct {
			Reason string `json:"reason"`
			Error  string `json:"error"`
		}
		resp.JSON(t, &letters)
		found := false
		for _, l := range letters {
			found = found || (l.Reason == "SEI_REJECTED" && strings.Contains(l.Error, "encerrada"))
		}
		if !found {
			t.Errorf("DLQ letters %s, want the rejection with its reason", resp.Body)
		}
	})

	t.Run("rejected, then replayed once SEI takes it: registered once, audited", func(t *testing.T) {
		requestID := deploytest.NewID(t)
		fake.Reject(requestID, "unidade SEMAD-PROTOCOLO em manutenção cadastral")
		p.approve(t, url, "org-a", requestID)
		waitSEI(t, url, staff, requestID, "rejected")
		// The operator finds the letter: its error names the request.
		var letterID string
		fabrictest.Eventually(t, 20*time.Second, "the rejection's letter in the DLQ API", func() bool {
			resp := do(t, http.MethodGet, url+"/v1/dlq/workflow.sei-register", operator, nil, nil)
			var letters []struct {
				MessageID string `json:"messageId"`
				Error     string `json:"error"`
			}
			resp.JSON(t, &letters)
			for _, l := range letters {
				if strings.Contains(l.Error, requestID) {
					letterID = l.MessageID
				}
			}
			return letterID != ""
		})
		// SEI's cause is fixed; the operator replays the letter.
		fake.Accept(requestID)
		body := `{"filter":{"ids":["` + letterID + `"]},"reason":"SEI reopened the unit"}`
		resp := do(t, http.MethodPost, url+"/v1/dlq/workflow.sei-register/replay", operator, strings.NewReader(body),
			map[string]string{"Content-Type": "application/json"})
		var rep struct {
			AuditID   int64    `json:"auditId"`
			Succeeded int      `json:"succeeded"`
			Refused   []string `json:"refused"`
		}
		resp.JSON(t, &rep)
		if resp.Status != http.StatusOK || rep.Succeeded != 1 || len(rep.Refused) != 0 {
			t.Fatalf("replay = %d %s, want the letter replayed", resp.Status, resp.Body)
		}
		got := waitSEI(t, url, staff, requestID, "registered")
		calls := fake.Calls(requestID)
		if len(calls) != 2 || calls[0].Status != 422 || calls[1].Status != 201 || calls[1].IdempotencyKey != requestID {
			t.Errorf("SEI calls = %+v, want the refusal, then one registration under the same key", calls)
		}
		if regs := fake.Registered("org-a", requestID); len(regs) != 1 || regs[0].Number != got.Number {
			t.Errorf("registrations %+v, view %+v: want one, shown", regs, got)
		}
		// Audited: who replayed which letter, and why.
		resp = do(t, http.MethodGet, url+"/v1/dlq/audit", operator, nil, nil)
		var audit []struct {
			ID         int64    `json:"id"`
			Operator   string   `json:"operator"`
			Reason     string   `json:"reason"`
			Action     string   `json:"action"`
			MessageIDs []string `json:"messageIds"`
		}
		resp.JSON(t, &audit)
		found := false
		for _, a := range audit {
			found = found || (a.ID == rep.AuditID && a.Action == "replay" && a.Operator == "operator-1" &&
				a.Reason == "SEI reopened the unit" && slices.Equal(a.MessageIDs, []string{letterID}))
		}
		if !found {
			t.Errorf("audit %s, want the replay of %s by operator-1 with its reason", resp.Body, letterID)
		}
	})

	t.Run("tenants are apart", func(t *testing.T) {
		// The same request id approved in two tenants: two registrations,
		// each tenant seeing its own number.
		requestID := deploytest.NewID(t)
		p.approve(t, url, "org-a", requestID)
		p.approve(t, url, "org-b", requestID)
		a := waitSEI(t, url, staff, requestID, "registered")
		b := waitSEI(t, url, p.Token(t, "org-b", "attendant-1", "attendant"), requestID, "registered")
		ra, rb := fake.Registered("org-a", requestID), fake.Registered("org-b", requestID)
		if len(ra) != 1 || len(rb) != 1 || a.Number != ra[0].Number || b.Number != rb[0].Number || a.Number == b.Number {
			t.Errorf("org-a %+v / %+v, org-b %+v / %+v: want one registration each, each its own number", a, ra, b, rb)
		}
	})
}

// TestSEIRegistrationOff: without SEI_URL the service runs, approvals
// record a pending registration and their commands wait in the queue; an
// instance with SEI_URL drains them.
func TestSEIRegistrationOff(t *testing.T) {
	p := newPlatform(t)
	defs := writeDefinitions(t, seiDefinitions)
	url := p.start(t, map[string]string{"WORKFLOW_DEFINITIONS": defs})
	staff := p.Token(t, "org-a", "attendant-1", "attendant")
	requestID := deploytest.NewID(t)
	p.approve(t, url, "org-a", requestID)
	if got := waitSEI(t, url, staff, requestID, "pending"); got.Attempts != 0 || got.Number != "" {
		t.Errorf("registration while off = %+v, want pending, never tried", got)
	}
	// The command is out of the outbox, so it waits in the queue.
	fabrictest.WaitOutboxPublished(t, p.Pool, "integration.sei.register.v1", "")

	fake := seitest.Start(t)
	p.start(t, map[string]string{"WORKFLOW_DEFINITIONS": defs, "SEI_URL": fake.URL})
	got := waitSEI(t, url, staff, requestID, "registered")
	if regs := fake.Registered("org-a", requestID); len(regs) != 1 || regs[0].Number != got.Number {
		t.Errorf("registrations %+v, view %+v: want one, shown", regs, got)
	}
}

func TestSEIConfig(t *testing.T) {
	base := map[string]string{"JWT_KEYS": "unused"}
	tests := []struct {
		name string
		env  map[string]string
		want string // in the error; "" for success
	}{
		{"off", nil, ""},
		{"on", map[string]string{"SEI_URL": "https://sei.example/api"}, ""},
		{"on with a timeout", map[string]string{"SEI_URL": "http://sei:8080", "SEI_TIMEOUT": "2s"}, ""},
		{"not a URL", map[string]string{"SEI_URL": "sei.example"}, "SEI_URL"},
		{"bad timeout", map[string]string{"SEI_URL": "http://sei", "SEI_TIMEOUT": "soon"}, "SEI_TIMEOUT"},
		{"zero timeout", map[string]string{"SEI_TIMEOUT": "0s"}, "SEI_TIMEOUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := loadConfig(func(k string) string { return env[k] })
			if tc.want == "" {
				if err != nil {
					t.Fatalf("loadConfig = %v", err)
				}
				if (c.SEI != nil) != (env["SEI_URL"] != "") {
					t.Errorf("SEI client %v with SEI_URL %q", c.SEI, env["SEI_URL"])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadConfig = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
