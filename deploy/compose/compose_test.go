// Package compose_test validates docker-compose.yml without a Docker engine:
// the compose-go loader (the library docker compose itself uses) parses it,
// checks it against the Compose Specification schema and resolves anchors,
// profiles and depends_on; the assertions below check the platform's rules.
package compose_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/agora-platform/agora/deploy/acl"
)

var platformServices = []string{"request", "workflow", "communication", "document-worker", "ai-builder", "datalake-ingestion", "analytics"}

func load(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	return loadWith(t, "", profiles...)
}

// loadWith loads the file with the variables of envFile (none when empty), as
// `docker compose --env-file envFile` does.
func loadWith(t *testing.T, envFile string, profiles ...string) *types.Project {
	t.Helper()
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fns := []cli.ProjectOptionsFn{
		cli.WithWorkingDirectory(wd),
		cli.WithName("agora"),
		cli.WithProfiles(profiles),
		// Only the file's own defaults: the developer's environment must not
		// change what is validated.
		cli.WithEnv([]string{}),
	}
	if envFile != "" {
		fns = append(fns, cli.WithEnvFiles(envFile), cli.WithDotEnv)
	}
	opts, err := cli.NewProjectOptions([]string{"docker-compose.yml"}, fns...)
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yml (profiles %v, env file %q): %v", profiles, envFile, err)
	}
	return p
}

func TestComposeLoadsAndValidates(t *testing.T) {
	base := load(t)
	obs := load(t, "observability")
	for _, name := range []string{"otel-collector", "jaeger", "prometheus", "grafana"} {
		if _, err := base.GetService(name); err == nil {
			t.Errorf("%s runs without the observability profile", name)
		}
		if _, err := obs.GetService(name); err != nil {
			t.Errorf("%s missing from the observability profile: %v", name, err)
		}
	}
	for _, name := range append([]string{"certs", "rabbitmq", "postgres", "migrate", "minio", "minio-buckets"}, platformServices...) {
		if _, err := base.GetService(name); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	for _, f := range []string{"otel-collector.yaml", "prometheus.yml", "rabbitmq/agora.conf", "grafana/provisioning/datasources/datasources.yaml", "grafana/provisioning/dashboards/dashboards.yaml", "../observability/alerts.yml"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("mounted file: %v", err)
		}
	}
	var dash struct {
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	data, err := os.ReadFile("../observability/dashboards/platform.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
		t.Errorf("../observability/dashboards/platform.json: uid %q, %d panels, err %v", dash.UID, len(dash.Panels), err)
	}
}

// Prometheus loads deploy/observability/alerts.yml (the file the chart ships) and
// Grafana the dashboards beside it; RabbitMQ exports the per-queue metrics they query.
func TestComposeShipsAlertRulesAndDashboards(t *testing.T) {
	obs := load(t, "observability")
	mounts := func(name string) map[string]string {
		svc, err := obs.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, v := range svc.Volumes {
			m[v.Target] = v.Source
		}
		return m
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if got := mounts("prometheus")["/etc/prometheus/rules/agora-alerts.yml"]; got != abs("../observability/alerts.yml") {
		t.Errorf("prometheus mounts %q at /etc/prometheus/rules/agora-alerts.yml, want deploy/observability/alerts.yml", got)
	}
	if got := mounts("grafana")["/var/lib/grafana/dashboards"]; got != abs("../observability/dashboards") {
		t.Errorf("grafana mounts %q as its dashboards, want deploy/observability/dashboards", got)
	}
	var cfg struct {
		RuleFiles []string `json:"rule_files"`
	}
	data, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.RuleFiles, "/etc/prometheus/rules/*.yml") {
		t.Errorf("prometheus.yml rule_files = %v, want /etc/prometheus/rules/*.yml", cfg.RuleFiles)
	}
	conf, err := os.ReadFile("rabbitmq/agora.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "prometheus.return_per_object_metrics = true") {
		t.Error("rabbitmq/agora.conf: per-object metrics are off; the alert rules query rabbitmq_queue_* by queue")
	}
}

func TestComposeServicesHaveOwnCredentialsHealthAndOrder(t *testing.T) {
	p := load(t)
	seenUsers := map[string]string{}
	for i, name := range platformServices {
		t.Run(name, func(t *testing.T) {
			s, err := p.GetService(name)
			if err != nil {
				t.Fatal(err)
			}
			env := func(k string) string {
				if v := s.Environment[k]; v != nil {
					return *v
				}
				return ""
			}
			u, err := url.Parse(env("AMQP_URL"))
			if err != nil {
				t.Fatalf("AMQP_URL: %v", err)
			}
			if u.Scheme != "amqps" || u.User.Username() != name || u.Path != "/"+acl.Vhost {
				t.Errorf("AMQP_URL = %s, want amqps as user %s into vhost %s", u.Redacted(), name, acl.Vhost)
			}
			if pw, _ := u.User.Password(); pw != acl.DevPassword(name) {
				t.Errorf("AMQP_URL password is not %s's definitions password", name)
			}
			if other, dup := seenUsers[u.User.Username()]; dup {
				t.Errorf("broker user %s shared with %s", u.User.Username(), other)
			}
			seenUsers[u.User.Username()] = name
			db, err := url.Parse(env("DATABASE_URL"))
			if err != nil {
				t.Fatalf("DATABASE_URL: %v", err)
			}
			if want := strings.ReplaceAll(name, "-", "_"); db.User.Username() != want {
				t.Errorf("DATABASE_URL user = %s, want role %s", db.User.Username(), want)
			}
			if env("AMQP_CA_FILE") == "" || env("HTTP_ADDR") != fmt.Sprintf(":%d", 8081+i) {
				t.Errorf("AMQP_CA_FILE %q, HTTP_ADDR %q", env("AMQP_CA_FILE"), env("HTTP_ADDR"))
			}
			if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) == 0 {
				t.Errorf("no health check")
			}
			for dep, cond := range map[string]string{
				"rabbitmq": types.ServiceConditionHealthy, "postgres": types.ServiceConditionHealthy,
				"migrate": types.ServiceConditionCompletedSuccessfully, "minio-buckets": types.ServiceConditionCompletedSuccessfully,
			} {
				if got := s.DependsOn[dep].Condition; got != cond {
					t.Errorf("depends_on %s: condition %q, want %q", dep, got, cond)
				}
			}
			if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
				t.Errorf("read_only %v, cap_drop %v", s.ReadOnly, s.CapDrop)
			}
			if s.Build == nil || s.Build.Args["SERVICE"] == nil || *s.Build.Args["SERVICE"] != name {
				t.Errorf("build args do not name the service")
			}
			if !strings.HasSuffix(s.Build.Dockerfile, "deploy/docker/service.Dockerfile") {
				t.Errorf("dockerfile = %s, want the shared pattern", s.Build.Dockerfile)
			}
		})
	}
}

func TestComposeInfrastructure(t *testing.T) {
	p := load(t)
	rabbit, err := p.GetService("rabbitmq")
	if err != nil {
		t.Fatal(err)
	}
	mounts := map[string]string{}
	for _, v := range rabbit.Volumes {
		mounts[v.Target] = v.Source
	}
	if src := mounts["/etc/rabbitmq/definitions.json"]; !strings.HasSuffix(src, filepath.Join("deploy", "rabbitmq", "definitions.json")) {
		t.Errorf("definitions mounted from %q, want deploy/rabbitmq/definitions.json", src)
	}
	conf, err := os.ReadFile("rabbitmq/agora.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"load_definitions = /etc/rabbitmq/definitions.json", "listeners.tcp = none", "ssl_options.verify = verify_peer"} {
		if !strings.Contains(string(conf), line+"\n") {
			t.Errorf("rabbitmq/agora.conf lacks %q", line)
		}
	}
	if rabbit.DependsOn["certs"].Condition != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("rabbitmq does not wait for the certificates job")
	}
	pg, err := p.GetService("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pg.Image, "pgvector/pgvector:pg15") {
		t.Errorf("postgres image %s, want pgvector/pgvector:pg15", pg.Image)
	}
	mig, err := p.GetService("migrate")
	if err != nil {
		t.Fatal(err)
	}
	if mig.DependsOn["postgres"].Condition != types.ServiceConditionHealthy || !slices.Contains(mig.Command, "/sql/roles.sql") {
		t.Errorf("migrate: depends_on %v, command %v", mig.DependsOn, mig.Command)
	}
	comm, err := p.GetService("communication")
	if err != nil {
		t.Fatal(err)
	}
	if smtp := comm.Environment["SMTP_ADDR"]; smtp == nil || *smtp != "mailsink:1025" || comm.DependsOn["mailsink"].Condition != types.ServiceConditionStarted {
		t.Errorf("communication: SMTP_ADDR %v, depends_on %v; want the mail sink", smtp, comm.DependsOn)
	}
	if mail, err := p.GetService("mailsink"); err != nil || mail.HealthCheck == nil || mail.HealthCheck.Disable {
		// docker compose up --wait refuses a container whose health check is disabled.
		t.Errorf("mail sink missing or without a health check: %v", err)
	}
	buckets, err := p.GetService("minio-buckets")
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join(buckets.Command, " ")
	for _, b := range []string{"agora/datalake", "agora/documents", "agora/reports"} {
		if !strings.Contains(script, b) {
			t.Errorf("minio-buckets does not create %s", b)
		}
	}
}

// pinned reports whether an image reference names a fixed release: a digest, or a
// tag other than latest (a reference without a tag means latest).
func pinned(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	i := strings.LastIndex(name, ":")
	return i > 0 && i < len(name)-1 && name[i+1:] != "latest"
}

func TestComposePinnedReference(t *testing.T) {
	for ref, want := range map[string]bool{
		"rabbitmq:3.13-management": true, "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z": true,
		"localhost:5000/x:1": true, "x@sha256:0123": true,
		"minio/minio:latest": false, "minio/minio": false, "localhost:5000/x": false, "x:": false,
	} {
		if got := pinned(ref); got != want {
			t.Errorf("pinned(%q) = %v, want %v", ref, got, want)
		}
	}
}

const localEnv = "../docker/local/local.env"

func deref(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}

var imageArgs = []string{"GO_IMAGE", "DEBIAN_IMAGE", "RUNTIME_IMAGE"}

// dockerfileDefaults reads the global ARG defaults of the service Dockerfile.
func dockerfileDefaults(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../docker/service.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	preamble, _, _ := strings.Cut(string(data), "\nFROM ")
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ARG\s+(\w+)=(\S+)\s*$`).FindAllStringSubmatch(preamble, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// Every image is a fixed release, also where a variable can replace it: the
// file names public images by default, and a variable without a default
// would leave compose with an empty image.
func TestComposeImagesArePinned(t *testing.T) {
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	variable := regexp.MustCompile(`^\$\{([A-Z][A-Z0-9_]*):-([^}]+)\}$`)
	for _, m := range regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`).FindAllStringSubmatch(string(data), -1) {
		ref := m[1]
		if v := variable.FindStringSubmatch(ref); v != nil {
			ref = v[2]
		} else if strings.Contains(ref, "$") {
			t.Errorf("image %s: a variable needs a pinned default (${NAME:-image:tag})", m[1])
			continue
		}
		if !pinned(ref) {
			t.Errorf("image %s is not pinned to a release", m[1])
		}
	}
	for _, s := range load(t, "observability").Services {
		if s.Build == nil && !pinned(s.Image) {
			t.Errorf("service %s: image %q is not pinned", s.Name, s.Image)
		}
	}
}

// The build arguments compose passes default to the Dockerfile's own defaults,
// so `docker compose build` and a plain `docker build` use the same bases.
func TestComposeBuildArgsMatchDockerfile(t *testing.T) {
	defaults := dockerfileDefaults(t)
	for _, s := range load(t).Services {
		if s.Build == nil {
			continue
		}
		for _, arg := range imageArgs {
			want, ok := defaults[arg]
			if !ok {
				t.Fatalf("service.Dockerfile declares no ARG %s with a default", arg)
			}
			if got := s.Build.Args[arg]; got == nil || *got != want {
				t.Errorf("service %s: build arg %s = %s, want the Dockerfile default %s", s.Name, arg, deref(got), want)
			}
		}
	}
}

// Without variables, every port is published where it always was, on loopback only.
func TestComposeDefaultPorts(t *testing.T) {
	want := map[string][]string{
		"rabbitmq": {"5671", "15672"}, "postgres": {"5432"}, "minio": {"9000", "9001"},
		"otel-collector": {"4317", "4318"}, "jaeger": {"16686"}, "prometheus": {"9090"}, "grafana": {"3000"},
	}
	for i, name := range platformServices {
		want[name] = []string{fmt.Sprint(8081 + i)}
	}
	for _, s := range load(t, "observability").Services {
		var got []string
		for _, p := range s.Ports {
			got = append(got, p.Published)
			if p.HostIP != "127.0.0.1" || p.Published != fmt.Sprint(p.Target) {
				t.Errorf("service %s publishes %s:%s -> %d, want 127.0.0.1 and the same port", s.Name, p.HostIP, p.Published, p.Target)
			}
		}
		if !slices.Equal(got, want[s.Name]) {
			t.Errorf("service %s publishes %v, want %v", s.Name, got, want[s.Name])
		}
	}
}

// deploy/docker/local/local.env (no registry: local stand-ins) replaces every
// image variable and every port of the file, with ports that avoid the defaults
// (which the same machine's own services use).
func TestComposeLocalEnv(t *testing.T) {
	data, err := os.ReadFile(localEnv)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			set[k] = v
		}
	}
	compose, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*(?:_IMAGE|_PORT)):-`).FindAllStringSubmatch(string(compose), -1) {
		if set[m[1]] == "" {
			t.Errorf("%s does not set %s", localEnv, m[1])
		}
	}
	for k, v := range set {
		if strings.HasSuffix(k, "_IMAGE") && (!strings.HasPrefix(v, "agora-local/") || !pinned(v)) {
			t.Errorf("%s: %s=%s, want a pinned agora-local/ stand-in", localEnv, k, v)
		}
	}

	defaultPorts := map[string]bool{}
	for _, s := range load(t, "observability").Services {
		for _, p := range s.Ports {
			defaultPorts[p.Published] = true
		}
	}
	p := loadWith(t, localEnv, "observability")
	seen := map[string]string{}
	for _, s := range p.Services {
		for _, port := range s.Ports {
			if defaultPorts[port.Published] {
				t.Errorf("service %s publishes %s, a default port, with %s", s.Name, port.Published, localEnv)
			}
			if other, dup := seen[port.Published]; dup {
				t.Errorf("port %s published by %s and %s", port.Published, s.Name, other)
			}
			seen[port.Published] = s.Name
		}
		if s.Build != nil {
			for _, arg := range imageArgs {
				if got := s.Build.Args[arg]; got == nil || *got != set[arg] {
					t.Errorf("service %s: build arg %s = %s with %s, want %s", s.Name, arg, deref(got), localEnv, set[arg])
				}
			}
		}
	}
	for name, variable := range map[string]string{"rabbitmq": "RABBITMQ_IMAGE", "postgres": "POSTGRES_IMAGE",
		"migrate": "POSTGRES_IMAGE", "minio": "MINIO_IMAGE", "minio-buckets": "MC_IMAGE", "prometheus": "PROMETHEUS_IMAGE"} {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Image != set[variable] {
			t.Errorf("service %s: image %s with %s, want %s", name, s.Image, localEnv, set[variable])
		}
	}
}
