package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/replay"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// TestReplaySecuritySignals: behind the host's security watch and the
// operator role, over HTTP and a real database, a PRODUCTION replay counts
// its whole selection as mass-action items when it is ordered; a dry run
// counts nothing; and a PRODUCTION replay asked without replay-admin is a
// refused capability.
func TestReplaySecuritySignals(t *testing.T) {
	env := fabrictest.EnvFrom(os.Getenv)
	s := fabrictest.NewSchema(t, env)
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	spec := topology.Consumer{Queue: "replay-test.signals", Service: "replay-test",
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}
	var events []json.RawMessage
	for i := range 12 {
		e, err := envelope.New("request.submitted.v1", "org-a", "request-service", map[string]any{
			"requestId": fmt.Sprintf("01a23200-0000-7000-8000-%012d", i), "protocol": fmt.Sprintf("AGR-2026-%06d", i),
			"serviceId": "svc", "formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, b)
	}
	// The history answers every selection with the twelve events, in one page.
	hist := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"events": events, "next": ""})
	}))
	t.Cleanup(hist.Close)
	// Start records jobs only; nothing is swept, so no publisher is needed.
	svc := replay.New(s.Pool, s.Name, []topology.Consumer{spec}, reg, nil, replay.HTTPHistory{BaseURL: hist.URL}, replay.Options{})

	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(context.Background(), keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	mp, scrape, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	m, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	metrics := httptest.NewServer(scrape)
	t.Cleanup(metrics.Close)
	api := httptest.NewServer(security.Watch(auth.NewVerifier(set, auth.DevIssuer).Require(auth.RoleOperator)(replay.Handler(svc)), m))
	t.Cleanup(api.Close)
	token := func(roles ...string) string {
		tok, err := keys.Mint(auth.Claims{Subject: "olga", TenantID: "org-a", Roles: roles}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	start := func(tok string, mode replay.Mode) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, api.URL+replay.PathPrefix, strings.NewReader(fmt.Sprintf(
			`{"queue":%q,"mode":%q,"selection":{"types":["request.submitted.v1"]},"reason":"the test"}`, spec.Queue, mode)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	items := func() float64 {
		return fabrictest.Counter(t, metrics.URL, "fabric_operator_mass_action_items_total", map[string]string{"action": "history_replay"})
	}

	if status := start(token(auth.RoleOperator), replay.DryRun); status != http.StatusAccepted {
		t.Fatalf("dry run = %d, want 202", status)
	}
	if got := items(); got != 0 {
		t.Errorf("after a dry run: history_replay items = %g, want 0", got)
	}
	if status := start(token(auth.RoleOperator), replay.Production); status != http.StatusForbidden {
		t.Fatalf("PRODUCTION without replay-admin = %d, want 403", status)
	}
	if got := fabrictest.Counter(t, metrics.URL, "fabric_security_capability_refused_total",
		map[string]string{"capability": "role:replay-admin"}); got != 1 {
		t.Errorf("fabric_security_capability_refused_total{capability=role:replay-admin} = %g, want 1", got)
	}
	if status := start(token(auth.RoleOperator, auth.RoleReplayAdmin), replay.Production); status != http.StatusAccepted {
		t.Fatalf("PRODUCTION by a replay-admin = %d, want 202", status)
	}
	if got := items(); got != 12 {
		t.Errorf("after a PRODUCTION replay of 12 events: history_replay items = %g, want 12", got)
	}
}
