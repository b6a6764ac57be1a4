package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
)

// TestReplayFromHistory is seed 004 §40-41 across the real services: three
// requests are submitted, projected by analytics and stored by the data
// lake; an operator replays the tenant's request.submitted.v1 from the
// lake's history (GET /v1/history) to analytics' queue in each mode.
// DRY_RUN decides that all three would be skipped by the inbox;
// SIMULATION runs analytics' handler on each in a rolled-back transaction
// and the projection does not move; PRODUCTION is refused without the
// replay-admin role, and with it sends all three again, which the inbox
// skips (counted as duplicates), so the projection still counts three.
// Another tenant's operator cannot see the job.
func TestReplayFromHistory(t *testing.T) {
	h := harness.New(t, os.Getenv)
	h.RequireProcesses(t)
	h.Start(t, "datalake-ingestion", harness.Env{"DATALAKE_BATCH_AGE": "500ms"})
	h.Start(t, "request")
	h.Start(t, "analytics", harness.Env{"HISTORY_URL": h.URL("datalake-ingestion")})
	contract := openapitest.NewTransport(nil)
	for _, svc := range []string{"analytics", "datalake-ingestion"} {
		if err := contract.AddService(context.Background(), h.URL(svc)); err != nil {
			t.Fatal(err)
		}
	}
	client := &http.Client{Transport: contract}
	call := func(method, url, token, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil && resp.StatusCode < 300 {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: %v", method, url, err)
			}
		}
		return resp.StatusCode
	}

	tenant := "org-a-" + randHex(3)
	citizen := h.Token(tenant, "citizen-"+randHex(2), "citizen")
	operator, admin := h.Token(tenant, "ana", "operator"), h.Token(tenant, "olga", "operator", "replay-admin")
	for range 3 {
		submitRequest(t, h.URL("request"), citizen)
	}
	fabrictest.Eventually(t, 60*time.Second, "three submissions in the lake's history", func() bool {
		var page struct{ Events []json.RawMessage }
		return call(http.MethodGet, h.URL("datalake-ingestion")+"/v1/history?type=request.submitted.v1", operator, "", &page) == http.StatusOK &&
			len(page.Events) == 3
	})
	today := time.Now().UTC().Format("2006-01-02")
	projected := func() int64 {
		var out struct {
			Totals struct{ Requests int64 }
		}
		if call(http.MethodGet, h.URL("analytics")+"/v1/analytics/requests?from="+today+"&to="+today, operator, "", &out) != http.StatusOK {
			return -1
		}
		return out.Totals.Requests
	}
	fabrictest.Eventually(t, 30*time.Second, "three requests projected", func() bool { return projected() == 3 })

	type job struct {
		ID        string
		Status    string
		Total     int
		Processed int
		Outcomes  map[string]int
	}
	replay := func(token, mode string) (job, int) {
		t.Helper()
		var j job
		status := call(http.MethodPost, h.URL("analytics")+"/v1/replays", token, `{"queue":"analytics.request-events","mode":"`+mode+`",
			"selection":{"types":["request.submitted.v1"]},"reason":"e2e: rebuild the projection"}`, &j)
		if status != http.StatusAccepted {
			return j, status
		}
		fabrictest.Eventually(t, 30*time.Second, mode+" replay done", func() bool {
			return call(http.MethodGet, h.URL("analytics")+"/v1/replays/"+j.ID, token, "", &j) == http.StatusOK && j.Status == "done"
		})
		if j.Total != 3 || j.Processed != 3 {
			t.Errorf("%s: %+v, want 3 events processed", mode, j)
		}
		return j, status
	}

	dry, _ := replay(operator, "DRY_RUN")
	if dry.Outcomes["would-skip"] != 3 {
		t.Errorf("dry run: %v, want 3 would-skip (analytics' inbox has them)", dry.Outcomes)
	}
	// The decisions, a page at a time.
	var items []struct {
		Seq           int
		Outcome, Type string
	}
	if status := call(http.MethodGet, h.URL("analytics")+"/v1/replays/"+dry.ID+"/items?after=1&limit=5", operator, "", &items); status != http.StatusOK ||
		len(items) != 2 || items[0].Seq != 2 || items[1].Outcome != "would-skip" || items[1].Type != "request.submitted.v1" {
		t.Errorf("dry run items after 1: %d %+v, want seq 2 and 3, would-skip", status, items)
	}
	if status := call(http.MethodGet, h.URL("analytics")+"/v1/replays/"+dry.ID+"/items?limit=0", operator, "", nil); status != http.StatusBadRequest {
		t.Errorf("items?limit=0 = %d, want 400", status)
	}
	if j, _ := replay(operator, "SIMULATION"); j.Outcomes["simulated"] != 3 {
		var items []struct{ Outcome, Detail string }
		call(http.MethodGet, h.URL("analytics")+"/v1/replays/"+j.ID+"/items", operator, "", &items)
		t.Errorf("simulation: %v, want 3 simulated: %+v", j.Outcomes, items)
	}
	if n := projected(); n != 3 {
		t.Errorf("the projection counts %d after the simulation, want 3", n)
	}
	if _, status := replay(operator, "PRODUCTION"); status != http.StatusForbidden {
		t.Errorf("PRODUCTION by an operator without replay-admin = %d, want 403", status)
	}
	j, _ := replay(admin, "PRODUCTION")
	if j.Outcomes["delivered"] != 3 {
		t.Errorf("production: %v, want 3 delivered", j.Outcomes)
	}
	fabrictest.WaitCounter(t, 30*time.Second, h.URL("analytics")+"/metrics", "fabric_consumer_duplicates_total",
		map[string]string{"consumer": "analytics.request-events"}, 3)
	if n := projected(); n != 3 {
		t.Errorf("the projection counts %d after the production replay, want 3 (one effect per event)", n)
	}
	// The same through fabricctl, followed to its end.
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fabricctl")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "pkg/fabric/cmd/fabricctl")).CombinedOutput(); err != nil {
		t.Fatalf("build fabricctl: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "replay", "start", "--queue", "analytics.request-events", "--mode", "DRY_RUN",
		"--type", "request.submitted.v1", "--reason", "e2e through fabricctl", "--wait")
	cmd.Env = append(os.Environ(), "SERVICE_URL="+h.URL("analytics"), "AGORA_TOKEN="+operator)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "DRY_RUN analytics.request-events: done, 3 of 3 (would-skip 3)") {
		t.Errorf("fabricctl replay start --wait: %v\n%s", err, out)
	}

	other := h.Token("org-b-"+randHex(3), "bruno", "operator")
	if status := call(http.MethodGet, h.URL("analytics")+"/v1/replays/"+j.ID, other, "", nil); status != http.StatusNotFound {
		t.Errorf("another tenant's operator reads the job: %d, want 404", status)
	}
}
