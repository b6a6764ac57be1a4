package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// platform is one test's corner of the real infrastructure: a vhost, a
// schema, dev keys, a publisher and an admin pool.
type platform struct {
	env    fabrictest.Env
	vhost  *fabrictest.Vhost
	schema string
	// identity is the service's own broker user and database roles.
	identity map[string]string
	keys     *auth.DevKeys
	conn     *broker.Conn
	pub      *broker.Publisher
	pool     *pgxpool.Pool
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newPlatform(t testing.TB) *platform {
	t.Helper()
	p := &platform{env: fabrictest.EnvFrom(os.Getenv), schema: "t_" + randHex(4)}
	p.vhost = fabrictest.NewVhost(t, p.env)
	p.identity = deploytest.Service(t, p.vhost, p.env.DatabaseURL, "workflow", p.schema)
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p.keys = keys
	pc, err := pgxpool.ParseConfig(p.env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = p.schema
	if p.pool, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
		t.Fatalf("postgres (run `make infra`): %v", err)
	}
	// Registered first, so it runs after the services stop.
	t.Cleanup(func() {
		_, _ = p.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{p.schema}.Sanitize()+" CASCADE")
		p.pool.Close()
	})
	p.conn = p.vhost.Dial(t)
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	if p.pub, err = broker.NewPublisher(p.conn, reg, broker.PublisherOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.pub.Close() })
	return p
}

// start runs the service on p (several calls share its schema and vhost,
// like several instances) and returns its base URL. It stops the service
// at cleanup and fails the test if run does not return nil.
func (p *platform) start(t testing.TB, extra map[string]string) string {
	t.Helper()
	vars := map[string]string{"JWT_KEYS": p.keys.JWKSPath}
	maps.Copy(vars, p.identity)
	for k, v := range extra {
		vars[k] = v
	}
	url := fabrictest.StartService(t, run, vars).URL
	checkAPI(t, url)
	return url
}

func (p *platform) token(t *testing.T, tenant, sub string, roles ...string) string {
	t.Helper()
	tok, err := p.keys.Mint(auth.Claims{Subject: sub, TenantID: tenant, Roles: roles}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newUUID(t *testing.T) string {
	t.Helper()
	env, err := envelope.New("x.y.v1", "", "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return env.ID
}

// submitted publishes request.submitted.v1 as the request service would.
func (p *platform) submitted(t *testing.T, tenant, citizen, serviceID string) envelope.Envelope {
	t.Helper()
	env, err := envelope.New("request.submitted.v1", tenant, "request-service", map[string]any{
		"requestId": newUUID(t), "protocol": "AGR-2026-000001", "serviceId": serviceID, "formId": "f",
		"formVersion": 1, "channel": "web", "citizenId": citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.publish(t, env)
	return env
}

func (p *platform) publish(t *testing.T, env envelope.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.pub.Publish(ctx, env); err != nil {
		t.Fatalf("publish %s: %v", env.Type, err)
	}
}

func requestIDOf(t *testing.T, env envelope.Envelope) string {
	t.Helper()
	var p struct {
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.RequestID
}

func about(typ, requestID string) func(envelope.Envelope) bool {
	return func(e envelope.Envelope) bool {
		var p struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		return e.Type == typ && p.RequestID == requestID
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func do(t *testing.T, method, url, token string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func expectProblem(t *testing.T, resp response, status int) {
	t.Helper()
	if resp.status != status {
		t.Fatalf("status = %d (%s), want %d", resp.status, resp.body, status)
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	resp.json(t, &p)
	if p.Status != status || p.Title == "" {
		t.Errorf("problem = %s, want status %d and a title", resp.body, status)
	}
}
