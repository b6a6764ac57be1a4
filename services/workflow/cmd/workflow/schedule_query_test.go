package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// queryFired is what a query's workflow.schedule-fired.v1 adds to a
// schedule's event.
type queryFired struct {
	ScheduleID string    `json:"scheduleId"`
	Slot       time.Time `json:"slot"`
	Query      string    `json:"query"`
	RequestID  string    `json:"requestId"`
	ServiceID  string    `json:"serviceId"`
}

// seedOpen writes n open requests of service in tenant directly: each a
// running process with one open task at step, due after dueIn and opened
// age ago. It returns their request ids.
func (p *platform) seedOpen(t *testing.T, tenant, service, step string, n int, dueIn, age time.Duration) []string {
	t.Helper()
	rows, err := p.Pool.Query(context.Background(), `WITH p AS (
			INSERT INTO `+p.Schema+`.process_instance (id, tenant_id, request_id, citizen_id, service_id, definition_id, correlation_id, started_at)
			SELECT gen_random_uuid(), $1, gen_random_uuid(), 'citizen-' || i, $2, 'standard-review', gen_random_uuid(), now() - $6::interval
			FROM generate_series(1, $4) AS i RETURNING id, tenant_id, request_id),
		t AS (
			INSERT INTO `+p.Schema+`.task (id, tenant_id, process_id, step_index, step, assignee_role, due_at, created_at)
			SELECT gen_random_uuid(), tenant_id, id, 0, $3, 'attendant', now() + $5::interval, now() - $6::interval FROM p)
		SELECT request_id FROM p`, tenant, service, step, n, dueIn.String(), age.String())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// queryEvents reads every workflow.schedule-fired.v1 of schedule id the
// service enqueued, from its outbox (all of them, duplicates included,
// whatever the broker has delivered yet).
func (p *platform) queryEvents(t *testing.T, id string) []envelope.Envelope {
	t.Helper()
	rows, err := p.Pool.Query(context.Background(), `SELECT body FROM `+p.Schema+`.outbox_event
		WHERE event_type = 'workflow.schedule-fired.v1' AND payload::jsonb ->> 'scheduleId' = $1`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []envelope.Envelope
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		var e envelope.Envelope
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("outbox body %s: %v", body, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func queryFiredOf(t *testing.T, e envelope.Envelope) queryFired {
	t.Helper()
	var q queryFired
	if err := json.Unmarshal(e.Payload, &q); err != nil {
		t.Fatal(err)
	}
	return q
}

func createSchedule(t *testing.T, url, token, body string) scheduleView {
	t.Helper()
	resp := do(t, http.MethodPost, url+"/v1/schedules", token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create schedule = %d %s", resp.Status, resp.Body)
	}
	var sc scheduleView
	resp.JSON(t, &sc)
	return sc
}

// dueNow moves schedule id's timer to a second ago: its next sweep fires
// that one slot (catch-up latest), whatever its cron.
func (p *platform) dueNow(t *testing.T, id string) {
	t.Helper()
	if _, err := p.Pool.Exec(context.Background(), `UPDATE `+p.Schema+`.schedule_timer SET due_at = now() - interval '1 second'
		WHERE schedule_id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleQueryFiresPerEntityOncePerSlot is seed 004 §56-57's
// temporal rule with a query ("requests due within 24 h"): two instances
// sweep every 100 ms a per-second schedule of org-a; each slot emits one
// event per selected request of org-a, about that request (the envelope's
// entity) and in its correlation, once across the instances; org-a's
// requests due later and org-b's requests due as soon are never selected;
// a slot fired before and handed back to the sweep (its timer moved back)
// fires nothing again; unknown queries and bad parameters are refused.
func TestScheduleQueryFiresPerEntityOncePerSlot(t *testing.T) {
	p := newPlatform(t)
	extra := map[string]string{"SCHEDULE_CHECK_INTERVAL": "100ms"}
	url := p.start(t, extra)
	p.start(t, extra)
	obs := fabrictest.Observe(t, p.Conn, "workflow.schedule-fired.v1")
	op := p.Token(t, "org-a", "ana", "operator")
	create := func(body string) deploytest.Response {
		return do(t, http.MethodPost, url+"/v1/schedules", op, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	}
	for _, tc := range []struct{ name, query, detail string }{
		{"unknown query", `{"name":"all-requests"}`, "not a declared query"},
		{"bad duration", `{"name":"requests-due-within","params":{"within":"tomorrow"}}`, "not a Go duration"},
		{"missing parameter", `{"name":"requests-waiting-longer-than"}`, "longerThan is required"},
		{"unknown parameter", `{"name":"processes-in-step","params":{"step":"x","sql":"DROP TABLE task"}}`, `unknown parameter \"sql\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := create(`{"name":"q","cron":"@hourly","query":` + tc.query + `}`)
			expectProblem(t, resp, http.StatusUnprocessableEntity)
			if !strings.Contains(string(resp.Body), tc.detail) {
				t.Errorf("problem %s, want it to say %q", resp.Body, tc.detail)
			}
		})
	}

	dueSoon := p.seedOpen(t, "org-a", "building-permit", "review", 3, 2*time.Hour, time.Hour)
	p.seedOpen(t, "org-a", "building-permit", "review", 2, 48*time.Hour, time.Hour) // due later: not selected
	otherTenant := p.seedOpen(t, "org-b", "building-permit", "review", 3, 2*time.Hour, time.Hour)
	want := map[string]bool{}
	for _, id := range dueSoon {
		want[id] = true
	}

	sc := createSchedule(t, url, op, `{"name":"expiring","cron":"* * * * * *","catchUp":"all","maxCatchUp":1000,
		"query":{"name":"requests-due-within","params":{"within":"24h"}}}`)
	seen := obs.WaitFor(t, 9, "three slots of three requests", ofSchedule(sc.ID))
	for _, e := range seen {
		q := queryFiredOf(t, e)
		if e.TenantID != "org-a" || e.Entity == nil || e.Entity.Type != "request" || e.Entity.ID != q.RequestID || !want[q.RequestID] ||
			q.Query != "requests-due-within" || q.ServiceID != "building-permit" {
			t.Fatalf("event %s in %s about %+v, want one of org-a's requests due within 24h", e.Payload, e.TenantID, e.Entity)
		}
	}

	// A fired slot handed back to the sweep fires nothing again.
	first := queryFiredOf(t, seen[0]).Slot
	var movedAt time.Time
	if err := p.Pool.QueryRow(context.Background(), `UPDATE `+p.Schema+`.schedule_timer SET due_at = $2 WHERE schedule_id = $1
		RETURNING now()`, sc.ID, first).Scan(&movedAt); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "the sweep past the slot moved back", func() bool {
		var due time.Time
		if err := p.Pool.QueryRow(context.Background(), `SELECT due_at FROM `+p.Schema+`.schedule_timer WHERE schedule_id = $1`, sc.ID).Scan(&due); err != nil {
			t.Fatal(err)
		}
		return due.After(movedAt)
	})
	if resp := do(t, http.MethodPost, url+"/v1/schedules/"+sc.ID+"/disable", op, nil, nil); resp.Status != http.StatusOK {
		t.Fatalf("disable = %d %s", resp.Status, resp.Body)
	}

	// Every event the schedule ever enqueued: one per slot and request.
	all := p.queryEvents(t, sc.ID)
	perSlot := map[time.Time]map[string]int{}
	for _, e := range all {
		q := queryFiredOf(t, e)
		if perSlot[q.Slot] == nil {
			perSlot[q.Slot] = map[string]int{}
		}
		perSlot[q.Slot][q.RequestID]++
	}
	for slot, reqs := range perSlot {
		for id, n := range reqs {
			if n != 1 {
				t.Errorf("slot %s fired %d events for request %s, want 1", slot.Format(time.RFC3339), n, id)
			}
			if !want[id] {
				t.Errorf("slot %s selected request %s, not one of org-a's due within 24h", slot.Format(time.RFC3339), id)
			}
		}
		if len(reqs) != 3 {
			t.Errorf("slot %s selected %d requests, want 3", slot.Format(time.RFC3339), len(reqs))
		}
	}
	for _, id := range otherTenant {
		for slot, reqs := range perSlot {
			if reqs[id] > 0 {
				t.Errorf("slot %s selected org-b's request %s", slot.Format(time.RFC3339), id)
			}
		}
	}
	var slots, selected int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(selected), 0) FROM `+p.Schema+`.schedule_slot
		WHERE schedule_id = $1 AND event_id IS NULL AND NOT truncated`, sc.ID).Scan(&slots, &selected); err != nil {
		t.Fatal(err)
	}
	if slots != len(perSlot) || selected != len(all) {
		t.Errorf("%d slots recorded selecting %d, but %d slots emitted %d events", slots, selected, len(perSlot), len(all))
	}
}

// TestScheduleQueryFeedsSubscriptions: each selected entity goes through
// the tenant's subscriptions on its own. A filter keeps the building
// permits among the requests due within 24 h, a policy rule denies one of
// them, and the others get one review task each; a query matching more
// than schedule.MaxSelected (500) fires for the first 500 and records the
// slot as truncated.
func TestScheduleQueryFeedsSubscriptions(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, map[string]string{"SCHEDULE_CHECK_INTERVAL": "100ms"})
	obs := fabrictest.Observe(t, p.Conn, "workflow.schedule-fired.v1")
	author, op := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")

	permits := p.seedOpen(t, "org-a", "building-permit", "review", 3, 2*time.Hour, time.Hour)
	parking := p.seedOpen(t, "org-a", "parking", "review", 2, 3*time.Hour, time.Hour)
	activate(t, url, author, op, `{"name":"permits expiring","eventTypes":["workflow.schedule-fired.v1"],
		"filter":"has(payload.serviceId) && payload.serviceId == 'building-permit'",
		"policy":{"default":"ALLOW","rules":[{"when":"payload.requestId == '`+permits[2]+`'","outcome":"DENY"}]},
		"reaction":{"kind":"review-task","role":"attendant"}}`)
	sc := createSchedule(t, url, op, `{"name":"permits","cron":"@yearly","query":{"name":"requests-due-within","params":{"within":"24h"}}}`)
	p.dueNow(t, sc.ID)
	fired := obs.WaitFor(t, 5, "one event per request due within 24h", ofSchedule(sc.ID))

	decisionOf := func(e envelope.Envelope) []decisionView {
		var got []decisionView
		do(t, http.MethodGet, url+"/v1/decisions?eventId="+e.ID, author, nil, nil).JSON(t, &got)
		return got
	}
	byRequest := map[string]envelope.Envelope{}
	for _, e := range fired {
		byRequest[queryFiredOf(t, e).RequestID] = e
	}
	for _, tc := range []struct {
		name, requestID, outcome, status string
		reviews                          int
	}{
		{"first permit", permits[0], "ALLOW", "executed", 1},
		{"second permit", permits[1], "ALLOW", "executed", 1},
		{"the permit a rule denies", permits[2], "DENY", "denied", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := byRequest[tc.requestID]
			if !ok {
				t.Fatalf("no event for request %s", tc.requestID)
			}
			var got []decisionView
			fabrictest.Eventually(t, 20*time.Second, "the decision on "+tc.name, func() bool {
				got = decisionOf(e)
				return len(got) == 1
			})
			if d := got[0]; d.Outcome != tc.outcome || d.Status != tc.status || len(d.Reviews) != tc.reviews {
				t.Errorf("decision %+v, want %s %s with %d review(s)", d, tc.outcome, tc.status, tc.reviews)
			}
		})
	}
	// The filter excluded the parking requests: their events were handled
	// by the reactions consumer (claimed in its inbox) and decided nothing.
	for _, id := range parking {
		e := byRequest[id]
		fabrictest.Eventually(t, 20*time.Second, "the reactions consumer took "+e.ID, func() bool {
			var n int
			if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.Schema+`.inbox_message
				WHERE consumer = 'workflow.reactions' AND event_id = $1`, e.ID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		if got := decisionOf(e); len(got) != 0 {
			t.Errorf("parking request %s decided %+v, want the filter to exclude it", id, got)
		}
	}

	// The bound: 510 due, 500 fired, the slot recorded as truncated.
	p.seedOpen(t, "org-a", "street-lighting", "review", 505, time.Hour, time.Hour)
	big := createSchedule(t, url, op, `{"name":"all due","cron":"@yearly","query":{"name":"requests-due-within","params":{"within":"24h"}}}`)
	p.dueNow(t, big.ID)
	var selected int
	var truncated bool
	fabrictest.Eventually(t, 20*time.Second, "the big slot fired", func() bool {
		err := p.Pool.QueryRow(context.Background(), `SELECT selected, truncated FROM `+p.Schema+`.schedule_slot WHERE schedule_id = $1`,
			big.ID).Scan(&selected, &truncated)
		return err == nil
	})
	events := p.queryEvents(t, big.ID)
	if len(events) != 500 || selected != 500 || !truncated {
		t.Errorf("%d events, slot selected %d truncated %v; want 500 of the 510 due and the slot truncated", len(events), selected, truncated)
	}
	var list []scheduleView
	do(t, http.MethodGet, url+"/v1/schedules", op, nil, nil).JSON(t, &list)
	for _, s := range list {
		if s.ID == big.ID && (len(s.Fired) != 1 || s.Fired[0].Selected == nil || *s.Fired[0].Selected != 500 || !s.Fired[0].Truncated) {
			t.Errorf("the API shows the big schedule's slots as %+v, want one selecting 500, truncated", s.Fired)
		}
	}
	obs.WaitFor(t, 500, "the 500 events through the broker", ofSchedule(big.ID))
}
