package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/replay"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

// TestSecuritySignalsOnMetrics: a served host (broker, database, tokens)
// counts the four security signals on its /metrics where they happen: an
// operator's purge of many letters (mass action), a DLQ filter and a letter
// of another tenant (cross-tenant attempts), 401/403 by reason and one
// principal's tenth refusal (repeated failures), and calls refused for a
// role the caller lacks, through the verifier, the replay API and the
// console's login (unexpected capability invocation).
func TestSecuritySignalsOnMetrics(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vh := fabrictest.NewVhost(t, env)
	base, _, _ := serve(t, map[string]string{"AMQP_URL": vh.URL, "JWT_KEYS": keys.JWKSPath, "RETENTION_INTERVAL": "off",
		"CONSOLE_SERVICES": "elsewhere=http://127.0.0.1:1"})
	mint := func(sub, tenantID string, ttl time.Duration, roles ...string) string {
		tok, err := keys.Mint(auth.Claims{Subject: sub, TenantID: tenantID, Roles: roles}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	operator := mint("op-1", "org-a", time.Hour, auth.RoleOperator)
	counter := func(name string, labels map[string]string) float64 {
		t.Helper()
		return fabrictest.Counter(t, base+"/metrics", name, labels)
	}
	post := func(path, token, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}

	t.Run("mass action: an operator purges 25 letters", func(t *testing.T) {
		ids := deadLetters(t, vh.URL, spec.DLQ(), "org-a", 25)
		status, body := post(dlq.PathPrefix+spec.Queue+"/purge", operator, `{"filter":{"all":true},"reason":"test letters"}`)
		var rep dlq.Report
		if status != http.StatusOK || json.Unmarshal(body, &rep) != nil || rep.Succeeded != len(ids) {
			t.Fatalf("purge = %d %s, want the %d letters purged", status, body, len(ids))
		}
		if got := counter("fabric_operator_mass_action_items_total", map[string]string{"action": "dlq_purge"}); got != 25 {
			t.Errorf("fabric_operator_mass_action_items_total{action=dlq_purge} = %g, want 25", got)
		}
		// A dry run touches nothing and counts nothing.
		deadLetters(t, vh.URL, spec.DLQ(), "org-a", 3)
		if status, body := post(dlq.PathPrefix+spec.Queue+"/replay", operator, `{"filter":{"all":true},"reason":"look","dryRun":true}`); status != http.StatusOK {
			t.Fatalf("dry-run replay = %d %s", status, body)
		}
		if got := counter("fabric_operator_mass_action_items_total", nil); got != 25 {
			t.Errorf("after a dry run: mass-action items = %g, want still 25", got)
		}
	})

	t.Run("cross-tenant: a filter and a letter of another tenant", func(t *testing.T) {
		ids := deadLetters(t, vh.URL, spec.DLQ(), "org-b", 1)
		// The filter's tenant is overridden by the token's (nothing of
		// org-b's is touched), and the attempt counted.
		if status, body := post(dlq.PathPrefix+spec.Queue+"/purge", operator, `{"filter":{"tenant":"org-b","all":true},"reason":"x","dryRun":true}`); status != http.StatusOK {
			t.Fatalf("purge with org-b's tenant = %d %s", status, body)
		}
		if status, _, body := call(t, "GET", base+dlq.PathPrefix+spec.Queue+"/letters/"+ids[0], operator); status != http.StatusNotFound {
			t.Fatalf("org-a shows org-b's letter = %d %s, want 404", status, body)
		}
		if status, body := post(dlq.PathPrefix+spec.Queue+"/replay", operator, `{"filter":{"ids":["`+ids[0]+`"]},"reason":"mine now"}`); status != http.StatusNotFound {
			t.Fatalf("org-a replays org-b's letter = %d %s, want 404", status, body)
		}
		for surface, want := range map[string]float64{"dlq_filter": 1, "dlq_letter": 2} {
			if got := counter("fabric_security_cross_tenant_total", map[string]string{"surface": surface}); got != want {
				t.Errorf("fabric_security_cross_tenant_total{surface=%s} = %g, want %g", surface, got, want)
			}
		}
		// A letter that does not exist is not an attempt on anyone's.
		if status, _, _ := call(t, "GET", base+dlq.PathPrefix+spec.Queue+"/letters/00000000-0000-7000-8000-000000000000", operator); status != http.StatusNotFound {
			t.Fatalf("a missing letter = %d, want 404", status)
		}
		if got := counter("fabric_security_cross_tenant_total", nil); got != 3 {
			t.Errorf("after a missing letter: cross-tenant attempts = %g, want still 3", got)
		}
	})

	t.Run("capability: roles the caller lacks", func(t *testing.T) {
		attendant := mint("att-1", "org-a", time.Hour, auth.RoleAttendant)
		if status, _, _ := call(t, "GET", base+dlq.PathPrefix+spec.Queue, attendant); status != http.StatusForbidden {
			t.Fatalf("an attendant lists the DLQ = %d, want 403", status)
		}
		status, body := post(replay.PathPrefix, operator, fmt.Sprintf(
			`{"queue":%q,"mode":"PRODUCTION","selection":{"types":["request.submitted.v1"]},"reason":"again"}`, spec.Queue))
		if status != http.StatusForbidden {
			t.Fatalf("a PRODUCTION replay by an operator without replay-admin = %d %s, want 403", status, body)
		}
		resp, err := http.PostForm(base+"/console/login", url.Values{"token": {attendant}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("an attendant logs into the console = %d, want 403", resp.StatusCode)
		}
		for capability, want := range map[string]float64{"role:operator": 2, "role:replay-admin": 1, "handler": 0} {
			if got := counter("fabric_security_capability_refused_total", map[string]string{"capability": capability}); got != want {
				t.Errorf("fabric_security_capability_refused_total{capability=%s} = %g, want %g", capability, got, want)
			}
		}
		if got := counter("fabric_security_authorization_failures_total", map[string]string{"reason": "forbidden"}); got != 3 {
			t.Errorf("fabric_security_authorization_failures_total{reason=forbidden} = %g, want 3", got)
		}
	})

	t.Run("repeated failures: one principal's tenth refusal", func(t *testing.T) {
		// An expired token still says whose it is: each refusal is
		// charged to org-a's op-2.
		expired := mint("op-2", "org-a", -time.Hour, auth.RoleOperator)
		for i := range 9 {
			if status, _, _ := call(t, "GET", base+dlq.PathPrefix+spec.Queue, expired); status != http.StatusUnauthorized {
				t.Fatalf("call %d with an expired token = %d, want 401", i+1, status)
			}
		}
		if got := counter("fabric_security_repeated_authorization_failures_total", nil); got != 0 {
			t.Fatalf("after 9 refusals: repeated = %g, want 0", got)
		}
		// No token: counted by reason, charged to nobody.
		for range 10 {
			call(t, "GET", base+dlq.PathPrefix+spec.Queue, "")
		}
		if got := counter("fabric_security_repeated_authorization_failures_total", nil); got != 0 {
			t.Fatalf("after 10 anonymous 401s: repeated = %g, want 0", got)
		}
		call(t, "GET", base+dlq.PathPrefix+spec.Queue, expired)
		if got := counter("fabric_security_repeated_authorization_failures_total", map[string]string{"reason": "credentials_refused"}); got != 1 {
			t.Errorf("after the 10th refusal: repeated{reason=credentials_refused} = %g, want 1", got)
		}
		for reason, want := range map[string]float64{"credentials_refused": 10, "no_credentials": 10} {
			if got := counter("fabric_security_authorization_failures_total", map[string]string{"reason": reason}); got != want {
				t.Errorf("fabric_security_authorization_failures_total{reason=%s} = %g, want %g", reason, got, want)
			}
		}
	})
}

// deadLetters puts n letters of tenantID straight into the DLQ queue (as a
// consumer would have dead-lettered them) and returns their ids.
func deadLetters(t *testing.T, amqpURL, queue, tenantID string, n int) []string {
	t.Helper()
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("0190d1a0-0000-7000-8000-%012d", time.Now().UnixNano()%1e12+int64(i))
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			MessageId: ids[i], Type: "request.submitted.v1", Body: []byte(`{}`),
			Headers: amqp.Table{wire.HeaderTenant: tenantID, wire.HeaderReason: wire.ReasonPermanent}})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(ctx); err != nil || !ok {
			t.Fatalf("letter %d not confirmed: %v", i, err)
		}
	}
	return ids
}
