package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/gateway"
	"github.com/agora-platform/agora/pkg/fabric/gateway/signature"
)

// POST /v1/external-events: a registered source's signed CloudEvent is
// published, as an event of the source's tenant, under the request
// service's own broker grants; an unsigned one is refused. The gateway's
// other refusals are tested in pkg/fabric/gateway.
func TestExternalEventGateway(t *testing.T) {
	const secret = "a-local-test-secret-of-32-bytes-or-more"
	sources := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(sources, []byte(`[{"id":"scheduling","uri":"https://agenda.example.org","tenantId":"org-a",
		"secret":"`+secret+`","types":["appointment.scheduled.v1"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"GATEWAY_SOURCES_FILE": sources})
	obs := fabrictest.Observe(t, s.Conn, "appointment.scheduled.v1")
	appointment := uuid.NewString()
	body, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "agenda-" + appointment, "source": "https://agenda.example.org",
		"type": "appointment.scheduled.v1", "data": map[string]any{"appointmentId": appointment, "citizenId": "citizen-1", "at": "2026-12-03T14:00:00Z"}})
	post := func(sig string) deploytest.Response {
		return s.do(t, http.MethodPost, gateway.Path, "", bytes.NewReader(body),
			map[string]string{"Content-Type": signature.ContentType, signature.Header: sig})
	}
	expectProblem(t, post("t=1,v1=00"), http.StatusUnauthorized)
	resp := post(signature.Sign(secret, time.Now(), body))
	if resp.Status != http.StatusAccepted {
		t.Fatalf("signed event = %d %s, want 202", resp.Status, resp.Body)
	}
	var accepted struct{ EventID string }
	resp.JSON(t, &accepted)
	e := obs.Next(t, "appointment.scheduled.v1", func(e envelope.Envelope) bool { return e.ID == accepted.EventID })
	if e.TenantID != "org-a" || e.Producer != "gateway/scheduling" {
		t.Errorf("published %s of tenant %q by %q, want org-a by gateway/scheduling", e.Type, e.TenantID, e.Producer)
	}
	expectProblem(t, post(signature.Sign(secret, time.Now(), body)), http.StatusConflict)
}
