package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestBlastRadiusGate is seed 004 §88's mass reaction: a service now
// requires another document; a subscription reviews every open request of
// the service. With 5,000 of them, above the subscription's limit of
// 1,000, the reaction waits for an operator's approval with the estimate
// in hand, then runs in batches of 500 across two competing instances,
// reviewing each request exactly once; another tenant's requests of the
// same service are not touched; a change affecting exactly the limit runs
// at once and one more request needs the approval; a small service's
// change runs at once.
func TestBlastRadiusGate(t *testing.T) {
	p := newPlatform(t)
	extra := map[string]string{"REACTION_JOB_INTERVAL": "100ms", "REACTION_JOB_BATCH": "500"}
	url := p.start(t, extra)
	other := p.start(t, extra)
	author, approver := p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	ctx := context.Background()
	// The open requests, written directly: 5,000 processes of street-lighting
	// in org-a (1,000 citizens), 3 in org-b, 10 of a small service in org-a.
	for _, seed := range []struct {
		tenant, service string
		n, citizens     int
	}{{"org-a", "street-lighting", 5000, 1000}, {"org-b", "street-lighting", 3, 3}, {"org-a", "small-service", 10, 10},
		{"org-a", "at-the-limit", 1000, 100}, {"org-a", "one-over-the-limit", 1001, 100}} {
		if _, err := p.Pool.Exec(ctx, `INSERT INTO `+p.Schema+`.process_instance
			(id, tenant_id, request_id, citizen_id, service_id, definition_id, correlation_id, started_at)
			SELECT gen_random_uuid(), $1, gen_random_uuid(), 'citizen-' || (i % $4), $2, 'standard-review', gen_random_uuid(), now()
			FROM generate_series(1, $3) AS i`, seed.tenant, seed.service, seed.n, seed.citizens); err != nil {
			t.Fatal(err)
		}
	}
	activate(t, url, author, approver, `{"name":"new document","eventTypes":["catalog.service-updated.v1"],
		"filter":"payload.change == \"requires-document\"","policy":{"default":"ALLOW"},
		"reaction":{"kind":"review-affected-requests","role":"attendant","maxAffected":1000}}`)
	changed := func(service string) envelope.Envelope {
		e, err := envelope.New("catalog.service-updated.v1", "org-a", "catalog-system", map[string]any{
			"serviceId": service, "change": "requires-document", "requiredDocument": "proof of address"})
		if err != nil {
			t.Fatal(err)
		}
		p.Publish(t, e)
		return e
	}
	decision := func(e envelope.Envelope) decisionView { t.Helper(); return waitDecision(t, url, author, e) }
	reviewed := func(e envelope.Envelope) (int, int) {
		var n, distinct int
		if err := p.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT r.request_id) FROM `+p.Schema+`.reaction_review r
			JOIN `+p.Schema+`.reaction_decision d ON d.id = r.decision_id WHERE d.event_id = $1 AND r.request_id IS NOT NULL`, e.ID).Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		return n, distinct
	}

	big := changed("street-lighting")
	d := decision(big)
	if d.Outcome != "REQUIRE_APPROVAL" || d.Status != "pending-approval" || d.Job == nil || d.Job.Status != "awaiting-approval" || d.Job.Total != 5000 {
		t.Fatalf("decision %+v (job %+v), want the gate: approval pending, 5,000 awaiting", d, d.Job)
	}
	if len(d.Reviews) != 1 || !strings.Contains(d.Reviews[0].Note, "5000 open requests, 1000 citizens") {
		t.Errorf("the approval %+v, want the estimate in its note", d.Reviews)
	}
	if n, _ := reviewed(big); n != 0 {
		t.Fatalf("%d requests reviewed before the approval", n)
	}
	if resp := post(t, url, approver, "/v1/reviews/"+d.ReviewID+"/resolve", `{"approve":true,"reason":"the new document applies to all"}`); resp.Status != http.StatusOK {
		t.Fatalf("approve = %d %s", resp.Status, resp.Body)
	}
	fabrictest.Eventually(t, 60*time.Second, "the mass reaction done", func() bool {
		d = decision(big)
		return d.Job != nil && d.Job.Status == "done"
	})
	if n, distinct := reviewed(big); n != 5000 || distinct != 5000 || d.Job.Done != 5000 {
		t.Errorf("%d reviews of %d requests (job done %d), want each of the 5,000 once", n, distinct, d.Job.Done)
	}
	// The security signal MassActionDetected: the requests reviewed are
	// mass-action items, counted by whichever instance ran each batch (after
	// its commit, so a moment after the job reads done).
	items := func() float64 {
		var sum float64
		for _, u := range []string{url, other} {
			sum += fabrictest.Counter(t, u+"/metrics", "fabric_operator_mass_action_items_total", map[string]string{"action": "reaction_review"})
		}
		return sum
	}
	fabrictest.Eventually(t, 10*time.Second, "5,000 mass-action items", func() bool { return items() >= 5000 })
	if got := items(); got != 5000 {
		t.Errorf("fabric_operator_mass_action_items_total{action=reaction_review} over both instances = %g, want 5000", got)
	}

	// At the threshold: the limit itself runs at once, one more waits.
	at, over := changed("at-the-limit"), changed("one-over-the-limit")
	if d := decision(at); d.Outcome != "ALLOW" || d.Job == nil || d.Job.Total != 1000 || d.Job.Status == "awaiting-approval" {
		t.Errorf("1,000 requests against a limit of 1,000: %+v (job %+v), want ALLOW run at once", d, d.Job)
	}
	if d := decision(over); d.Outcome != "REQUIRE_APPROVAL" || d.Job == nil || d.Job.Total != 1001 || d.Job.Status != "awaiting-approval" {
		t.Errorf("1,001 requests against a limit of 1,000: %+v (job %+v), want the gate", d, d.Job)
	}

	small := changed("small-service")
	fabrictest.Eventually(t, 20*time.Second, "the small reaction done", func() bool {
		d = decision(small)
		return d.Job != nil && d.Job.Status == "done"
	})
	if d.Outcome != "ALLOW" || d.Status != "executed" || d.Job.Done != 10 {
		t.Errorf("small service: %+v (job %+v), want ALLOW run at once on its 10 requests", d, d.Job)
	}
}

func post(t *testing.T, url, token, path, body string) deploytest.Response {
	t.Helper()
	return do(t, http.MethodPost, url+path, token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
}
