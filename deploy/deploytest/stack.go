package deploytest

import (
	"bytes"
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

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Stack is the one test stack of every service's end-to-end tests: a fresh
// vhost on the real broker and a fresh schema in the real PostgreSQL, the
// service's own broker user and database roles in them (Service), JWT
// development keys, and an administrator's view of both (a pool whose
// search_path is the schema, a broker connection and a publisher), so a
// test can act as another service and look behind the API. Start runs the
// service itself; run it several times for competing instances.
type Stack struct {
	Service string
	Env     fabrictest.Env
	Vhost   *fabrictest.Vhost
	Schema  string
	// Vars is the environment every Start gets: the service's identity
	// (AMQP_URL, DATABASE_URL, …), JWT_KEYS and the S3_* of the machine's
	// object store (S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, from the
	// test's environment or the local defaults).
	Vars map[string]string
	Pool *pgxpool.Pool // administrator, search_path = Schema
	Conn *broker.Conn  // administrator, in Vhost
	Pub  *broker.Publisher
	Keys *auth.DevKeys
}

// NewStack provisions a stack for service. Everything it creates is removed
// when the test ends, after the instances Start ran have stopped.
func NewStack(t testing.TB, service string) *Stack {
	t.Helper()
	env := fabrictest.EnvFrom(os.Getenv)
	s := &Stack{Service: service, Env: env, Schema: Unique("t_")}
	s.Vhost = fabrictest.NewVhost(t, env)
	s.Vars = Service(t, s.Vhost, env.DatabaseURL, service, s.Schema)
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Keys = keys
	s.Vars["JWT_KEYS"] = keys.JWKSPath
	for k, def := range map[string]string{"S3_ENDPOINT": "127.0.0.1:9000", "S3_ACCESS_KEY": "agora-dev", "S3_SECRET_KEY": "agora-dev-secret"} {
		s.Vars[k] = def
		if v := os.Getenv(k); v != "" {
			s.Vars[k] = v
		}
	}
	pc, err := pgxpool.ParseConfig(env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = s.Schema
	if s.Pool, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
		t.Fatalf("postgres (run `make infra`): %v", err)
	}
	// Cleanups run last-in first-out: registered before any Start, the
	// schema goes after every instance has stopped.
	t.Cleanup(func() {
		_, _ = s.Pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.Schema}.Sanitize()+" CASCADE")
		s.Pool.Close()
	})
	s.Conn = s.Vhost.Dial(t)
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	if s.Pub, err = broker.NewPublisher(s.Conn, reg, broker.PublisherOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Pub.Close() })
	return s
}

// exchanges checks every HTTP exchange of a test binary with the instances
// its Stacks started against the OpenAPI document of the instance that
// answered. Main installs it as http.DefaultTransport, process-wide as
// that is.
var exchanges = openapitest.NewTransport(nil)

// Main runs a service's end-to-end tests; call it from TestMain. An
// answer from an instance a Stack started that its OpenAPI document does
// not describe fails the call that got it, and the test binary. With
// serve, the binary is also the service a Stack's Spawn starts: run that
// way, Main runs serve and exits with its code instead of the tests.
func Main(m *testing.M, serve ...func() int) {
	if os.Getenv(childVar) == "1" && len(serve) > 0 {
		os.Exit(serve[0]())
	}
	os.Exit(exchanges.Run(m))
}

// Start runs one instance of the service (run is its main's run) with Vars
// and extra, waits until it is ready and stops it when the test ends (see
// fabrictest.StartService); under Main, every exchange with it is checked
// against the document it serves.
func (s *Stack) Start(t testing.TB, run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error, extra map[string]string) *fabrictest.Service {
	t.Helper()
	vars := maps.Clone(s.Vars)
	maps.Copy(vars, extra)
	svc := fabrictest.StartService(t, run, vars)
	if err := exchanges.AddService(context.Background(), svc.URL); err != nil {
		t.Fatal(err)
	}
	// Before the instance stops (cleanups run last-in first-out): its
	// port is free again afterwards, and whatever listens there next has
	// another contract.
	t.Cleanup(func() { exchanges.Remove(svc.URL) })
	return svc
}

// Token mints a token of tenant for subject with roles, valid for an hour.
func (s *Stack) Token(t testing.TB, tenant, subject string, roles ...string) string {
	t.Helper()
	tok, err := s.Keys.Mint(auth.Claims{Subject: subject, TenantID: tenant, Roles: roles}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Publish publishes env with confirmation, as the administrator.
func (s *Stack) Publish(t testing.TB, env envelope.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Pub.Publish(ctx, env); err != nil {
		t.Fatalf("publish %s: %v", env.Type, err)
	}
}

// AboutRequest matches the events of type typ about request requestID
// (their payload's requestId), for an observer's Next, WaitFor and
// Matching: the request is what the request service's and the workflow
// service's events are about.
func AboutRequest(typ, requestID string) func(envelope.Envelope) bool {
	return func(e envelope.Envelope) bool {
		var p struct {
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		return e.Type == typ && p.RequestID == requestID
	}
}

// NewID returns a fresh id of the form the platform's envelopes carry
// (a UUIDv7): a request, task or document no other test names.
func NewID(t testing.TB) string {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// Response is an HTTP answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test if it is not JSON.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// ExpectProblem fails the test unless resp has the given status and is an
// RFC 9457 problem (its media type, a matching status member, a title).
func ExpectProblem(t testing.TB, resp Response, status int) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status = %d (%s), want %d", resp.Status, resp.Body, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	resp.JSON(t, &p)
	if p.Status != status || p.Title == "" {
		t.Errorf("problem = %s, want status %d and a title", resp.Body, status)
	}
}

// Do sends a request to url with a bearer token (none when empty) and the
// given headers. A body that is not an io.Reader or nil is sent as JSON.
func Do(t testing.TB, method, url, token string, body any, header map[string]string) Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r = b
	case string:
		r = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
		if header == nil {
			header = map[string]string{}
		}
		if _, ok := header["Content-Type"]; !ok {
			header["Content-Type"] = "application/json"
		}
	}
	req, err := http.NewRequest(method, url, r)
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
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// Unique returns prefix followed by eight random hex digits: a tenant, a
// bucket or a role no other test run uses.
func Unique(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return prefix + hex.EncodeToString(b)
}

// CheckOpenAPI checks that the instance at url serves at /openapi.json doc,
// the service's own OpenAPI document, merged with the host's routes for the
// service's queues (as the catalog declares them), and that every
// operation of it is served.
func (s *Stack) CheckOpenAPI(t testing.TB, url string, doc []byte) {
	t.Helper()
	var queues []string
	for _, c := range topology.Platform().ConsumersOf(s.Service) {
		queues = append(queues, c.Queue)
	}
	if err := openapitest.CheckServed(context.Background(), http.DefaultClient, url, doc, openapi.Host{Queues: queues, Ops: true}); err != nil {
		t.Error(err)
	}
}
