package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestServiceChangeBehindTheBlastRadius is seed 004 §88's second slice
// across the real services: the tenant's catalog system tells the
// platform, through the external-event gateway (a signed CloudEvent), that
// a service now requires another document; the workflow's subscription
// would open a review on each of the service's 30 open requests, above its
// limit of 10, so it waits for an operator with the estimate; approved, it
// runs in batches and every request gets its review once.
func TestServiceChangeBehindTheBlastRadius(t *testing.T) {
	h := harness.New(t, os.Getenv)
	h.RequireProcesses(t)
	tenant := "org-a-" + randHex(3)
	h.Start(t, "request", harness.Env{"GATEWAY_SOURCES_FILE": catalogSource(t, tenant)})
	h.Start(t, "workflow", harness.Env{"REACTION_JOB_BATCH": "7", "REACTION_JOB_INTERVAL": "100ms"})
	attendant, operator := h.Token(tenant, "ana", "attendant"), h.Token(tenant, "olga", "operator")
	call := workflowCall(t, h)
	const open = 30
	for i := range open {
		submitRequest(t, h.URL("request"), h.Token(tenant, "citizen-"+string(rune('a'+i%26)), "citizen"))
	}
	fabrictest.Eventually(t, time.Minute, "30 open processes", func() bool {
		var page struct{ Items []json.RawMessage }
		return call(http.MethodGet, "/v1/tasks?status=open&limit=100", operator, "", &page) == http.StatusOK && len(page.Items) == open
	})
	activateSubscription(t, call, attendant, operator, `{"name":"new document required",
		"eventTypes":["catalog.service-updated.v1"],"filter":"payload.change == \"requires-document\"",
		"policy":{"default":"ALLOW"},"reaction":{"kind":"review-affected-requests","role":"attendant","maxAffected":10}}`)

	eventID := announceServiceChange(t, h)
	type decision struct {
		Outcome, Status, ReviewID string
		Reviews                   []struct{ Kind, Note string }
		Job                       *struct {
			Total, Done int
			Status      string
		}
	}
	var d decision
	decided := func() bool {
		var list []decision
		if call(http.MethodGet, "/v1/decisions?eventId="+eventID, attendant, "", &list) != http.StatusOK || len(list) != 1 {
			return false
		}
		d = list[0]
		return true
	}
	fabrictest.Eventually(t, 30*time.Second, "the change decided", decided)
	if d.Outcome != "REQUIRE_APPROVAL" || d.Job == nil || d.Job.Status != "awaiting-approval" || d.Job.Total != open ||
		len(d.Reviews) != 1 || !strings.Contains(d.Reviews[0].Note, "30 open requests") {
		t.Fatalf("decision %+v (job %+v), want the blast-radius gate with the estimate of 30 open requests", d, d.Job)
	}
	if status := call(http.MethodPost, "/v1/reviews/"+d.ReviewID+"/resolve", operator, `{"approve":true,"reason":"inform every applicant"}`, nil); status != http.StatusOK {
		t.Fatalf("approve = %d", status)
	}
	fabrictest.Eventually(t, 30*time.Second, "the reviews opened in batches", func() bool {
		return decided() && d.Job != nil && d.Job.Status == "done"
	})
	var reviews []struct{ RequestID, Role string }
	call(http.MethodGet, "/v1/reviews", attendant, "", &reviews)
	seen := map[string]bool{}
	for _, r := range reviews {
		if r.RequestID != "" && r.Role == "attendant" {
			seen[r.RequestID] = true
		}
	}
	if d.Job.Done != open || len(seen) != open {
		t.Errorf("job done %d, %d requests with an open review; want each of the %d once", d.Job.Done, len(seen), open)
	}
}
