package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/replay"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// history serves GET /v1/history over events, as the data lake does (its
// own tests prove the lake's side): by type and correlation, paged by
// position. It stands in for tenant scoping by returning whatever it
// holds, which lets the test slip in another tenant's event.
func history(t *testing.T, events []envelope.Envelope) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/history" || r.Header.Get("Authorization") != "Bearer the-operators-token" {
			http.Error(w, `{"detail":"no"}`, http.StatusForbidden)
			return
		}
		q := r.URL.Query()
		after, _ := strconv.Atoi(q.Get("after"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		var page []json.RawMessage
		next := ""
		for i := after; i < len(events); i++ {
			e := events[i]
			if (len(q["type"]) > 0 && !slices.Contains(q["type"], e.Type)) || (q.Get("correlationId") != "" && q.Get("correlationId") != e.CorrelationID) {
				continue
			}
			if len(page) == limit {
				next = strconv.Itoa(i)
				break
			}
			b, err := json.Marshal(e)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			page = append(page, b)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"events": page, "next": next})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// checksum fingerprints every table of schema but the replay's own: what
// a sandboxed replay must leave exactly as it was.
func checksum(t *testing.T, s *fabrictest.Schema) string {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Pool.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = $1 AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'replay_%' ORDER BY table_name`, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		var sum string
		if err := s.Pool.QueryRow(ctx, `SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM `+
			pgx.Identifier{s.Name, table}.Sanitize()+` t`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%s ", table, sum)
	}
	return b.String()
}

func sweepAll(t *testing.T, svc *replay.Service, batch int) {
	t.Helper()
	for range 1000 {
		n, err := svc.Sweep(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the replay never finished")
}

// TestReplayModes: ten request.submitted.v1 of one conversation in the
// history (four already handled by the consumer), two workflow.stuck.v1
// (replayable: false) and another tenant's event slipped in.
//   - DRY_RUN decides each (6 would be delivered, 4 skipped by the inbox,
//     3 refused) and sends nothing;
//   - SIMULATION runs the handler on each in a rolled-back transaction:
//     it reports what each would emit, and every table of the schema is
//     byte for byte as before;
//   - PRODUCTION sends each again, resumable (a second instance finishes
//     what the first began), and a second PRODUCTION replay of the same
//     events has no effect (the inbox skips all ten);
//   - what may not be asked is refused before anything is fetched.
func TestReplayModes(t *testing.T) {
	env := fabrictest.EnvFrom(os.Getenv)
	ctx := context.Background()
	spec := topology.Consumer{Queue: "replay-test.things", Service: "replay-test",
		RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"},
			{Exchange: topology.EventsExchange, Key: "workflow.stuck.v1"}}}
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (n serial PRIMARY KEY, event_id uuid NOT NULL, tenant_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	out := outbox.New(f.Reg)
	// The handler's effects are all in its transaction: a row, and an
	// event it emits (the same fact, re-announced).
	handler := func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		// Like the services' handlers, it takes the tenant from the
		// context the consumer sets.
		tenantID, err := tenant.From(ctx)
		if err != nil || tenantID != e.TenantID {
			return fabric.Invalid(fmt.Errorf("event %s: tenant in context %q: %v", e.ID, tenantID, err))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO effect (event_id, tenant_id) VALUES ($1, $2)`, e.ID, tenantID); err != nil {
			return fabric.Transient(err)
		}
		echo, err := envelope.Derive(e, e.Type, "replay-test", e.Payload)
		if err != nil {
			return err
		}
		return out.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "thing", ID: e.ID}, Envelope: echo})
	}
	mp, scrape, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	metricsSrv := httptest.NewServer(scrape)
	t.Cleanup(metricsSrv.Close)
	f.RunBatch(t, spec, inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{Metrics: metrics}).BatchHandler(handler),
		fabric.ConsumerOptions{Metrics: metrics})
	effects := func() int {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM effect`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	duplicates := func(want float64) {
		t.Helper()
		fabrictest.WaitCounter(t, 20*time.Second, metricsSrv.URL, "fabric_consumer_duplicates_total",
			map[string]string{"consumer": spec.Queue}, want)
	}

	var events []envelope.Envelope
	correlation := ""
	for i := range 10 {
		e, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{
			"requestId": fmt.Sprintf("01a23200-0000-7000-8000-%012d", i), "protocol": fmt.Sprintf("AGR-2026-%06d", i),
			"serviceId": "svc", "formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		if correlation == "" {
			correlation = e.CorrelationID
		}
		e.CorrelationID = correlation
		events = append(events, e)
	}
	for i := range 2 {
		e, err := envelope.New("workflow.stuck.v1", "org-a", "workflow", map[string]any{"processId": "01a23200-0000-7000-8000-00000000000a",
			"requestId": "01a23200-0000-7000-8000-000000000001", "step": "triage", "stepIndex": i, "waitingSince": time.Now().UTC(),
			"threshold": "72h"})
		if err != nil {
			t.Fatal(err)
		}
		e.CorrelationID = correlation
		events = append(events, e)
	}
	foreign, err := envelope.New("request.submitted.v1", "org-b", "request-service", map[string]any{
		"requestId": "01a23200-0000-7000-8000-0000000000bb", "protocol": "AGR-2026-999999", "serviceId": "svc", "formId": "f",
		"formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	foreign.CorrelationID = correlation
	events = append(events, foreign)

	// Four of the ten were handled live.
	for _, e := range events[:4] {
		if err := f.Pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 20*time.Second, "four handled live", func() bool { return effects() == 4 })

	hist := replay.HTTPHistory{BaseURL: history(t, events)}
	svc := replay.New(s.Pool, s.Name, []topology.Consumer{spec}, f.Reg, f.Pub, hist,
		replay.Options{Simulatable: map[string]fabric.TxHandler{spec.Queue: handler}})
	admin := replay.Actor{Subject: "olga", TenantID: "org-a", Elevated: true, BearerToken: "the-operators-token"}
	operator := admin
	operator.Elevated = false
	byCorrelation := replay.Selection{CorrelationID: correlation}
	run := func(a replay.Actor, mode replay.Mode, batch int) replay.Job {
		t.Helper()
		job, err := svc.Start(ctx, a, replay.Request{Queue: spec.Queue, Mode: mode, Selection: byCorrelation, Reason: "the test"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if job.Total != 13 {
			t.Fatalf("%s: %d events selected, want 13", mode, job.Total)
		}
		sweepAll(t, svc, batch)
		if job, err = svc.Get(ctx, "org-a", job.ID); err != nil {
			t.Fatal(err)
		}
		if job.Status != "done" || job.Processed != 13 {
			t.Fatalf("%s: job %+v, want done with 13 processed", mode, job)
		}
		return job
	}

	t.Run("refusals", func(t *testing.T) {
		plain := replay.New(s.Pool, s.Name, []topology.Consumer{spec}, f.Reg, f.Pub, hist, replay.Options{})
		for _, tc := range []struct {
			name string
			svc  *replay.Service
			a    replay.Actor
			r    replay.Request
			want error
		}{
			{"non-replayable type", svc, admin, replay.Request{Queue: spec.Queue, Mode: replay.DryRun, Reason: "x",
				Selection: replay.Selection{Types: []string{"workflow.stuck.v1"}}}, replay.ErrNotReplayable},
			{"production without the elevated role", svc, operator, replay.Request{Queue: spec.Queue, Mode: replay.Production,
				Reason: "x", Selection: byCorrelation}, replay.ErrForbidden},
			{"simulation of a handler with outside effects", plain, admin, replay.Request{Queue: spec.Queue, Mode: replay.Simulation,
				Reason: "x", Selection: byCorrelation}, replay.ErrInvalid},
			{"no reason", svc, admin, replay.Request{Queue: spec.Queue, Mode: replay.DryRun, Selection: byCorrelation}, replay.ErrInvalid},
			{"no selection", svc, admin, replay.Request{Queue: spec.Queue, Mode: replay.DryRun, Reason: "x"}, replay.ErrInvalid},
			{"a type the queue does not receive", svc, admin, replay.Request{Queue: spec.Queue, Mode: replay.DryRun, Reason: "x",
				Selection: replay.Selection{Types: []string{"request.cancelled.v1"}}}, replay.ErrInvalid},
			{"another service's queue", svc, admin, replay.Request{Queue: "analytics.requests", Mode: replay.DryRun, Reason: "x",
				Selection: byCorrelation}, replay.ErrNotFound},
			{"unknown mode", svc, admin, replay.Request{Queue: spec.Queue, Mode: "LIVE", Reason: "x", Selection: byCorrelation}, replay.ErrInvalid},
		} {
			if _, err := tc.svc.Start(ctx, tc.a, tc.r, nil); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
		}
	})

	wantOutcomes := func(job replay.Job, want map[string]int) {
		t.Helper()
		for k, n := range want {
			if job.Outcomes[k] != n {
				t.Errorf("%s: outcomes %v, want %v", job.Mode, job.Outcomes, want)
				return
			}
		}
	}

	// DRY_RUN: the decisions, and nothing sent.
	dry := run(admin, replay.DryRun, 4)
	wantOutcomes(dry, map[string]int{replay.WouldDeliver: 6, replay.WouldSkip: 4, replay.Refused: 3})
	items, err := svc.Items(ctx, "org-a", dry.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 13 || items[0].Outcome != replay.WouldSkip || items[12].Outcome != replay.Refused ||
		!strings.Contains(items[12].Detail, "org-b") || !strings.Contains(items[10].Detail, "replayable: false") {
		t.Errorf("dry run items: %+v", items)
	}
	if _, err := svc.Get(ctx, "org-b", dry.ID); !errors.Is(err, replay.ErrNotFound) {
		t.Errorf("another tenant reads the job: %v", err)
	}

	// SIMULATION: what each would do, and not one row changed.
	before := checksum(t, s)
	sim := run(admin, replay.Simulation, 5)
	wantOutcomes(sim, map[string]int{replay.Simulated: 10, replay.Refused: 3})
	if after := checksum(t, s); after != before {
		t.Errorf("the simulation changed the schema:\nbefore %s\nafter  %s", before, after)
	}
	if items, err = svc.Items(ctx, "org-a", sim.ID, 4, 1); err != nil || len(items) != 1 ||
		items[0].Detail != "would succeed, emitting request.submitted.v1" {
		t.Errorf("simulated item: %+v (%v)", items, err)
	}

	// PRODUCTION, resumed: the first instance sends a batch of 4 and
	// "dies"; a second one, with the same jobs table, finishes.
	job, err := svc.Start(ctx, admin, replay.Request{Queue: spec.Queue, Mode: replay.Production, Selection: byCorrelation, Reason: "rebuild"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Sweep(ctx, 4); err != nil || n != 4 {
		t.Fatalf("first batch: %d, %v", n, err)
	}
	second := replay.New(s.Pool, s.Name, []topology.Consumer{spec}, f.Reg, f.Pub, hist, replay.Options{})
	sweepAll(t, second, 4)
	if job, err = svc.Get(ctx, "org-a", job.ID); err != nil || job.Status != "done" {
		t.Fatalf("production job: %+v, %v", job, err)
	}
	wantOutcomes(job, map[string]int{replay.Delivered: 10, replay.Refused: 3})
	duplicates(4) // the four handled live, skipped by the inbox
	fabrictest.Eventually(t, 20*time.Second, "the six others handled", func() bool { return effects() == 10 })

	// PRODUCTION again: one effect per event, still.
	again := run(admin, replay.Production, 100)
	wantOutcomes(again, map[string]int{replay.Delivered: 10, replay.Refused: 3})
	duplicates(14)
	if n := effects(); n != 10 {
		t.Errorf("%d effects after replaying twice, want 10", n)
	}
}
