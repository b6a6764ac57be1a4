package deploytest

import (
	"bytes"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// childVar marks a test binary that Spawn started to be the service.
const childVar = "DEPLOYTEST_CHILD"

// Child is one instance of the service in a process of its own: the test
// binary again, which Main turns into the service (Spawn). A test can kill
// it, or let a fault point end it, for real: no deferred cleanup, no ack,
// no rollback but the ones the database and the broker do for a client
// that is gone.
type Child struct {
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	logs   bytes.Buffer
}

func (c *Child) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs.Write(b)
}

// Spawn starts the service as a Child with the stack's Vars and extra and
// a free HTTP_ADDR, and waits until it is ready; the test binary's
// TestMain must call Main with the service's serve function. The child is
// killed at cleanup if still alive, and its log shown if the test failed.
func (s *Stack) Spawn(t testing.TB, extra map[string]string) *Child {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	vars := map[string]string{"HTTP_ADDR": addr, "LOG_LEVEL": "info", childVar: "1"}
	maps.Copy(vars, s.Vars)
	maps.Copy(vars, extra)
	c := &Child{URL: "http://" + addr, exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = os.Environ()
	for k, v := range vars {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.Stdout, c.cmd.Stderr = c, c
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			c.mu.Lock()
			t.Logf("child %s log:\n%s", addr, c.logs.String())
			c.mu.Unlock()
		}
	})
	fabrictest.Eventually(t, 60*time.Second, "the child service ready", func() bool {
		select {
		case <-c.exited:
			t.Fatalf("the child exited before it was ready: %s", c.cmd.ProcessState)
		default:
		}
		resp, err := http.Get(c.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return c
}

// Kill ends the child with SIGKILL and waits until it is gone.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.exited
}

// Exited waits up to timeout for the child to end by itself (a fault
// point) and returns its exit code.
func (c *Child) Exited(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		t.Fatalf("the child did not end within %v", timeout)
	}
	return c.cmd.ProcessState.ExitCode()
}
