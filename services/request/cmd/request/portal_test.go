package main

// The citizen portal's own views: "my requests" and cancelling one.

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

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
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
	if resp.status != http.StatusOK {
		t.Fatalf("GET /v1/requests?%s = %d %s, want 200", query, resp.status, resp.body)
	}
	var l listed
	resp.json(t, &l)
	return l
}

// GET /v1/requests: a citizen sees their own requests, staff their
// tenant's, newest first; pages neither repeat nor skip a request.
func TestListRequests(t *testing.T) {
	s := start(t, nil)
	maria, joao := s.token(t, "org-a", "citizen-maria", "citizen"), s.token(t, "org-a", "citizen-joao", "citizen")
	attendantA := s.token(t, "org-a", "attendant-1", "attendant")
	mariaB := s.token(t, "org-b", "citizen-maria", "citizen") // the same subject in another tenant
	var marias []string
	for range 5 {
		marias = append(marias, mustSubmit(t, s, maria).ID)
	}
	joaos := []string{mustSubmit(t, s, joao).ID}
	mustSubmit(t, s, mariaB)
	// One of Maria's moves on, for the status filter.
	if _, err := s.pool.Exec(context.Background(), "UPDATE request SET status = 'in_progress' WHERE id = $1", marias[1]); err != nil {
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
	obs := fabrictest.Observe(t, s.conn, "request.cancelled.v1", "request.status-changed.v1")
	maria := s.token(t, "org-a", "citizen-maria", "citizen")
	cancel := func(token, id, body string) response {
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
		{"another citizen of the tenant", s.token(t, "org-a", "citizen-joao", "citizen"), 404},
		{"the same subject in another tenant", s.token(t, "org-b", "citizen-maria", "citizen"), 404},
		{"an attendant", s.token(t, "org-a", "attendant-1", "attendant"), 403},
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
		if resp.status != http.StatusOK {
			t.Fatalf("cancel #%d = %d %s, want 200", i+1, resp.status, resp.body)
		}
		var got struct{ Status, StatusReason string }
		resp.json(t, &got)
		if got.Status != "cancelled" || got.StatusReason != "submitted by mistake" {
			t.Errorf("cancel #%d = %+v, want cancelled with the reason", i+1, got)
		}
	}
	cancelled := obs.Next(t, "request.cancelled.v1", ofType("request.cancelled.v1", rc.ID))
	var p struct{ PreviousStatus, CancelledBy, Reason string }
	if err := json.Unmarshal(cancelled.Payload, &p); err != nil || p.PreviousStatus != "submitted" || p.CancelledBy != "citizen-maria" || p.Reason != "submitted by mistake" {
		t.Errorf("request.cancelled.v1 payload = %s (%v), want previousStatus submitted by citizen-maria with the reason", cancelled.Payload, err)
	}
	changed := obs.Next(t, "request.status-changed.v1 to cancelled", ofType("request.status-changed.v1", rc.ID))
	if changed.CausationID != cancelled.ID || changed.CorrelationID != cancelled.CorrelationID {
		t.Errorf("status change caused by %s in %s, want caused by the cancellation %s in %s",
			changed.CausationID, changed.CorrelationID, cancelled.ID, cancelled.CorrelationID)
	}
	// Exactly one cancellation was ever enqueued: the retry changed nothing.
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_event
		WHERE event_type IN ('request.cancelled.v1', 'request.status-changed.v1') AND payload->>'requestId' = $1`, rc.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d cancellation and status-change rows for %s in the outbox, want 2 (one of each)", n, rc.ID)
	}

	t.Run("a decided request may not", func(t *testing.T) {
		done := mustSubmit(t, s, maria)
		if _, err := s.pool.Exec(context.Background(), "UPDATE request SET status = 'completed' WHERE id = $1", done.ID); err != nil {
			t.Fatal(err)
		}
		expectProblem(t, cancel(maria, done.ID, ""), http.StatusConflict)
	})
}
