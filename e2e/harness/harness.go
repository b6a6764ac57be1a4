// Package harness runs the platform's real service binaries for black-box
// end-to-end tests. Each test gets its own Postgres database, its own
// RabbitMQ vhost, its own dev JWT keys and trace files, so e2e tests run
// beside each other and beside `make up` without sharing state.
//
//	func TestMain(m *testing.M) { harness.Main(m, os.Getenv) }
//
//	func TestSubmit(t *testing.T) {
//		h := harness.New(t, getenv) // getenv: the test process environment lookup
//		h.Start(t, "request")
//		tok := h.Token("org-a", "citizen-1", "citizen")
//		resp := post(h.URL("request")+"/v1/requests", tok, body)
//		...
//		spans := harness.Spans(t, h.TracesDir)
//	}
//
// The infrastructure (RabbitMQ with management, PostgreSQL with pgvector,
// MinIO) must be running: `make infra`. Missing infrastructure fails the
// test; it is never skipped. With E2E_INFRA=containers, Main starts it in
// containers instead (package testinfra) and removes them at the end.
//
// With E2E_TARGET=compose the same tests run against the containers of a
// running `docker compose` stack instead (`make compose-test`): Start
// checks the container is healthy and configured as the test needs, and
// URL returns its published port.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/deploy/postgres"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// ReadyTimeout bounds how long Start waits for a service's /readyz.
const ReadyTimeout = 60 * time.Second

// StopTimeout bounds how long Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 30 * time.Second

// Option changes how Start runs one service.
type Option interface{ apply(*startConfig) }

// Env is extra environment for one service, applied after the harness's
// own variables (so it can override them), e.g. harness.Env{"SMTP_ADDR": addr}.
type Env map[string]string

func (e Env) apply(c *startConfig) {
	for k, v := range e {
		c.env[k] = v
	}
}

// Instance starts a further copy of a service under the key "<name>-<id>"
// (e.g. two competing document-worker processes); URL and Stop take that key.
type Instance string

func (i Instance) apply(c *startConfig) { c.key = c.name + "-" + string(i) }

type startConfig struct {
	name, key string
	env       map[string]string
}

// Harness is one test's private platform.
type Harness struct {
	// Dir is the test's temp dir: keys/, logs/, traces/.
	Dir string
	// TracesDir holds one OTEL_TRACES_FILE per service (<key>.jsonl); read it with Spans.
	TracesDir string
	// LogsDir holds one log file per service (<key>.log).
	LogsDir string
	// DatabaseURL points at the test's own database (superuser: RLS is
	// bypassed). The services run as their own roles in it (deploytest).
	DatabaseURL string
	// Vhost is the test's RabbitMQ vhost (management API via Vhost.Mgmt).
	Vhost *fabrictest.Vhost
	// Keys mints tokens the services accept (their JWT_KEYS is Keys.JWKSPath).
	Keys *auth.DevKeys
	// S3 is the MinIO the services use.
	S3Endpoint, S3AccessKey, S3SecretKey string

	t     testing.TB
	mu    sync.Mutex
	procs map[string]*proc

	// roles and users: each service runs as its own database role and
	// broker user, with production's grants (processes target only).
	roles *deploytest.Database
	users *deploytest.Broker

	stack  *composeStack // E2E_TARGET=compose
	bucket string        // the stack's data lake bucket
}

// Compose reports whether the tests run against a compose stack.
func (h *Harness) Compose() bool { return h.stack != nil }

// RequireProcesses fails t at once against a compose stack: the test
// starts services with settings of its own, which a running stack cannot
// take. It fails rather than skips, so a run that cannot test it says so.
func (h *Harness) RequireProcesses(t testing.TB) {
	t.Helper()
	if h.Compose() {
		t.Fatalf("%s starts services with its own settings: run it with E2E_TARGET=processes (the compose test runs TestRequestFlow and TestDocumentFlow)", t.Name())
	}
}

type proc struct {
	key  string
	cmd  *exec.Cmd
	url  string
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// New creates the test's database (with the vector extension), vhost, dev
// keys and directories; everything is removed when the test ends, after
// its services are stopped.
//
// getenv (the test process environment) locates the infrastructure: AMQP_HOST,
// RABBITMQ_MGMT_URL, DATABASE_URL, S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY.
func New(t testing.TB, getenv func(string) string) *Harness {
	t.Helper()
	switch target := getenv("E2E_TARGET"); target {
	case "", "processes":
	case "compose":
		return newComposeHarness(t, getenv)
	default:
		t.Fatalf("harness: E2E_TARGET=%q: want processes (the default) or compose", target)
	}
	env := fabrictest.EnvFrom(getenv)
	get := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	dir := t.TempDir()
	h := &Harness{
		Dir:         dir,
		TracesDir:   filepath.Join(dir, "traces"),
		LogsDir:     filepath.Join(dir, "logs"),
		S3Endpoint:  get("S3_ENDPOINT", "127.0.0.1:9000"),
		S3AccessKey: get("S3_ACCESS_KEY", "agora-dev"),        // local-development default
		S3SecretKey: get("S3_SECRET_KEY", "agora-dev-secret"), // local-development default
		t:           t,
		procs:       map[string]*proc{},
	}
	for _, d := range []string{h.TracesDir, h.LogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.DatabaseURL = newDatabase(t, env.DatabaseURL)
	h.Vhost = fabrictest.NewVhost(t, env)
	h.roles = deploytest.NewDatabase(t, h.DatabaseURL)
	h.users = deploytest.NewBroker(t, h.Vhost)
	keys, err := auth.LoadOrCreateDevKeys(filepath.Join(dir, "keys"))
	if err != nil {
		t.Fatalf("dev keys: %v", err)
	}
	h.Keys = keys
	// Registered last, so it runs first: services stop before their
	// database and vhost disappear.
	t.Cleanup(func() {
		if t.Failed() {
			h.dumpLogs()
		}
		h.stopAll()
	})
	return h
}

// newDatabase creates agora_e2e_<rand> with pgvector and returns its URL;
// it is dropped (WITH FORCE) at cleanup.
func newDatabase(t testing.TB, adminURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("postgres at %s (is it running? run `make infra`): %v", adminURL, err)
	}
	defer admin.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agora_e2e_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	dbURL := u.String()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		t.Fatalf("pgvector in %s (run `make infra`): %v", name, err)
	}
	return dbURL
}

// Start builds services/<name>/cmd/<name> (once per test binary), runs it on
// a free port with the test's database, vhost, MinIO, JWT keys and trace
// file, and waits until its /readyz answers 200. It fails t with the log
// tail if the build fails, the process exits or readiness times out.
func (h *Harness) Start(t testing.TB, name string, opts ...Option) {
	t.Helper()
	sc := startConfig{name: name, key: name, env: map[string]string{}}
	for _, o := range opts {
		o.apply(&sc)
	}
	h.mu.Lock()
	_, running := h.procs[sc.key]
	h.mu.Unlock()
	if running {
		t.Fatalf("harness: %s is already running", sc.key)
	}
	if h.stack != nil {
		h.startCompose(t, sc)
		return
	}
	bin, err := build(name)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("harness: free port: %v", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	schema := postgres.SchemaOf(name)
	env := map[string]string{
		"AMQP_URL":             h.users.URL(name),
		"DATABASE_URL":         h.roles.URL(schema),
		"DATABASE_MIGRATE_URL": h.roles.OwnerURL(schema),
		"S3_ENDPOINT":          h.S3Endpoint,
		"S3_ACCESS_KEY":        h.S3AccessKey,
		"S3_SECRET_KEY":        h.S3SecretKey,
		"HTTP_ADDR":            addr,
		"JWT_KEYS":             h.Keys.JWKSPath,
		"JWT_ISSUER":           auth.DevIssuer,
		"OTEL_TRACES_FILE":     filepath.Join(h.TracesDir, sc.key+".jsonl"),
	}
	if name == "datalake-ingestion" {
		// It refuses to start without the key it seals RESTRICTED fields under.
		env["DATALAKE_SEAL_KEY"] = testSealKey
	}
	for k, v := range sc.env {
		env[k] = v
	}
	logPath := filepath.Join(h.LogsDir, sc.key+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	cmd := exec.Command(bin)
	cmd.Env = mergeEnv(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: a Ctrl-C on the test does not hit the services
	// before the harness stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("harness: start %s: %v", sc.key, err)
	}
	p := &proc{key: sc.key, cmd: cmd, url: "http://" + addr, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	h.mu.Lock()
	h.procs[sc.key] = p
	h.mu.Unlock()
	if err := waitReady(p, ReadyTimeout); err != nil {
		t.Fatalf("harness: %s not ready: %v\n--- %s (last lines) ---\n%s", sc.key, err, logPath, tail(logPath, 60))
	}
}

// testSealKey is the data lake's DATALAKE_SEAL_KEY in the suites: the
// standard base64 of "e2e-throwaway-datalake-seal-key!", a test value only.
const testSealKey = "ZTJlLXRocm93YXdheS1kYXRhbGFrZS1zZWFsLWtleSE="

// mergeEnv returns base with the keys of over replaced.
func mergeEnv(base []string, over map[string]string) []string {
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok && k != "DATABASE_SCHEMA" {
			out = append(out, kv)
		}
	}
	for k, v := range over {
		out = append(out, k+"="+v)
	}
	return out
}

func waitReady(p *proc, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("process exited: %v", p.err)
		default:
		}
		resp, err := client.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not 200 after %s (last error: %v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL returns the base URL of a running service ("http://127.0.0.1:<port>").
func (h *Harness) URL(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.procs[key]
	if !ok {
		h.t.Fatalf("harness: %s was not started", key)
	}
	return p.url
}

// Stop sends SIGTERM to the service and waits for it to exit (SIGKILL
// after StopTimeout). A non-zero exit fails the test: graceful shutdown is
// part of the contract. In compose mode the stack's containers keep running.
func (h *Harness) Stop(key string) {
	h.mu.Lock()
	p, ok := h.procs[key]
	delete(h.procs, key)
	h.mu.Unlock()
	if !ok || p.cmd == nil {
		return // never started, or a container the stack owns
	}
	if err := stop(p); err != nil {
		h.t.Errorf("harness: stop %s: %v\n--- %s (last lines) ---\n%s", key, err, p.log, tail(p.log, 40))
	}
}

// Kill sends SIGKILL to the service, a crash with no shutdown of its own,
// and waits for it to exit; Start can then run it again under the same
// key (a new port: take URL again). Nothing happens for a container of a
// compose stack.
func (h *Harness) Kill(key string) {
	h.mu.Lock()
	p, ok := h.procs[key]
	if ok && p.cmd != nil {
		delete(h.procs, key)
	}
	h.mu.Unlock()
	if !ok || p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func stop(p *proc) error {
	select {
	case <-p.done:
		return fmt.Errorf("had already exited: %v", p.err)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(StopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("did not stop within %s of SIGTERM; killed", StopTimeout)
	}
}

func (h *Harness) stopAll() {
	h.mu.Lock()
	keys := make([]string, 0, len(h.procs))
	for k := range h.procs {
		keys = append(keys, k)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); h.Stop(k) }()
	}
	wg.Wait()
}

func (h *Harness) dumpLogs() {
	entries, _ := os.ReadDir(h.LogsDir)
	for _, e := range entries {
		p := filepath.Join(h.LogsDir, e.Name())
		h.t.Logf("--- %s (last lines) ---\n%s", p, tail(p, 80))
	}
}

// Token mints a one-hour bearer token for sub in tenant with roles.
func (h *Harness) Token(tenant, sub string, roles ...string) string {
	tok, err := h.Keys.Mint(auth.Claims{Subject: sub, TenantID: tenant, Roles: roles}, time.Hour)
	if err != nil {
		h.t.Fatalf("harness: mint token: %v", err)
	}
	return tok
}

// freePort asks the kernel for a free port. Another process may take it
// before the service binds; the service then exits and Start reports it.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Binaries are built once per test binary into one directory that Main
// removes at the end.
var builds = struct {
	sync.Mutex
	dir  string
	bins map[string]*buildResult
}{bins: map[string]*buildResult{}}

type buildResult struct {
	once sync.Once
	path string
	err  error
}

func build(name string) (string, error) {
	builds.Lock()
	if builds.dir == "" {
		d, err := os.MkdirTemp("", "agora-e2e-bin-")
		if err != nil {
			builds.Unlock()
			return "", err
		}
		builds.dir = d
	}
	r, ok := builds.bins[name]
	if !ok {
		r = &buildResult{}
		builds.bins[name] = r
	}
	dir := builds.dir
	builds.Unlock()
	r.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			r.err = err
			return
		}
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, "./services/"+name+"/cmd/"+name)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			r.err = fmt.Errorf("go build ./services/%s/cmd/%s: %v\n%s", name, name, err, msg)
			return
		}
		r.path = out
	})
	return r.path, r.err
}

// RepoRoot returns the directory of the go.work in use (`go env GOWORK`).
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	p := string(bytes.TrimSpace(out))
	if p == "" || p == "off" {
		return "", errors.New("no go.work in use: run the e2e tests from inside the repository")
	}
	return filepath.Dir(p), nil
}

// Main runs the tests and then removes the binaries Start built. Use it
// from TestMain; without it the binaries stay in the OS temp dir.
//
// With E2E_INFRA=containers it first starts the infrastructure as
// containers (containers.go) and removes them after the tests; unset, the
// tests use the machine's services. getenv is the test process's
// environment (os.Getenv).
func Main(m *testing.M, getenv func(string) string) { os.Exit(run(m, getenv)) }

func run(m *testing.M, getenv func(string) string) int {
	stop, err := infra(getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	defer stop()
	code := m.Run()
	builds.Lock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	builds.Unlock()
	return code
}
