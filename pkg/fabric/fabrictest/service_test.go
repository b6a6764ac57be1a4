package fabrictest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// recorder is a testing.TB whose failures are recorded instead of ending
// the real test, so StartService's own failures can be asserted.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(string, ...any) {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal != "" || len(r.errs) > 0
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// start runs StartService the way a test goroutine would, so a Fatalf
// (runtime.Goexit) ends only that goroutine.
func start(r *recorder, run runFunc, env map[string]string) *Service {
	var s *Service
	done := make(chan struct{})
	go func() {
		defer close(done)
		s = StartService(r, run, env)
	}()
	<-done
	return s
}

// serve is a run function that answers /readyz on HTTP_ADDR until ctx ends.
func serve(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", getenv("HTTP_ADDR"))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintln(stdout, `{"msg":"listening","level":"`+getenv("LOG_LEVEL")+`"}`)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, r)
	})}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func TestStartService(t *testing.T) {
	var calls atomic.Int32
	tests := []struct {
		name      string
		run       runFunc
		env       map[string]string
		wantFatal string // empty: the service must start
		wantLog   string
	}{
		{
			name: "ready on the chosen port",
			run:  serve,
			// A caller's HTTP_ADDR is overridden; its LOG_LEVEL is kept.
			env:     map[string]string{"HTTP_ADDR": "127.0.0.1:1", "LOG_LEVEL": "debug"},
			wantLog: `"level":"debug"`,
		},
		{
			name: "run fails at start",
			run: func(ctx context.Context, _ []string, _ func(string) string, stdout io.Writer) error {
				fmt.Fprintln(stdout, "connecting to the broker")
				return errors.New("broker: connection refused")
			},
			wantFatal: "broker: connection refused",
			wantLog:   "connecting to the broker",
		},
		{
			name: "run returns nil before ready",
			run: func(context.Context, []string, func(string) string, io.Writer) error {
				return nil
			},
			wantFatal: "run returned nil before the service was ready",
		},
		{
			name: "port taken before the service listened",
			run: func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
				if calls.Add(1) == 1 {
					return fmt.Errorf("listen %s: %w", getenv("HTTP_ADDR"), syscall.EADDRINUSE)
				}
				return serve(ctx, args, getenv, stdout)
			},
			wantLog: `"level":"info"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			began := time.Now()
			s := start(r, tt.run, tt.env)
			if tt.wantFatal != "" {
				if !strings.Contains(r.fatal, tt.wantFatal) || !strings.Contains(r.fatal, tt.wantLog) {
					t.Errorf("Fatalf(%q), want it to name %q and carry the log %q", r.fatal, tt.wantFatal, tt.wantLog)
				}
				if took := time.Since(began); took > 5*time.Second {
					t.Errorf("a run that returned took %s to be reported, want at once", took)
				}
				r.cleanup()
				return
			}
			if r.fatal != "" {
				t.Fatalf("StartService failed: %s", r.fatal)
			}
			if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || strings.HasSuffix(s.URL, ":1") {
				t.Errorf("URL %q, want a free port of 127.0.0.1", s.URL)
			}
			resp, err := http.Get(s.URL + "/readyz")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /readyz after StartService: %v %v", resp, err)
			}
			resp.Body.Close()
			if !strings.Contains(s.Logs(), tt.wantLog) {
				t.Errorf("log %q, want %q", s.Logs(), tt.wantLog)
			}
			r.cleanup()
			if len(r.errs) > 0 {
				t.Errorf("stopping the service: %q", r.errs)
			}
			if _, err := http.Get(s.URL + "/readyz"); err == nil {
				t.Errorf("the service still answers after the test's cleanup")
			}
		})
	}
}
