package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/ops"
	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var env = fabrictest.EnvFrom(os.Getenv)

var spec = topology.Consumer{Queue: "test.host", Service: "test",
	RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
	Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}

// syncBuffer is a log sink the host writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestConfigFromRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"RETENTION_INTERVAL", "hourly"},
		{"RETENTION_INBOX", "30d"},
		{"RETENTION_OUTBOX", "-168h"},
		{"RETENTION_DLQ_AUDIT", "1 year"},
		{"RETENTION_BATCH", "-5"},
		{"CONSOLE_SERVICES", "workflow"},
		{"PUBLISH_RATE_PER_TYPE", "request.submitted.v1"},
		{"PUBLISH_RATE_PER_PRODUCER", "gateway/catalog=-3"},
		{"OUTBOX_RELAY_WORKERS", "0"},
		{"OUTBOX_RELAY_WORKERS", "two"},
		{"OUTAGE_HOLD", "10"},
		{"OUTAGE_HOLD", "30m"},
		{"RELEASE_ID", "release 7"},
		{"RELEASE_ID", "-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := host.ConfigFrom("test", ":0", func(k string) string {
				if k == tc.name {
					return tc.value
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("ConfigFrom with %s=%q = %v; want an error naming the variable", tc.name, tc.value, err)
			}
		})
	}
}

func TestConfigFromReadsOutageHold(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{{"", 0}, {"1s", time.Second}, {"25m", 25 * time.Minute}} {
		c, err := host.ConfigFrom("test", ":0", func(k string) string {
			if k == "OUTAGE_HOLD" {
				return tc.value
			}
			return ""
		})
		if err != nil || c.OutageHold != tc.want {
			t.Errorf("OUTAGE_HOLD=%q: OutageHold %s, err %v; want %s (0: the fabric's default)", tc.value, c.OutageHold, err, tc.want)
		}
	}
}

func TestConfigFromReadsRelayWorkers(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
	}{{"", 0}, {"1", 1}, {"3", 3}} {
		c, err := host.ConfigFrom("test", ":0", func(k string) string {
			if k == "OUTBOX_RELAY_WORKERS" {
				return tc.value
			}
			return ""
		})
		if err != nil || c.RelayWorkers != tc.want {
			t.Errorf("OUTBOX_RELAY_WORKERS=%q: RelayWorkers %d, err %v; want %d (0: the relay's default)", tc.value, c.RelayWorkers, err, tc.want)
		}
	}
}

// serve starts a host consuming spec with vars as its environment (plus
// the test's broker vhost, database schema and a free port) and returns
// its base URL, log and schema; the host is stopped and joined at cleanup.
func serve(t *testing.T, vars map[string]string) (string, *syncBuffer, *fabrictest.Schema) {
	t.Helper()
	vh := fabrictest.NewVhost(t, env)
	s := fabrictest.NewSchema(t, env)
	all := map[string]string{"AMQP_URL": vh.URL, "DATABASE_URL": env.DatabaseURL, "DATABASE_SCHEMA": s.Name,
		"HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": "info"}
	for k, v := range vars {
		all[k] = v
	}
	// Three claims a month old, before the host starts.
	if _, err := s.Pool.Exec(context.Background(), `INSERT INTO inbox_message (consumer, event_id, tenant_id, event_type, payload_hash, received_at)
		SELECT 'test.host', gen_random_uuid(), 'org-a', 'request.submitted.v1', '\x00', now() - interval '31 days' FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	cfg, err := host.ConfigFrom("test", ":0", func(k string) string { return all[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	h, err := host.New(ctx, cfg, host.Options{Consumers: []topology.Consumer{spec}}, logs)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, nil, func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(40 * time.Second):
			t.Fatal("Serve did not return")
		}
		// Serve joins its workers: the retention loop has ended.
		if n := fabrictest.GoroutinesIn("retention.(*Retention).Run"); n != 0 {
			t.Errorf("%d retention goroutines left after Serve returned", n)
		}
		if t.Failed() {
			t.Logf("host log:\n%s", logs)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a, logs, s
	case err := <-done:
		t.Fatalf("Serve = %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("host did not start")
	}
	return "", nil, nil
}

func call(t *testing.T, method, url, token string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b.Bytes()
}

// TestConsumingServiceServesDLQAndRunsRetention: a host with a consumer
// serves the DLQ API of its queue under /v1/dlq/ to operators only, runs
// retention on RETENTION_INTERVAL (expired inbox claims go, counted on
// /metrics and logged) and joins it at shutdown.
func TestConsumingServiceServesDLQAndRunsRetention(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	url, logs, _ := serve(t, map[string]string{"JWT_KEYS": keys.JWKSPath, "RETENTION_INTERVAL": "50ms"})
	token := func(roles ...string) string {
		tok, err := keys.Mint(auth.Claims{Subject: "op-1", TenantID: "org-a", Roles: roles}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"no token", dlq.PathPrefix + spec.Queue, "", 401},
		{"invalid token", dlq.PathPrefix + spec.Queue, "eyJhbGciOiJub25lIn0.e30.", 401},
		{"attendant", dlq.PathPrefix + spec.Queue, token(auth.RoleAttendant), 403},
		{"operator lists", dlq.PathPrefix + spec.Queue, token(auth.RoleOperator), 200},
		{"operator reads the audit", dlq.PathPrefix + "audit", token(auth.RoleOperator), 200},
		{"a queue not the service's", dlq.PathPrefix + "other.queue", token(auth.RoleOperator), 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ctype, body := call(t, "GET", url+tc.path, tc.token)
			if status != tc.want {
				t.Fatalf("GET %s = %d %s", tc.path, status, body)
			}
			if status >= 400 {
				var pd problem.Details
				if ctype != "application/problem+json" || json.Unmarshal(body, &pd) != nil || pd.Status != status {
					t.Errorf("GET %s = %s %s, want an RFC 9457 problem", tc.path, ctype, body)
				}
			}
		})
	}
	fabrictest.WaitCounter(t, 10*time.Second, url+"/metrics", "fabric_retention_rows_deleted_total", map[string]string{"table": "inbox_message"}, 3)
	if n := fabrictest.Counter(t, url+"/metrics", "fabric_retention_rows_deleted_total", map[string]string{"table": "inbox_message"}); n != 3 {
		t.Errorf("fabric_retention_rows_deleted_total{table=inbox_message} = %g, want 3", n)
	}
	fabrictest.Eventually(t, 5*time.Second, "the retention log line", func() bool {
		return strings.Contains(logs.String(), `"msg":"retention removed rows"`)
	})
}

// TestWithoutKeysTheDLQAPIRefusesEveryone: a consuming service that does
// not verify tokens (no NeedsAuth, no JWT_KEYS) still mounts the API, and
// it answers 401 to any token; with retention off nothing is deleted.
func TestWithoutKeysTheDLQAPIRefusesEveryone(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := keys.Mint(auth.Claims{Subject: "op-1", TenantID: "org-a", Roles: []string{auth.RoleOperator}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	url, logs, s := serve(t, map[string]string{"RETENTION_INTERVAL": "off"})
	if status, ctype, body := call(t, "GET", url+dlq.PathPrefix+spec.Queue, tok); status != 401 || ctype != "application/problem+json" {
		t.Fatalf("GET with an operator token and no JWT_KEYS = %d %s %s, want a 401 problem", status, ctype, body)
	}
	if !strings.Contains(logs.String(), "retention off") {
		t.Errorf("no log line saying retention is off")
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM inbox_message").Scan(&n); err != nil || n != 3 {
		t.Errorf("inbox claims with retention off = %d, %v; want all 3 kept", n, err)
	}
}

// TestServesTheConsoleWhenAsked: CONSOLE_SERVICES mounts the operator
// console, whose overview lists the host itself (reached at its bound
// address) beside the services named.
func TestServesTheConsoleWhenAsked(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := keys.Mint(auth.Claims{Subject: "op-1", TenantID: "org-a", Roles: []string{auth.RoleOperator}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	url, _, _ := serve(t, map[string]string{"JWT_KEYS": keys.JWKSPath, "CONSOLE_SERVICES": "elsewhere=http://127.0.0.1:1"})
	req, _ := http.NewRequest(http.MethodGet, url+"/console/", nil)
	req.AddCookie(&http.Cookie{Name: "agora_console", Value: tok})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || !strings.Contains(page, "<td>test</td><td>"+spec.Queue+"</td>") || !strings.Contains(page, "elsewhere: unreachable") {
		t.Fatalf("console overview = %d\n%s\nwant this host's queue and the unreachable service named", resp.StatusCode, page)
	}
}

// TestServesItsOpenAPIDocument: the host serves the merged document at
// /openapi.json without a token (its DLQ API documented for the host's
// queue), and its own routes answer as the document says.
func TestServesItsOpenAPIDocument(t *testing.T) {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	url, _, _ := serve(t, map[string]string{"JWT_KEYS": keys.JWKSPath})
	tr := openapitest.NewTransport(nil)
	if err := tr.AddService(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	operator, err := keys.Mint(auth.Claims{Subject: "op-1", TenantID: "org-a", Roles: []string{auth.RoleOperator}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	attendant, err := keys.Mint(auth.Claims{Subject: "at-1", TenantID: "org-a", Roles: []string{auth.RoleAttendant}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const dryRun = `{"filter":{"all":true},"reason":"test","dryRun":true}`
	for _, tc := range []struct {
		method, path, token, body string
		want                      int
	}{
		{"GET", "/healthz", "", "", 200},
		{"HEAD", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"GET", "/metrics", "", "", 200},
		{"GET", "/openapi.json", "", "", 200},
		{"GET", dlq.PathPrefix + spec.Queue, operator, "", 200},
		{"GET", dlq.PathPrefix + "audit", operator, "", 200},
		{"GET", dlq.PathPrefix + spec.Queue + "/letters/nope", operator, "", 404},
		{"POST", dlq.PathPrefix + spec.Queue + "/replay", operator, dryRun, 200},
		{"POST", dlq.PathPrefix + spec.Queue + "/purge", operator, dryRun, 200},
		{"POST", dlq.PathPrefix + spec.Queue + "/purge", operator, `{"filter":{"all":true},"dryRun":true}`, 422},
		{"POST", dlq.PathPrefix + spec.Queue + "/replay", operator, `{"filter":`, 400},
		{"GET", dlq.PathPrefix + spec.Queue, attendant, "", 403},
		{"GET", dlq.PathPrefix + spec.Queue, "", "", 401},
		{"GET", dlq.PathPrefix + "other.queue", operator, "", 404},
		{"DELETE", dlq.PathPrefix + spec.Queue, operator, "", 405},
		{"GET", ops.PathPrefix + "status", operator, "", 200},
		{"GET", ops.PathPrefix + "journeys/0192d3a0-0000-7000-8000-000000000001", operator, "", 200},
		{"GET", ops.PathPrefix + "status", attendant, "", 403},
		{"GET", ops.PathPrefix + "status", "", "", 401},
		// The edge refuses a NUL in a query on every route but the probes, before any handler.
		{"GET", ops.PathPrefix + "status?x=%00", operator, "", 400},
		{"GET", "/v1/replays?x=%00", operator, "", 400},
		{"GET", "/v1/replays/0192d3a0-0000-7000-8000-000000000001?x=%00", operator, "", 400},
		{"POST", "/v1/replays/0192d3a0-0000-7000-8000-000000000001/cancel?x=%00", operator, "", 400},
		{"GET", "/healthz?x=%00", "", "", 200},
		{"GET", "/nowhere", "", "", 404},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
			}
		})
	}
	_, _, doc := call(t, "GET", url+"/openapi.json", "")
	ops, err := openapi.Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := openapi.HostOperations(openapi.Host{Queues: []string{spec.Queue}, Ops: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := openapitest.CompareRoutes(ops, want); err != nil {
		t.Errorf("a host without routes of its own documents: %v", err)
	}
	var d struct {
		Components struct {
			Parameters map[string]struct {
				Schema struct {
					Enum []string `json:"enum"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Components.Parameters["DLQQueue"].Schema.Enum; len(got) != 1 || got[0] != spec.Queue {
		t.Errorf("the {queue} parameter enumerates %v, want [%s]", got, spec.Queue)
	}
}

func TestNewRefusesAnInvalidOpenAPIDocument(t *testing.T) {
	cfg, err := host.ConfigFrom("test", ":0", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = host.New(context.Background(), cfg, host.Options{OpenAPI: []byte("openapi: 3.0.3\ninfo: {title: x, version: '1'}\n")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "openapi") {
		t.Fatalf("New with an OpenAPI 3.0 document = %v, want an error naming it", err)
	}
}
