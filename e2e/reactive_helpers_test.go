package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-platform/agora/e2e/harness"
)

// workflowCall calls the workflow service's REST API as token and, for a
// 2xx answer, decodes it into out; it returns the status.
func workflowCall(t *testing.T, h *harness.Harness) func(method, path, token, body string, out any) int {
	return func(method, path, token, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, h.URL("workflow")+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		status, data := do(t, req, token)
		if out != nil && status < 300 {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, data)
			}
		}
		return status
	}
}

// activateSubscription creates a subscription from spec as author and
// takes version 1 to ACTIVE as operator (four eyes), returning its id.
func activateSubscription(t *testing.T, call func(method, path, token, body string, out any) int, author, operator, spec string) string {
	t.Helper()
	var sub struct{ ID string }
	if status := call(http.MethodPost, "/v1/subscriptions", author, spec, &sub); status != http.StatusCreated {
		t.Fatalf("create subscription = %d", status)
	}
	for _, to := range []string{"VALIDATING", "APPROVED", "ACTIVE"} {
		if status := call(http.MethodPost, "/v1/subscriptions/"+sub.ID+"/versions/1/transitions", operator,
			`{"to":"`+to+`","reason":"the slice"}`, nil); status != http.StatusOK {
			t.Fatalf("subscription → %s = %d", to, status)
		}
	}
	return sub.ID
}
