package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/host"
)

// mainHelperEnv makes the test binary, started again by TestMainExitCodes,
// run host.Main instead of the tests: Main exits the process, so it is
// watched from outside. TestMain does the switch, so no test of the normal
// run is skipped for it.
const mainHelperEnv = "HOST_MAIN_HELPER"

func TestMain(m *testing.M) {
	mode := os.Getenv(mainHelperEnv)
	if mode == "" {
		os.Exit(m.Run())
	}
	host.Main("svc", func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		switch mode {
		case "fail":
			return errors.New("broker: refused")
		case "serve":
			fmt.Fprintln(stdout, "serving", getenv(mainHelperEnv))
			<-ctx.Done() // until SIGTERM
			return nil
		}
		return fmt.Errorf("unknown mode %q", mode)
	})
	os.Exit(0) // Main returned: run succeeded
}

func TestMainExitCodes(t *testing.T) {
	tests := []struct {
		mode       string
		terminate  bool
		wantCode   int
		wantStderr string
	}{
		{mode: "fail", wantCode: 1, wantStderr: "svc: broker: refused\n"},
		{mode: "serve", terminate: true, wantCode: 0, wantStderr: ""},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), mainHelperEnv+"="+tt.mode)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			pr, pw := io.Pipe()
			if tt.terminate {
				cmd.Stdout = io.MultiWriter(&stdout, pw)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.terminate {
				// SIGTERM only once run is serving: earlier, Go's default
				// handler would kill the process before Main listens.
				line := make([]byte, len("serving"))
				if _, err := io.ReadFull(pr, line); err != nil {
					t.Fatalf("read the child's first output: %v", err)
				}
				go io.Copy(io.Discard, pr)
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("the child did not exit within 30s; stdout %q", stdout.String())
			}
			pw.Close()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || stderr.String() != tt.wantStderr {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q", code, stderr.String(), tt.wantCode, tt.wantStderr)
			}
			if tt.terminate && !strings.Contains(stdout.String(), "serving "+tt.mode) {
				t.Errorf("stdout %q: run did not get the process's environment", stdout.String())
			}
		})
	}
}
