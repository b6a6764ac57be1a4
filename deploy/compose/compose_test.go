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
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/agora-platform/agora/deploy/acl"
)

var platformServices = []string{"request", "workflow", "communication", "document-worker", "ai-builder", "datalake-ingestion", "analytics"}

func load(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{"docker-compose.yml"},
		cli.WithWorkingDirectory(wd),
		cli.WithName("agora"),
		cli.WithProfiles(profiles),
		// Only the file's own defaults: the developer's environment must not
		// change what is validated.
		cli.WithEnv([]string{}),
	)
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yml (profiles %v): %v", profiles, err)
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
	for _, f := range []string{"otel-collector.yaml", "prometheus.yml", "rabbitmq/agora.conf", "grafana/provisioning/datasources/datasources.yaml", "grafana/provisioning/dashboards/dashboards.yaml"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("mounted file: %v", err)
		}
	}
	var dash struct {
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	data, err := os.ReadFile("grafana/dashboards/platform.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
		t.Errorf("grafana/dashboards/platform.json: uid %q, %d panels, err %v", dash.UID, len(dash.Panels), err)
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
	buckets, err := p.GetService("minio-buckets")
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join(buckets.Command, " ")
	for _, b := range []string{"agora/datalake", "agora/documents"} {
		if !strings.Contains(script, b) {
			t.Errorf("minio-buckets does not create %s", b)
		}
	}
}
