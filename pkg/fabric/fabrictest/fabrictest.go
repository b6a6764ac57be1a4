// Package fabrictest gives integration tests an isolated corner of the real
// broker: a fresh vhost per test, the management API to inspect it, and a
// way to drop its connections. Tests fail loudly when the broker or its
// management plugin is missing (run `make infra`).
package fabrictest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/broker"
)

// Env locates the test infrastructure.
type Env struct {
	AMQPHost    string // host:port of AMQP
	MgmtURL     string // management API base, e.g. http://127.0.0.1:15672
	User, Pass  string
	DatabaseURL string
	// Ctl is the rabbitmqctl command of the broker, split on spaces: the
	// machine's rabbitmqctl, or e.g. `docker exec <container> rabbitmqctl`.
	Ctl string
}

// EnvFrom reads AMQP_HOST, RABBITMQ_MGMT_URL, RABBITMQ_USER, RABBITMQ_PASS,
// DATABASE_URL and RABBITMQCTL through getenv, with the local defaults.
func EnvFrom(getenv func(string) string) Env {
	get := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	return Env{
		AMQPHost:    get("AMQP_HOST", "127.0.0.1:5672"),
		MgmtURL:     get("RABBITMQ_MGMT_URL", "http://127.0.0.1:15672"),
		User:        get("RABBITMQ_USER", "guest"),
		Pass:        get("RABBITMQ_PASS", "guest"),
		DatabaseURL: get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		Ctl:         get("RABBITMQCTL", "rabbitmqctl"),
	}
}

// Vhost is a throwaway virtual host.
type Vhost struct {
	Env  Env
	Name string
	URL  string // amqp URL into the vhost
	// TLS is used by Dial for amqps URLs (a broker in a container that
	// listens on TLS only); nil for the machine's plain listener.
	TLS *tls.Config
}

// NewVhost creates a vhost named after the test, grants the test user all
// permissions in it and deletes it when the test ends.
func NewVhost(t testing.TB, env Env) *Vhost {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "test-" + strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())) + "-" + hex.EncodeToString(b[:])
	v := &Vhost{Env: env, Name: name,
		URL: fmt.Sprintf("amqp://%s:%s@%s/%s", env.User, env.Pass, env.AMQPHost, url.PathEscape(name))}
	v.mgmt(t, http.MethodPut, "/api/vhosts/"+url.PathEscape(name), nil, nil)
	v.mgmt(t, http.MethodPut, "/api/permissions/"+url.PathEscape(name)+"/"+url.PathEscape(env.User),
		map[string]string{"configure": ".*", "write": ".*", "read": ".*"}, nil)
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.MgmtURL+"/api/vhosts/"+url.PathEscape(name), nil)
		req.SetBasicAuth(env.User, env.Pass)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	return v
}

func (v *Vhost) mgmt(t testing.TB, method, path string, body, out any) {
	t.Helper()
	if err := v.Mgmt(method, path, body, out); err != nil {
		t.Fatalf("RabbitMQ management API (is the management plugin enabled? run `make infra`): %v", err)
	}
}

// Mgmt calls the management API.
func (v *Vhost) Mgmt(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, v.Env.MgmtURL+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(v.Env.User, v.Env.Pass)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// queueInfo is the part of the management API's queue object tests use.
type queueInfo struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Durable   bool           `json:"durable"`
	Arguments map[string]any `json:"arguments"`
	Messages  int            `json:"messages"`
}

// Queues lists the vhost's queues.
func (v *Vhost) Queues(t testing.TB) map[string]queueInfo {
	t.Helper()
	var qs []queueInfo
	v.mgmt(t, http.MethodGet, "/api/queues/"+url.PathEscape(v.Name), nil, &qs)
	out := map[string]queueInfo{}
	for _, q := range qs {
		out[q.Name] = q
	}
	return out
}

// CloseConnections runs `rabbitmqctl close_all_connections` (Env.Ctl) for
// the vhost alone (other tests' connections stay up) and returns how many it
// closed.
func (v *Vhost) CloseConnections(t testing.TB) int {
	t.Helper()
	ctl := strings.Fields(v.Env.Ctl)
	if len(ctl) == 0 {
		ctl = []string{"rabbitmqctl"}
	}
	out, err := exec.Command(ctl[0], append(ctl[1:], "close_all_connections", "--vhost", v.Name, "fabrictest: simulated connection loss")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s close_all_connections: %v: %s", strings.Join(ctl, " "), err, out)
	}
	var n int
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(line, "Closed %d connections", &n); err == nil {
			return n
		}
	}
	return 0
}

// Dial opens a supervised connection into the vhost, closed at cleanup.
func (v *Vhost) Dial(t testing.TB, hooks ...broker.Hook) *broker.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := broker.Dial(ctx, v.URL, broker.Options{Name: t.Name(), TLS: v.TLS, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}, hooks...)
	if err != nil {
		t.Fatalf("dial %s (is RabbitMQ running? run `make infra`): %v", v.URL, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Eventually polls cond every 20 ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
