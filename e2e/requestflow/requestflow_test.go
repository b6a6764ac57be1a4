// Package requestflow drives the request and workflow services as built
// binaries: submit, process start, task completion, status, traces.
package requestflow

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

func TestMain(m *testing.M) { harness.Main(m, os.Getenv) }

func call(t *testing.T, method, url, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, data, err)
		}
	}
	return resp.StatusCode
}

func TestSubmitProcessCompleteAcrossServices(t *testing.T) {
	h := harness.New(t, os.Getenv)
	h.Start(t, "workflow")
	h.Start(t, "request")
	citizen := h.Token("org-a", "citizen-1", "citizen")
	attendant := h.Token("org-a", "attendant-1", "attendant")

	var rc struct{ ID, Protocol string }
	if st := call(t, http.MethodPost, h.URL("request")+"/v1/requests", citizen,
		`{"serviceId":"iptu-segunda-via","formId":"f","formVersion":1,"channel":"web","fields":{"a":1}}`, &rc); st != http.StatusCreated {
		t.Fatalf("submit = %d, want 201", st)
	}
	status := func() string {
		var v struct{ Status string }
		if st := call(t, http.MethodGet, h.URL("request")+"/v1/requests/"+rc.ID, citizen, "", &v); st != 200 {
			t.Fatalf("GET request = %d", st)
		}
		return v.Status
	}
	type task struct{ ID, Status string }
	var procs struct {
		Processes []struct {
			Status string
			Tasks  []task
		}
	}
	fabrictest.Eventually(t, 30*time.Second, "process started and request in_progress", func() bool {
		call(t, http.MethodGet, h.URL("workflow")+"/v1/processes?requestId="+rc.ID, attendant, "", &procs)
		return len(procs.Processes) == 1 && status() == "in_progress"
	})
	// Tenant B sees nothing of tenant A through either service.
	other := h.Token("org-b", "attendant-1", "attendant")
	if st := call(t, http.MethodGet, h.URL("request")+"/v1/requests/"+rc.ID, other, "", nil); st != http.StatusNotFound {
		t.Errorf("org-b GET request = %d, want 404", st)
	}
	var none struct{ Processes []any }
	call(t, http.MethodGet, h.URL("workflow")+"/v1/processes?requestId="+rc.ID, other, "", &none)
	if len(none.Processes) != 0 {
		t.Errorf("org-b sees %d processes of org-a's request", len(none.Processes))
	}

	taskID := procs.Processes[0].Tasks[0].ID
	if st := call(t, http.MethodPost, h.URL("workflow")+"/v1/tasks/"+taskID+"/complete", attendant, `{"outcome":"approved"}`, nil); st != 200 {
		t.Fatalf("complete task = %d", st)
	}
	fabrictest.Eventually(t, 30*time.Second, "request completed", func() bool { return status() == "completed" })

	// Stopping flushes the span files; one trace runs from the HTTP submit
	// in request through the workflow consumer.
	h.Stop("request")
	h.Stop("workflow")
	spans := harness.Spans(t, h.TracesDir)
	var submitTrace string
	for _, s := range spans {
		if s.Service == "request" && s.Name == "POST /v1/requests" {
			submitTrace = s.TraceID
		}
	}
	if submitTrace == "" {
		t.Fatalf("no POST /v1/requests span among %d spans", len(spans))
	}
	services := map[string]bool{}
	for _, s := range harness.Trace(spans, submitTrace) {
		services[s.Service] = true
	}
	if !services["request"] || !services["workflow"] {
		t.Errorf("trace %s spans services %v, want request and workflow", submitTrace, services)
	}
}
