package main

// The citizen portal's own views: "my requests", cancelling one, its
// timeline; and the operators' command paths.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

type listed struct {
	Items []struct {
		ID, Protocol, Status, CitizenID string
		SubmittedAt                     time.Time
	}
	NextCursor string
}

func (s *testService) list(t *testing.T, token, query string) listed {
	t.Helper()
	resp := s.do(t, http.MethodGet, "/v1/requests?"+query, token, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/requests?%s = %d %s, want 200", query, resp.Status, resp.Body)
	}
	var l listed
	resp.JSON(t, &l)
	return l
}

// GET /v1/requests: a citizen sees their own requests, staff their
// tenant's, newest first; pages neither repeat nor skip a request.
func TestListRequests(t *testing.T) {
	s := start(t, nil)
	maria, joao := s.Token(t, "org-a", "citizen-maria", "citizen"), s.Token(t, "org-a", "citizen-joao", "citizen")
	attendantA := s.Token(t, "org-a", "attendant-1", "attendant")
	mariaB := s.Token(t, "org-b", "citizen-maria", "citizen") // the same subject in another tenant
	var marias []string
	for range 5 {
		marias = append(marias, mustSubmit(t, s, maria).ID)
	}
	joaos := []string{mustSubmit(t, s, joao).ID}
	mustSubmit(t, s, mariaB)
	// One of Maria's moves on, for the status filter.
	if _, err := s.Pool.Exec(context.Background(), "UPDATE request SET status = 'in_progress' WHERE id = $1", marias[1]); err != nil {
		t.Fatal(err)
	}
	ids := func(l listed) []string {
		var out []string
		for _, it := range l.Items {
			out = append(out, it.ID)
		}
		return out
	}

	t.Run("a citizen sees their own, newest first", func(t *testing.T) {
		got := ids(s.list(t, maria, ""))
		want := slices.Clone(marias)
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Errorf("Maria's list = %v, want %v", got, want)
		}
		if got := ids(s.list(t, joao, "")); !slices.Equal(got, joaos) {
			t.Errorf("João's list = %v, want %v", got, joaos)
		}
	})
	t.Run("another tenant's citizen of the same name sees only their own", func(t *testing.T) {
		if got := s.list(t, mariaB, ""); len(got.Items) != 1 || slices.Contains(marias, got.Items[0].ID) {
			t.Errorf("org-b's Maria sees %v, want her one request only", ids(got))
		}
	})
	t.Run("staff see their tenant's requests", func(t *testing.T) {
		got := ids(s.list(t, attendantA, "limit=100"))
		if len(got) != len(marias)+len(joaos) {
			t.Errorf("attendant of org-a sees %d requests %v, want %d", len(got), got, len(marias)+len(joaos))
		}
	})
	t.Run("status filter", func(t *testing.T) {
		if got := ids(s.list(t, maria, "status=in_progress")); !slices.Equal(got, []string{marias[1]}) {
			t.Errorf("in_progress = %v, want [%s]", got, marias[1])
		}
	})
	t.Run("pages of two", func(t *testing.T) {
		var seen []string
		query, pages := "limit=2", 0
		for {
			page := s.list(t, maria, query)
			pages++
			if len(page.Items) > 2 {
				t.Fatalf("page of %d, want at most 2", len(page.Items))
			}
			seen = append(seen, ids(page)...)
			if page.NextCursor == "" {
				break
			}
			query = "limit=2&cursor=" + url.QueryEscape(page.NextCursor)
		}
		want := slices.Clone(marias)
		slices.Reverse(want)
		if !slices.Equal(seen, want) || pages != 3 {
			t.Errorf("paged %d pages: %v, want 3 pages: %v", pages, seen, want)
		}
	})
	for _, query := range []string{"status=approved", "limit=0", "limit=101", "limit=x", "cursor=not-a-cursor", "cursor=e30"} {
		t.Run("bad "+query, func(t *testing.T) {
			expectProblem(t, s.do(t, http.MethodGet, "/v1/requests?"+query, maria, nil, nil), http.StatusBadRequest)
		})
	}
	t.Run("no token", func(t *testing.T) {
		expectProblem(t, s.do(t, http.MethodGet, "/v1/requests", "", nil, nil), http.StatusUnauthorized)
	})
}

// POST /v1/requests/{id}/cancel: the citizen who submitted a request may
// cancel it until it is decided, once; the cancellation and the status
// change travel together, the second caused by the first.
func TestCancelRequest(t *testing.T) {
	s := start(t, nil)
	obs := fabrictest.Observe(t, s.Conn, "request.cancelled.v1", "request.status-changed.v1")
	maria := s.Token(t, "org-a", "citizen-maria", "citizen")
	cancel := func(token, id, body string) deploytest.Response {
		t.Helper()
		var rd io.Reader
		h := map[string]string{}
		if body != "" {
			rd, h["Content-Type"] = strings.NewReader(body), "application/json"
		}
		return s.do(t, http.MethodPost, "/v1/requests/"+id+"/cancel", token, rd, h)
	}
	rc := mustSubmit(t, s, maria)

	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"another citizen of the tenant", s.Token(t, "org-a", "citizen-joao", "citizen"), 404},
		{"the same subject in another tenant", s.Token(t, "org-b", "citizen-maria", "citizen"), 404},
		{"an attendant", s.Token(t, "org-a", "attendant-1", "attendant"), 403},
		{"no token", "", 401},
	} {
		t.Run(tc.name+" may not", func(t *testing.T) { expectProblem(t, cancel(tc.token, rc.ID, ""), tc.status) })
	}
	expectProblem(t, cancel(maria, rc.ID, `{"reason":"`+strings.Repeat("x", 501)+`"}`), http.StatusUnprocessableEntity)
	expectProblem(t, cancel(maria, rc.ID, `{"why":"unknown field"}`), http.StatusBadRequest)
	if got := s.view(t, "org-a", rc.ID); got.Status != "submitted" {
		t.Fatalf("after refused cancellations the request is %q, want submitted", got.Status)
	}

	for i := range 2 { // the second is a retry: same answer, nothing new
		resp := cancel(maria, rc.ID, `{"reason":"submitted by mistake"}`)
		if resp.Status != http.StatusOK {
			t.Fatalf("cancel #%d = %d %s, want 200", i+1, resp.Status, resp.Body)
		}
		var got struct{ Status, StatusReason string }
		resp.JSON(t, &got)
		if got.Status != "cancelled" || got.StatusReason != "submitted by mistake" {
			t.Errorf("cancel #%d = %+v, want cancelled with the reason", i+1, got)
		}
	}
	cancelled := obs.Next(t, "request.cancelled.v1", deploytest.AboutRequest("request.cancelled.v1", rc.ID))
	var p struct{ PreviousStatus, CancelledBy, Reason string }
	if err := json.Unmarshal(cancelled.Payload, &p); err != nil || p.PreviousStatus != "submitted" || p.CancelledBy != "citizen-maria" || p.Reason != "submitted by mistake" {
		t.Errorf("request.cancelled.v1 payload = %s (%v), want previousStatus submitted by citizen-maria with the reason", cancelled.Payload, err)
	}
	changed := obs.Next(t, "request.status-changed.v1 to cancelled", deploytest.AboutRequest("request.status-changed.v1", rc.ID))
	if changed.CausationID != cancelled.ID || changed.CorrelationID != cancelled.CorrelationID {
		t.Errorf("status change caused by %s in %s, want caused by the cancellation %s in %s",
			changed.CausationID, changed.CorrelationID, cancelled.ID, cancelled.CorrelationID)
	}
	// Exactly one cancellation was ever enqueued: the retry changed nothing.
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_event
		WHERE event_type IN ('request.cancelled.v1', 'request.status-changed.v1') AND payload->>'requestId' = $1`, rc.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d cancellation and status-change rows for %s in the outbox, want 2 (one of each)", n, rc.ID)
	}

	t.Run("a decided request may not", func(t *testing.T) {
		done := mustSubmit(t, s, maria)
		if _, err := s.Pool.Exec(context.Background(), "UPDATE request SET status = 'completed' WHERE id = $1", done.ID); err != nil {
			t.Fatal(err)
		}
		expectProblem(t, cancel(maria, done.ID, ""), http.StatusConflict)
	})
}

type timeline struct {
	RequestID string
	Entries   []struct {
		EventID, Type, Status, Summary string
		CitizenVisible                 bool
	}
}

func (s *testService) timeline(t *testing.T, token, id string) timeline {
	t.Helper()
	resp := s.do(t, http.MethodGet, "/v1/requests/"+id+"/timeline", token, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET timeline of %s = %d %s, want 200", id, resp.Status, resp.Body)
	}
	var tl timeline
	resp.JSON(t, &tl)
	return tl
}

// GET /v1/requests/{id}/timeline: staff see every event about the request
// in order, the citizen the ones marked visible to them; nobody else sees
// it.
func TestTimeline(t *testing.T) {
	s := start(t, nil)
	maria := s.Token(t, "org-a", "citizen-maria", "citizen")
	staff := s.Token(t, "org-a", "attendant-1", "attendant")
	rc := mustSubmit(t, s, maria)
	processID, taskID := deploytest.NewID(t), deploytest.NewID(t)
	waitStaffEntries := func(n int) timeline {
		var tl timeline
		fabrictest.Eventually(t, 15*time.Second, "timeline entries", func() bool {
			tl = s.timeline(t, staff, rc.ID)
			return len(tl.Entries) >= n
		})
		return tl
	}
	s.publish(t, "org-a", "workflow.process-started.v1", map[string]any{"processId": processID, "requestId": rc.ID, "definitionId": "alvara"})
	waitStaffEntries(3) // submitted, process started, status in progress
	s.publish(t, "org-a", "workflow.task-completed.v1", map[string]any{"processId": processID, "taskId": taskID,
		"requestId": rc.ID, "step": "review", "outcome": "approved", "completedBy": "attendant-1"})
	waitStaffEntries(4)
	s.publish(t, "org-a", "workflow.process-completed.v1", map[string]any{"processId": processID, "requestId": rc.ID, "outcome": "approved"})
	tl := waitStaffEntries(6)

	type entry struct {
		typ, status string
		visible     bool
	}
	var got []entry
	for _, e := range tl.Entries {
		got = append(got, entry{e.Type, e.Status, e.CitizenVisible})
	}
	want := []entry{
		{"request.submitted.v1", "submitted", true},
		{"workflow.process-started.v1", "", false},
		{"request.status-changed.v1", "in_progress", true},
		{"workflow.task-completed.v1", "", false},
		{"workflow.process-completed.v1", "", false},
		{"request.status-changed.v1", "completed", true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("staff timeline = %+v, want %+v", got, want)
	}
	if s := tl.Entries[3].Summary; s != "Task review completed: approved" {
		t.Errorf("task entry summary = %q", s)
	}

	mine := s.timeline(t, maria, rc.ID)
	var visible []string
	for _, e := range mine.Entries {
		if !e.CitizenVisible {
			t.Errorf("the citizen sees a staff entry: %+v", e)
		}
		visible = append(visible, e.Status)
	}
	if !slices.Equal(visible, []string{"submitted", "in_progress", "completed"}) {
		t.Errorf("citizen timeline statuses = %v, want submitted, in_progress, completed", visible)
	}

	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"another citizen of the tenant", s.Token(t, "org-a", "citizen-joao", "citizen"), 404},
		{"the same subject in another tenant", s.Token(t, "org-b", "citizen-maria", "citizen"), 404},
		{"staff of another tenant", s.Token(t, "org-b", "attendant-1", "attendant"), 404},
		{"no token", "", 401},
	} {
		t.Run(tc.name+" may not", func(t *testing.T) {
			expectProblem(t, s.do(t, http.MethodGet, "/v1/requests/"+rc.ID+"/timeline", tc.token, nil, nil), tc.status)
		})
	}
}

// The operators' command paths: POST /v1/requests/{id}/workflow sends
// workflow.start.v1, POST …/documents/{documentId}/reprocess sends
// document.process.v1; only an operator of the request's tenant may.
func TestOperatorCommands(t *testing.T) {
	s := start(t, nil)
	tenant := deploytest.Unique("org-")
	obs := fabrictest.ObserveExchange(t, s.Conn, topology.CommandsExchange, "workflow.start.v1", "document.process.v1")
	owner := s.Token(t, tenant, "citizen-1", "citizen")
	operator := s.Token(t, tenant, "operator-1", "operator")
	rc := mustSubmit(t, s, owner)
	up := s.upload(t, owner, rc.ID, "file", "rg.png", pngBytes(t))
	if up.Status != http.StatusCreated {
		t.Fatalf("upload = %d %s", up.Status, up.Body)
	}
	var doc struct{ ID string }
	up.JSON(t, &doc)
	startPath := "/v1/requests/" + rc.ID + "/workflow"
	reprocessPath := "/v1/requests/" + rc.ID + "/documents/" + doc.ID + "/reprocess"

	for _, path := range []string{startPath, reprocessPath} {
		for _, tc := range []struct {
			name, token string
			status      int
		}{
			{"the citizen", owner, 403},
			{"an attendant", s.Token(t, tenant, "attendant-1", "attendant"), 403},
			{"an operator of another tenant", s.Token(t, "org-other", "operator-1", "operator"), 404},
		} {
			t.Run(tc.name+" may not POST "+path, func(t *testing.T) {
				expectProblem(t, s.do(t, http.MethodPost, path, tc.token, nil, nil), tc.status)
			})
		}
	}
	expectProblem(t, s.do(t, http.MethodPost, "/v1/requests/"+rc.ID+"/documents/"+deploytest.NewID(t)+"/reprocess", operator, nil, nil), 404)

	var accepted struct{ CommandID, Type string }
	resp := s.do(t, http.MethodPost, startPath, operator, nil, nil)
	if resp.Status != http.StatusAccepted {
		t.Fatalf("POST %s = %d %s, want 202", startPath, resp.Status, resp.Body)
	}
	resp.JSON(t, &accepted)
	start := obs.Next(t, "workflow.start.v1", deploytest.AboutRequest("workflow.start.v1", rc.ID))
	var sp struct{ RequestID, ServiceID, CitizenID string }
	if err := json.Unmarshal(start.Payload, &sp); err != nil || start.ID != accepted.CommandID || start.TenantID != tenant || sp.ServiceID == "" || sp.CitizenID != "citizen-1" {
		t.Errorf("workflow.start.v1 = %s %s (%v), want command %s of %s naming the service and the citizen", start.ID, start.Payload, err, accepted.CommandID, tenant)
	}
	if start.CorrelationID != s.view(t, tenant, rc.ID).CorrelationID {
		t.Errorf("workflow.start.v1 correlation %s, want the request's", start.CorrelationID)
	}

	resp = s.do(t, http.MethodPost, reprocessPath, operator, nil, nil)
	if resp.Status != http.StatusAccepted {
		t.Fatalf("POST %s = %d %s, want 202", reprocessPath, resp.Status, resp.Body)
	}
	resp.JSON(t, &accepted)
	cmd := obs.Next(t, "document.process.v1", func(e envelope.Envelope) bool { return e.Type == "document.process.v1" })
	if cmd.ID != accepted.CommandID || !strings.Contains(string(cmd.Payload), doc.ID) || cmd.TenantID != tenant {
		t.Errorf("document.process.v1 = %s %s of %s, want %s naming %s of %s", cmd.ID, cmd.Payload, cmd.TenantID, accepted.CommandID, doc.ID, tenant)
	}
}
