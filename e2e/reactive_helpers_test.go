package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/gateway"
	"github.com/agora-platform/agora/pkg/fabric/gateway/signature"
)

// catalogSecret signs what the catalog system sends through the gateway.
const catalogSecret = "the-catalog-system-secret-of-32-bytes"

// catalogSource registers the catalog system as a gateway source of
// tenant that may announce service changes, and returns the file for the
// request service's GATEWAY_SOURCES_FILE.
func catalogSource(t *testing.T, tenant string) string {
	t.Helper()
	sources := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(sources, []byte(`[{"id":"catalog","uri":"https://catalogo.example.org","tenantId":"`+tenant+`",
		"secret":"`+catalogSecret+`","types":["catalog.service-updated.v1"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	return sources
}

// announceServiceChange sends the catalog system's signed CloudEvent, the
// alvará service now requiring the fire brigade's report, through the
// request service's gateway, and returns the id of the event it became.
func announceServiceChange(t *testing.T, h *harness.Harness) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "svc-change-" + randHex(4), "source": "https://catalogo.example.org",
		"type": "catalog.service-updated.v1", "data": map[string]any{"serviceId": "alvara-funcionamento", "change": "requires-document",
			"requiredDocument": "laudo do corpo de bombeiros"}})
	req, _ := http.NewRequest(http.MethodPost, h.URL("request")+gateway.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", signature.ContentType)
	req.Header.Set(signature.Header, signature.Sign(catalogSecret, time.Now(), body))
	status, data := do(t, req, "")
	var accepted struct{ EventID string }
	if status != http.StatusAccepted || json.Unmarshal(data, &accepted) != nil || accepted.EventID == "" {
		t.Fatalf("gateway = %d %s", status, data)
	}
	return accepted.EventID
}

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
