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

type scheduleView struct {
	ID      string     `json:"id"`
	Name    string     `json:"name"`
	Enabled bool       `json:"enabled"`
	NextAt  *time.Time `json:"nextAt"`
	Fired   []struct {
		At        time.Time `json:"at"`
		EventID   string    `json:"eventId"`
		Selected  *int      `json:"selected"`
		Truncated bool      `json:"truncated"`
	} `json:"fired"`
}

type firedPayload struct {
	ScheduleID    string          `json:"scheduleId"`
	Slot          time.Time       `json:"slot"`
	Late          bool            `json:"late"`
	SkippedBefore int             `json:"skippedBefore"`
	Payload       json.RawMessage `json:"payload"`
}

func firedOf(t *testing.T, e envelope.Envelope) firedPayload {
	t.Helper()
	var p firedPayload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func ofSchedule(id string) func(envelope.Envelope) bool {
	return func(e envelope.Envelope) bool {
		return e.Type == "workflow.schedule-fired.v1" && strings.Contains(string(e.Payload), `"scheduleId":"`+id+`"`)
	}
}

// TestScheduledEventsFireOnceAcrossInstances runs two instances sweeping
// every 100 ms: a schedule every second fires each slot once; slots missed
// during a (simulated) outage follow the catch-up policy; the API is the
// tenant's operators' alone.
func TestScheduledEventsFireOnceAcrossInstances(t *testing.T) {
	p := newPlatform(t)
	extra := map[string]string{"SCHEDULE_CHECK_INTERVAL": "100ms"}
	url := p.start(t, extra)
	p.start(t, extra)
	obs := fabrictest.Observe(t, p.Conn, "workflow.schedule-fired.v1")
	opA := p.Token(t, "org-a", "ana", "operator")
	opB := p.Token(t, "org-b", "bruno", "operator")
	create := func(token, body string) deploytest.Response {
		return do(t, http.MethodPost, url+"/v1/schedules", token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	}

	for _, tc := range []struct {
		name, token, body string
		want              int
	}{
		{"attendant", p.Token(t, "org-a", "at", "attendant"), `{"name":"x","cron":"@hourly"}`, http.StatusForbidden},
		{"bad cron", opA, `{"name":"x","cron":"every day"}`, http.StatusUnprocessableEntity},
		{"unknown zone", opA, `{"name":"x","cron":"@daily","timeZone":"Mars/Olympus"}`, http.StatusUnprocessableEntity},
		{"unknown field", opA, `{"name":"x","cron":"@daily","when":"now"}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) { expectProblem(t, create(tc.token, tc.body), tc.want) })
	}

	resp := create(opA, `{"name":"pulse","cron":"* * * * * *","payload":{"check":"queues"}}`)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create = %d %s", resp.Status, resp.Body)
	}
	var pulse scheduleView
	resp.JSON(t, &pulse)
	expectProblem(t, create(opA, `{"name":"pulse","cron":"@hourly"}`), http.StatusConflict)

	// Every slot once, across both instances.
	fired := obs.WaitFor(t, 5, "five slots of the pulse", ofSchedule(pulse.ID))
	if fired[0].TenantID != "org-a" || string(firedOf(t, fired[0]).Payload) != `{"check":"queues"}` {
		t.Errorf("fired %s in tenant %s, want org-a's with its payload", fired[0].Payload, fired[0].TenantID)
	}
	resp = do(t, http.MethodPost, url+"/v1/schedules/"+pulse.ID+"/disable", opB, nil, nil)
	expectProblem(t, resp, http.StatusNotFound) // another tenant's schedule does not exist for B
	resp = do(t, http.MethodPost, url+"/v1/schedules/"+pulse.ID+"/disable", opA, nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("disable = %d %s", resp.Status, resp.Body)
	}
	// Whatever fired before the disable is published once a marker
	// schedule, created after it, has fired and everything before it left
	// the outbox.
	resp = create(opA, `{"name":"marker","cron":"* * * * * *"}`)
	var marker scheduleView
	resp.JSON(t, &marker)
	markerEvent := obs.Next(t, "the marker's first slot", ofSchedule(marker.ID))
	fabrictest.WaitOutboxPublished(t, p.Pool, "workflow.schedule-fired.v1", markerEvent.ID)
	all := obs.Matching(t, ofSchedule(pulse.ID))
	slots := map[time.Time]int{}
	for _, e := range all {
		slots[firedOf(t, e).Slot]++
	}
	for slot, n := range slots {
		if n != 1 {
			t.Errorf("slot %s fired %d times", slot, n)
		}
	}
	var recorded int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.Schema+`.schedule_slot WHERE schedule_id = $1`, pulse.ID).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != len(all) {
		t.Errorf("%d slots recorded, %d events published", recorded, len(all))
	}

	// B sees none of A's schedules.
	var listB []scheduleView
	do(t, http.MethodGet, url+"/v1/schedules", opB, nil, nil).JSON(t, &listB)
	if len(listB) != 0 {
		t.Errorf("org-b lists %d schedules, want none", len(listB))
	}

	// An outage: both minutely schedules' timers go back nine minutes.
	// "all" with maxCatchUp 3 fires the newest three missed slots, the
	// first saying how many it skipped; "latest" fires one.
	var allSc, latestSc scheduleView
	create(opA, `{"name":"catch-all","cron":"* * * * *","catchUp":"all","maxCatchUp":3}`).JSON(t, &allSc)
	create(opA, `{"name":"catch-latest","cron":"* * * * *","catchUp":"latest"}`).JSON(t, &latestSc)
	if _, err := p.Pool.Exec(context.Background(), `UPDATE `+p.Schema+`.schedule_timer SET due_at = date_trunc('minute', now()) - interval '9 minutes'
		WHERE schedule_id = ANY($1)`, []string{allSc.ID, latestSc.ID}); err != nil {
		t.Fatal(err)
	}
	caught := obs.WaitFor(t, 3, "three caught-up slots", ofSchedule(allSc.ID))
	first := firedOf(t, caught[0])
	if !first.Late || first.SkippedBefore != 7 {
		t.Errorf("first caught-up slot %+v, want late with 7 skipped before it", first)
	}
	latest := firedOf(t, obs.Next(t, "the latest slot", ofSchedule(latestSc.ID)))
	if latest.SkippedBefore != 9 || latest.Late {
		t.Errorf("latest policy fired %+v, want the current minute's slot with 9 skipped", latest)
	}
	var listA []scheduleView
	do(t, http.MethodGet, url+"/v1/schedules", opA, nil, nil).JSON(t, &listA)
	for _, sc := range listA {
		if sc.Name == "pulse" && (sc.Enabled || sc.NextAt != nil) {
			t.Errorf("disabled pulse listed as %+v", sc)
		}
		if sc.Name == "catch-all" && (sc.NextAt == nil || !sc.NextAt.After(time.Now()) || len(sc.Fired) != 3) {
			t.Errorf("catch-all listed as %+v, want its next slot ahead and 3 fired", sc)
		}
	}
}
