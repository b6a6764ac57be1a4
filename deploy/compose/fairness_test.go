package compose_test

import (
	"os"
	"strings"
	"testing"
)

// TestComposeStartsServicesWithTheFairnessDefaults: every platform service
// gets the publish limits of deploy/local/fairness.env, the file `make up`
// reads too (up.sh), so the single-machine deployments set each value in
// one place and neither runs without them.
func TestComposeStartsServicesWithTheFairnessDefaults(t *testing.T) {
	data, err := os.ReadFile("../local/fairness.env")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || v == "" || strings.ContainsAny(line, " \"'") {
			t.Fatalf("fairness.env: %q is not KEY=VALUE without spaces or quotes (up.sh reads it bash-style)", line)
		}
		want[k] = v
	}
	for _, k := range []string{"PUBLISH_RATE_PER_TYPE", "PUBLISH_RATE_PER_PRODUCER"} {
		if want[k] == "" {
			t.Errorf("fairness.env sets no %s", k)
		}
	}
	p := load(t)
	for _, name := range platformServices {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got := s.Environment[k]; got == nil || *got != v {
				t.Errorf("%s: %s = %v, want %q from fairness.env", name, k, got, v)
			}
		}
	}
	up, err := os.ReadFile("../local/up.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(up), `done <"$SCRIPT_DIR/fairness.env"`) || !strings.Contains(string(up), "< <(fairness_env)") {
		t.Error("deploy/local/up.sh does not start the services with fairness.env")
	}
}
