package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/gateway"
	"github.com/agora-platform/agora/pkg/fabric/gateway/signature"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

const (
	secret   = "0123456789abcdef0123456789abcdef-scheduling"
	otherKey = "0123456789abcdef0123456789abcdef-someone-else"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

type stack struct {
	schema  *fabrictest.Schema
	srv     *httptest.Server
	metrics string // the Prometheus endpoint of the security signals
}

func newStack(t *testing.T) *stack {
	t.Helper()
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{schema: fabrictest.NewSchema(t, fabrictest.EnvFrom(os.Getenv))}
	sources := []gateway.Source{
		{ID: "scheduling", URI: "https://agenda.example.org", TenantID: "org-a", Secret: secret,
			Types: []string{"appointment.scheduled.v1", "appointment.cancelled.v1"}},
		{ID: "registry", URI: "urn:org-b:citizen-registry", TenantID: "org-b", Secret: otherKey,
			Types: []string{"citizen.updated.v1"}},
	}
	g := gateway.New(s.schema.Pool, outbox.New(reg), reg, sources, func() time.Time { return now }, 0, slog.New(slog.DiscardHandler))
	// Behind the security watch, as a service host serves it.
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
	s.metrics = metrics.URL
	s.srv = httptest.NewServer(security.Watch(g, m))
	t.Cleanup(s.srv.Close)
	return s
}

func scheduled(id string) map[string]any {
	return map[string]any{"specversion": "1.0", "id": id, "source": "https://agenda.example.org",
		"type": "appointment.scheduled.v1", "time": "2026-12-01T09:59:00Z", "datacontenttype": "application/json",
		"data": map[string]any{"appointmentId": uuid.NewString(), "citizenId": "citizen-7", "at": "2026-12-03T14:00:00Z"}}
}

// send posts ev signed with key at signedAt (sig overrides the header).
func (s *stack) send(t *testing.T, ev map[string]any, key string, signedAt time.Time, sig string) (int, map[string]any) {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", signature.ContentType)
	if sig == "" {
		sig = signature.Sign(key, signedAt, body)
	}
	req.Header.Set(signature.Header, sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("a %d without a problem body: %s", resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

// enqueued returns the outbox rows: id, type, tenant and producer of each.
func (s *stack) enqueued(t *testing.T) []map[string]string {
	t.Helper()
	rows, err := s.schema.Pool.Query(context.Background(),
		`SELECT id::text, event_type, coalesce(tenant_id, ''), convert_from(body, 'UTF8')::json->>'producer' FROM outbox_event ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		var id, typ, tenant, producer string
		if err := rows.Scan(&id, &typ, &tenant, &producer); err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]string{"id": id, "type": typ, "tenant": tenant, "producer": producer})
	}
	return out
}

func TestGateway(t *testing.T) {
	s := newStack(t)
	ev := scheduled("agenda-1")

	status, out := s.send(t, ev, secret, now, "")
	if status != http.StatusAccepted {
		t.Fatalf("a valid event = %d %v, want 202", status, out)
	}
	rows := s.enqueued(t)
	if len(rows) != 1 || rows[0]["id"] != out["eventId"] || rows[0]["type"] != "appointment.scheduled.v1" ||
		rows[0]["tenant"] != "org-a" || rows[0]["producer"] != "gateway/scheduling" {
		t.Fatalf("outbox = %v, want one appointment.scheduled.v1 of org-a from gateway/scheduling with id %v", rows, out["eventId"])
	}

	refused := []struct {
		name   string
		ev     map[string]any
		key    string
		at     time.Time
		sig    string
		status int
		detail string
	}{
		{"a replay of the same id", ev, secret, now, "", http.StatusConflict, "before"},
		{"a replay signed again later", ev, secret, now.Add(time.Minute), "", http.StatusConflict, "before"},
		{"a bad signature", scheduled("agenda-2"), otherKey, now, "", http.StatusUnauthorized, "bad signature"},
		{"no signature", scheduled("agenda-3"), secret, now, "t=,v1=", http.StatusUnauthorized, "missing"},
		{"a stale timestamp", scheduled("agenda-4"), secret, now.Add(-6 * time.Minute), "", http.StatusUnauthorized, "stale"},
		{"a timestamp from the future", scheduled("agenda-5"), secret, now.Add(6 * time.Minute), "", http.StatusUnauthorized, "stale"},
		{"an unknown type", with(scheduled("agenda-6"), "type", "appointment.teleported.v1"), secret, now, "", http.StatusUnprocessableEntity, "unknown event type"},
		{"a command, not an event", with(scheduled("agenda-7"), "type", "workflow.start.v1"), secret, now, "", http.StatusUnprocessableEntity, "unknown event type"},
		{"a type the source may not send", with(scheduled("agenda-8"), "type", "citizen.updated.v1"), secret, now, "", http.StatusForbidden, "may not send"},
		{"data its schema refuses", with(scheduled("agenda-9"), "data", map[string]any{"appointmentId": "nope"}), secret, now, "", http.StatusUnprocessableEntity, "schema"},
		{"another tenant named", with(scheduled("agenda-10"), "tenantid", "org-b"), secret, now, "", http.StatusForbidden, "tenant"},
		{"an unknown source", with(scheduled("agenda-11"), "source", "https://evil.example"), secret, now, "", http.StatusUnauthorized, "unknown source"},
		{"not CloudEvents 1.0", with(scheduled("agenda-12"), "specversion", "0.3"), secret, now, "", http.StatusBadRequest, "CloudEvents"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			status, out := s.send(t, tc.ev, tc.key, tc.at, tc.sig)
			if status != tc.status || !strings.Contains(strings.ToLower(detailOf(out)), strings.ToLower(tc.detail)) {
				t.Errorf("= %d %v, want %d naming %q", status, out, tc.status, tc.detail)
			}
		})
	}
	if rows := s.enqueued(t); len(rows) != 1 {
		t.Errorf("after the refusals the outbox holds %d events, want still 1: %v", len(rows), rows)
	}
	// The refusals as security signals: the tenant named is a cross-tenant
	// attempt, the type a capability the source lacks, and every 401/403
	// is counted by reason (no source sent ten: no repeat).
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"fabric_security_cross_tenant_total", map[string]string{"surface": "gateway"}, 1},
		{"fabric_security_capability_refused_total", map[string]string{"capability": "gateway:event-type"}, 1},
		{"fabric_security_capability_refused_total", map[string]string{"capability": "handler"}, 0},
		{"fabric_security_authorization_failures_total", map[string]string{"reason": "credentials_refused"}, 5},
		{"fabric_security_authorization_failures_total", map[string]string{"reason": "forbidden"}, 2},
		{"fabric_security_repeated_authorization_failures_total", nil, 0},
	} {
		if got := fabrictest.Counter(t, s.metrics, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}

	t.Run("another source's tenant is its own", func(t *testing.T) {
		ev := map[string]any{"specversion": "1.0", "id": "agenda-1", "source": "urn:org-b:citizen-registry",
			"type": "citizen.updated.v1", "data": citizenUpdated()}
		// The same id as scheduling's first event: ids are per source.
		if status, out := s.send(t, ev, otherKey, now, ""); status != http.StatusAccepted {
			t.Fatalf("= %d %v, want 202", status, out)
		}
		rows := s.enqueued(t)
		if len(rows) != 2 || rows[1]["tenant"] != "org-b" || rows[1]["producer"] != "gateway/registry" {
			t.Errorf("outbox = %v, want the citizen update under org-b", rows)
		}
	})
}

func citizenUpdated() map[string]any {
	return map[string]any{"citizenId": "citizen-9"}
}

func with(ev map[string]any, k string, v any) map[string]any {
	ev[k] = v
	return ev
}

func detailOf(p map[string]any) string {
	b, _ := json.Marshal(p)
	return string(b)
}

func TestLoadSources(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 32)
	tests := []struct {
		name, json, err string
	}{
		{"valid", `[{"id":"s","uri":"urn:s","tenantId":"org-a","secret":"` + long + `","types":["appointment.scheduled.v1"]}]`, ""},
		{"short secret", `[{"id":"s","uri":"urn:s","tenantId":"org-a","secret":"short","types":[]}]`, "at least 32 bytes"},
		{"no tenant", `[{"id":"s","uri":"urn:s","secret":"` + long + `"}]`, "tenantId"},
		{"a command", `[{"id":"s","uri":"urn:s","tenantId":"org-a","secret":"` + long + `","types":["workflow.start.v1"]}]`, "not an event"},
		{"same uri twice", `[{"id":"a","uri":"urn:s","tenantId":"org-a","secret":"` + long + `"},{"id":"b","uri":"urn:s","tenantId":"org-b","secret":"` + long + `"}]`, "twice"},
		{"unknown field", `[{"id":"s","uri":"urn:s","tenantId":"org-a","secret":"` + long + `","tenant":"x"}]`, "unknown field"},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "sources.json")
		if err := os.WriteFile(path, []byte(tc.json), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := gateway.LoadSources(path, reg)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: LoadSources = %v, want error %q", tc.name, err, tc.err)
		}
	}
}
