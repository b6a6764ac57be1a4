package fabrictest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// RunFunc is a service's run function (see STYLE.md: main only calls run).
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// Service is a service started in-process by StartService.
type Service struct {
	// URL is the service's base URL (http://127.0.0.1:<port>).
	URL  string
	logs *logWatch
}

// Logs returns everything the service has logged so far.
func (s *Service) Logs() string { return s.logs.String() }

// StartService runs run with env as its whole environment, on a free port
// (HTTP_ADDR=127.0.0.1:0 and LOG_LEVEL=info are forced: the bound address is
// read from the "service started" log line), waits until /readyz answers 200
// and stops it when the test ends, failing the test if run does not return
// nil within 40 s. The service's log is printed when the test failed.
func StartService(t testing.TB, run RunFunc, env map[string]string) *Service {
	t.Helper()
	vars := map[string]string{}
	for k, v := range env {
		vars[k] = v
	}
	vars["HTTP_ADDR"] = "127.0.0.1:0"
	vars["LOG_LEVEL"] = "info"
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{logs: &logWatch{addr: make(chan string, 1)}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, func(k string) string { return vars[k] }, s.logs) }()
	t.Cleanup(func() {
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
	})
	select {
	case addr := <-s.logs.addr:
		s.URL = "http://" + addr
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("run failed at start (is the infrastructure up? run `make infra`): %v\n%s", err, s.logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("service did not start within 60s\n%s", s.logs)
	}
	Eventually(t, 30*time.Second, "/readyz 200", func() bool {
		resp, err := http.Get(s.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// logWatch collects a service's JSON log and reports the address from its
// "service started" line.
type logWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	addr  chan string
	found bool
}

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.buf.Len()
	l.buf.Write(p)
	if !l.found {
		sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()[start:]))
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "service started" {
				l.found = true
				l.addr <- line.Addr
				break
			}
		}
	}
	return len(p), nil
}

func (l *logWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
