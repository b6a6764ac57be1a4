package fabrictest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runFunc is a service's run function (see STYLE.md: main only calls run).
type runFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// Service is a service started in-process by StartService.
type Service struct {
	// URL is the service's base URL (http://127.0.0.1:<port>).
	URL  string
	logs *logBuffer
}

// Logs returns everything the service has logged so far.
func (s *Service) Logs() string { return s.logs.String() }

// StartService runs run with env as its whole environment on a free port of
// 127.0.0.1 (HTTP_ADDR is forced; LOG_LEVEL is info unless env sets it),
// waits until /readyz answers 200 and stops it when the test ends, failing
// the test if run does not return nil within 40 s. If run returns before
// the service is ready, the test fails at once with run's error and the
// log. The service's log is printed when the test failed.
func StartService(t testing.TB, run runFunc, env map[string]string) *Service {
	t.Helper()
	// The port is free when chosen but not reserved: another process may
	// take it before the service listens. That start is retried on a new
	// port; any other failure is the test's.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		s, err := startService(t, run, env)
		if err == nil {
			return s
		}
		if errors.Is(err, syscall.EADDRINUSE) && attempt < attempts {
			t.Logf("start attempt %d: %v; retrying on another port", attempt, err)
			continue
		}
		t.Fatalf("%v\n%s", err, s.logs)
	}
}

// startService starts run once. It returns the service once /readyz
// answers 200; otherwise an error wrapping run's own when run returned
// first (and nothing is left running), or a timeout (and the test's
// cleanup stops the service).
func startService(t testing.TB, run runFunc, env map[string]string) (*Service, error) {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		return &Service{logs: &logBuffer{}}, err
	}
	vars := map[string]string{"LOG_LEVEL": "info"}
	for k, v := range env {
		vars[k] = v
	}
	vars["HTTP_ADDR"] = addr
	s := &Service{URL: "http://" + addr, logs: &logBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return vars[k] }, s.logs) }()

	if err := s.waitReady(done, 60*time.Second); err != nil {
		select {
		case <-done: // run has returned: nothing to stop
			cancel()
		default:
			t.Cleanup(func() { stop(t, s, cancel, done) })
		}
		return s, err
	}
	t.Cleanup(func() { stop(t, s, cancel, done) })
	return s, nil
}

// waitReady polls /readyz until it answers 200, run returns, or timeout
// passes. A run that returned is reported at once, with its error, and
// its result is put back for whoever reads done next.
func (s *Service) waitReady(done chan error, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			done <- err
			if err == nil {
				return errors.New("run returned nil before the service was ready")
			}
			return fmt.Errorf("run returned before the service was ready (is the infrastructure up? run `make infra`): %w", err)
		case <-tick.C:
		}
		resp, err := client.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service at %s not ready within %s (last: %v)", s.URL, timeout, describe(resp, err))
		}
	}
}

// stop cancels run and waits for it to return.
func stop(t testing.TB, s *Service, cancel context.CancelFunc, done chan error) {
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Errorf("run did not return within 40s of cancellation")
	}
	if t.Failed() {
		t.Logf("service log:\n%s", s.logs)
	}
}

// freeAddr returns a 127.0.0.1 address with a port nobody listened on a
// moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}

func describe(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// logBuffer is a log a service (or any code under test) writes while the
// test reads it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
