package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/workflow/seitest"
)

// composeStack is a running `docker compose` project whose services the
// tests use instead of processes of their own (E2E_TARGET=compose). All
// it needs is read from the containers themselves with `docker inspect`:
// published ports, environment and mounts, so nothing is configured twice.
type composeStack struct {
	project    string
	containers map[string]container // by compose service name
}

// container is the part of `docker inspect` the harness reads.
type container struct {
	Name   string
	Config struct {
		Env []string
	}
	State struct {
		Status string
		Health *struct{ Status string }
	}
	NetworkSettings struct {
		Ports map[string][]struct{ HostIP, HostPort string }
	}
	Mounts []struct{ Source, Destination string }
}

func (c container) env(key string) string {
	for _, kv := range c.Config.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// published returns "127.0.0.1:<host port>" for a container port such as "8081/tcp".
func (c container) published(port string) (string, error) {
	for _, b := range c.NetworkSettings.Ports[port] {
		host := b.HostIP
		if host == "" || host == "0.0.0.0" {
			host = "127.0.0.1"
		}
		if host == "::" {
			continue
		}
		return host + ":" + b.HostPort, nil
	}
	return "", fmt.Errorf("container %s publishes no host port for %s", c.Name, port)
}

// mount returns the host path mounted at dest.
func (c container) mount(dest string) (string, error) {
	for _, m := range c.Mounts {
		if m.Destination == dest {
			return m.Source, nil
		}
	}
	return "", fmt.Errorf("container %s mounts nothing at %s", c.Name, dest)
}

func inspectStack(project string) (*composeStack, error) {
	ids, err := exec.Command("docker", "ps", "-a", "-q", "--filter", "label=com.docker.compose.project="+project).Output()
	if err != nil {
		return nil, fmt.Errorf("docker ps (is the engine running? `make infra`): %w", err)
	}
	list := strings.Fields(string(ids))
	if len(list) == 0 {
		return nil, fmt.Errorf("no containers of compose project %q: run `make compose-up` first", project)
	}
	out, err := exec.Command("docker", append([]string{"inspect"}, list...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("docker inspect: %w", err)
	}
	// Labels live under Config; each entry is decoded twice rather than
	// nesting them into container.
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("docker inspect: %w", err)
	}
	s := &composeStack{project: project, containers: map[string]container{}}
	for _, r := range raw {
		var c container
		var l struct {
			Config struct{ Labels map[string]string }
		}
		if err := json.Unmarshal(r, &c); err != nil {
			return nil, fmt.Errorf("docker inspect: %w", err)
		}
		if err := json.Unmarshal(r, &l); err != nil {
			return nil, fmt.Errorf("docker inspect: %w", err)
		}
		s.containers[l.Config.Labels["com.docker.compose.service"]] = c
	}
	return s, nil
}

func (s *composeStack) get(service string) (container, error) {
	c, ok := s.containers[service]
	if !ok {
		return c, fmt.Errorf("compose project %q has no service %q", s.project, service)
	}
	return c, nil
}

// newComposeHarness points a Harness at the running stack: its MinIO, its
// broker (as the administrator the stack's definitions create), its JWT
// keys and its trace and mail directories.
func newComposeHarness(t testing.TB, getenv func(string) string) *Harness {
	t.Helper()
	get := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	stack, err := inspectStack(get("E2E_COMPOSE_PROJECT", "agora"))
	if err != nil {
		t.Fatalf("harness (E2E_TARGET=compose): %v", err)
	}
	must := func(v string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("harness (E2E_TARGET=compose): %v", err)
		}
		return v
	}
	minio := inspected(t, stack, "minio")
	rabbit := inspected(t, stack, "rabbitmq")
	req := inspected(t, stack, "request")
	h := &Harness{
		Dir:         t.TempDir(),
		S3Endpoint:  must(minio.published("9000/tcp")),
		S3AccessKey: minio.env("MINIO_ROOT_USER"),
		S3SecretKey: minio.env("MINIO_ROOT_PASSWORD"),
		t:           t,
		procs:       map[string]*proc{},
		stack:       stack,
	}
	h.LogsDir = h.Dir
	if dl, err := stack.get("datalake-ingestion"); err == nil {
		h.bucket = dl.env("DATALAKE_BUCKET")
	}
	if h.bucket == "" {
		h.bucket = "datalake" // the service's default
	}
	// Traces: the e2e override (deploy/compose/e2e.yml) mounts one host
	// directory at /traces in every service.
	h.TracesDir = must(req.mount("/traces"))
	// The stack mounts only the public keys; the signing key beside them
	// on the host is what lets the tests mint tokens it accepts.
	keys, err := auth.LoadOrCreateDevKeys(filepath.Dir(must(req.mount("/jwt/jwks.json"))))
	if err != nil {
		t.Fatalf("harness: the stack's JWT keys: %v", err)
	}
	h.Keys = keys
	certs := must(rabbit.mount("/etc/rabbitmq/certs"))
	tlsCfg, err := broker.TLSConfig(filepath.Join(certs, "ca.pem"), "", "")
	if err != nil {
		t.Fatalf("harness: the stack's CA: %v", err)
	}
	user := get("E2E_AMQP_USER", "agora-admin")
	pass := get("E2E_AMQP_PASS", "local-dev-only-agora-admin") // the stack's local-development default
	h.Vhost = &fabrictest.Vhost{
		Name: "agora",
		URL:  (&url.URL{Scheme: "amqps", User: url.UserPassword(user, pass), Host: "localhost:" + port(must(rabbit.published("5671/tcp"))), Path: "/agora"}).String(),
		TLS:  tlsCfg,
	}
	return h
}

func inspected(t testing.TB, s *composeStack, service string) container {
	t.Helper()
	c, err := s.get(service)
	if err != nil {
		t.Fatalf("harness (E2E_TARGET=compose): %v", err)
	}
	return c
}

func port(hostport string) string {
	_, p, _ := strings.Cut(hostport, ":")
	return p
}

// startCompose checks that the stack runs service healthy with the
// settings the test asks for, and records its published URL.
func (h *Harness) startCompose(t testing.TB, sc startConfig) {
	t.Helper()
	if sc.key != sc.name {
		t.Fatalf("harness: E2E_TARGET=compose runs one container per service; %s cannot start a second instance", sc.name)
	}
	c, err := h.stack.get(sc.name)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	for k, want := range sc.env {
		if got := c.env(k); got != want {
			t.Fatalf("harness: the compose stack runs %s with %s=%q; this test needs %q (set it in deploy/compose/e2e.yml)", sc.name, k, got, want)
		}
	}
	addr := c.env("HTTP_ADDR")
	if addr == "" {
		t.Fatalf("harness: container %s has no HTTP_ADDR", c.Name)
	}
	hostport, err := c.published(port(addr) + "/tcp")
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	p := &proc{key: sc.key, url: "http://" + hostport, log: "docker logs " + c.Name, done: make(chan struct{})}
	h.mu.Lock()
	h.procs[sc.key] = p
	h.mu.Unlock()
	if err := waitReady(p, ReadyTimeout); err != nil {
		logs, _ := exec.Command("docker", "logs", "--tail", "60", c.Name).CombinedOutput()
		t.Fatalf("harness: %s not ready: %v\n--- docker logs %s ---\n%s", sc.key, err, c.Name, logs)
	}
}

// MailSink returns where the platform's mails land and the Env that points
// the communication service there: a new SMTP sink process writing to a
// temp dir, or, in compose mode, the stack's mail sink and its maildir.
func (h *Harness) MailSink(t testing.TB) (string, Env) {
	t.Helper()
	if h.stack != nil {
		c, err := h.stack.get("mailsink")
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		dir, err := c.mount("/mail")
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		return dir, Env{}
	}
	dir := t.TempDir()
	return dir, Env{"SMTP_ADDR": StartSMTPSink(t, dir)}
}

// SEI returns the Env that points the workflow service at an SEI gateway:
// a fake of the test's own, or, in compose mode, the stack's stand-in
// (its workflow is configured with it already). Either registers every
// request it is sent.
func (h *Harness) SEI(t testing.TB) Env {
	t.Helper()
	if h.stack != nil {
		return Env{}
	}
	return Env{"SEI_URL": seitest.Start(t).URL}
}

// DatalakeBucket returns the bucket the data lake writes to and the Env
// for it: name itself (the test creates and removes it), or, in compose
// mode, the stack's bucket, which the test must leave in place.
func (h *Harness) DatalakeBucket(name string) (bucket string, env Env, owned bool) {
	if h.stack != nil {
		return h.bucket, Env{}, false
	}
	return name, Env{"DATALAKE_BUCKET": name}, true
}

// StartSMTPSink builds the communication service's SMTP sink and runs it
// as its own process on a free port, writing mails to dir; it returns the
// address it listens on.
func StartSMTPSink(t testing.TB, dir string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "smtpsink")
	build := exec.Command("go", "build", "-o", bin, "./services/communication/cmd/smtpsink")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build smtpsink: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-dir", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("smtpsink did not start: %q %v", line, err)
	}
	return addr
}
