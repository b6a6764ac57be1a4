package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// runChild is the service in a process of its own (deploytest.Spawn),
// which a test can kill without letting it clean up.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, nil, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "workflow child:", err)
		return 1
	}
	return 0
}

// TestMassReactionResumesAfterACrash: an approved mass reaction (5,000
// requests, batches of 250) runs in a workflow process that is killed
// (SIGKILL: no shutdown, no rollback but the database's) once it has
// committed 1,000. What it committed stays, with the job's progress equal
// to the reviews it wrote; the batch it was in vanishes. Another instance
// then takes the job from there and finishes it, reviewing every request
// exactly once.
func TestMassReactionResumesAfterACrash(t *testing.T) {
	const total, batch = 5000, 250
	p := newPlatform(t)
	// This instance decides and approves; its job sweep never ticks.
	base := p.start(t, map[string]string{"REACTION_JOB_INTERVAL": "1h"})
	author, approver := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	ctx := context.Background()
	if _, err := p.Pool.Exec(ctx, `INSERT INTO `+p.Schema+`.process_instance
		(id, tenant_id, request_id, citizen_id, service_id, definition_id, correlation_id, started_at)
		SELECT gen_random_uuid(), 'org-a', gen_random_uuid(), 'citizen-' || (i % 700), 'street-lighting', 'standard-review', gen_random_uuid(), now()
		FROM generate_series(1, $1) AS i`, total); err != nil {
		t.Fatal(err)
	}
	activate(t, base, author, approver, `{"name":"new document","eventTypes":["catalog.service-updated.v1"],
		"filter":"payload.change == \"requires-document\"","policy":{"default":"ALLOW"},
		"reaction":{"kind":"review-affected-requests","role":"attendant","maxAffected":1000}}`)
	e, err := envelope.New("catalog.service-updated.v1", "org-a", "catalog-system", map[string]any{
		"serviceId": "street-lighting", "change": "requires-document", "requiredDocument": "proof of address"})
	if err != nil {
		t.Fatal(err)
	}
	p.Publish(t, e)
	var d decisionView
	fabrictest.Eventually(t, 20*time.Second, "the gated decision", func() bool {
		var got []decisionView
		do(t, http.MethodGet, base+"/v1/decisions?eventId="+e.ID, author, nil, nil).JSON(t, &got)
		if len(got) == 1 {
			d = got[0]
		}
		return len(got) == 1
	})
	if d.Status != "pending-approval" || d.Job == nil || d.Job.Total != total {
		t.Fatalf("decision %+v, want the gate with %d requests", d, total)
	}
	if resp := post(t, base, approver, "/v1/reviews/"+d.ReviewID+"/resolve", `{"approve":true,"reason":"applies to all"}`); resp.Status != http.StatusOK {
		t.Fatalf("approve = %d %s", resp.Status, resp.Body)
	}
	progress := func() (done, reviews int, status string) {
		t.Helper()
		if err := p.Pool.QueryRow(ctx, `SELECT j.done, j.Status,
			(SELECT count(*) FROM `+p.Schema+`.reaction_review r WHERE r.decision_id = j.decision_id AND r.request_id IS NOT NULL)
			FROM `+p.Schema+`.reaction_job j JOIN `+p.Schema+`.reaction_decision x ON x.id = j.decision_id
			WHERE x.event_id = $1`, e.ID).Scan(&done, &status, &reviews); err != nil {
			t.Fatal(err)
		}
		return done, reviews, status
	}

	doomed := p.Spawn(t, map[string]string{"REACTION_JOB_INTERVAL": "50ms", "REACTION_JOB_BATCH": fmt.Sprint(batch)})
	// Kill it inside a batch: past 1,000 reviewed, while a transaction of
	// the job sweep is open (only the doomed instance sweeps jobs; the
	// other has no event to handle).
	fabrictest.Eventually(t, 60*time.Second, "1,000 reviewed and a batch in flight", func() bool {
		done, _, _ := progress()
		if done < 1000 {
			return false
		}
		var open int
		if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND xact_start IS NOT NULL AND query ILIKE '%reaction_review%'`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open > 0
	})
	doomed.Kill(t)
	// What the killed process committed is all there is: its batch in
	// flight is rolled back when the server sees the connection close.
	done, reviews, status := progress()
	t.Logf("killed inside a batch with %d of %d reviewed (job %s)", done, total, status)
	if done >= total || status != "running" {
		t.Fatalf("the crash came after the job ended (done %d, %s): nothing was tested", done, status)
	}
	if reviews != done || done%batch != 0 {
		t.Errorf("after the crash: %d reviews, progress %d; want whole batches of %d, progress equal to the reviews", reviews, done, batch)
	}

	p.Spawn(t, map[string]string{"REACTION_JOB_INTERVAL": "50ms", "REACTION_JOB_BATCH": fmt.Sprint(batch)})
	fabrictest.Eventually(t, 60*time.Second, "the job finished by the survivor", func() bool {
		_, _, status := progress()
		return status == "done"
	})
	var n, distinct int
	if err := p.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT request_id) FROM `+p.Schema+`.reaction_review
		WHERE request_id IS NOT NULL AND decision_id = (SELECT id FROM `+p.Schema+`.reaction_decision WHERE event_id = $1)`, e.ID).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if done, _, _ := progress(); n != total || distinct != total || done != total {
		t.Errorf("%d reviews of %d requests, progress %d; want each of the %d once", n, distinct, done, total)
	}
}
