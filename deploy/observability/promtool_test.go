package observability_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolErr  error
)

// promtool returns the promtool binary at the version the Makefile pins
// (PROMTOOL_VERSION), from $(go env GOPATH)/bin where `make promtool` installs it,
// or else from PATH. It fails the test, never skips it: rules nobody ran through
// promtool are not known to parse, let alone to fire.
func promtool(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() { promtoolPath, promtoolErr = findPromtool() })
	if promtoolErr != nil {
		t.Fatalf("promtool is required to check the alert rules: %v\nrun `make promtool` at the repository root", promtoolErr)
	}
	return promtoolPath
}

func findPromtool() (string, error) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		return "", fmt.Errorf("read the Makefile for PROMTOOL_VERSION: %w", err)
	}
	m := regexp.MustCompile(`(?m)^PROMTOOL_VERSION\s*[:?]?=\s*(\S+)`).FindSubmatch(mk)
	if m == nil {
		return "", fmt.Errorf("the Makefile sets no PROMTOOL_VERSION")
	}
	version := string(m[1])
	var candidates []string
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath := strings.Split(strings.TrimSpace(string(out)), string(os.PathListSeparator))[0]
		candidates = append(candidates, filepath.Join(gopath, "bin", "promtool"))
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		candidates = append(candidates, p)
	}
	var found []string
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		// `go install …@version` records the module version in the binary.
		out, err := exec.Command("go", "version", "-m", p).Output()
		if err != nil {
			found = append(found, p+" (no Go build information)")
			continue
		}
		if regexp.MustCompile(`(?m)^\s*mod\s+github\.com/prometheus/prometheus\s+` + regexp.QuoteMeta(version) + `\s`).Match(out) {
			return p, nil
		}
		found = append(found, p+" (another version)")
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no promtool in $(go env GOPATH)/bin or PATH")
	}
	return "", fmt.Errorf("no promtool of github.com/prometheus/prometheus %s: found %s", version, strings.Join(found, ", "))
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// The rule file and the chart's copy of it are valid Prometheus rules.
func TestPromtoolCheckRules(t *testing.T) {
	runPromtool(t, "check", "rules", "alerts.yml", "../helm/agora/files/alerts.yml")
}

// Every alert fires when it should and stays quiet when it should not
// (alerts_test.yml, on series shaped like the services' and RabbitMQ's).
func TestPromtoolTestRules(t *testing.T) {
	runPromtool(t, "test", "rules", "alerts_test.yml")
}
