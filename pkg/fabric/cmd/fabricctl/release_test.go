package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/catalog"
)

// releaseFixture writes a release's parts: a copy of this build's catalog
// (edit may change its files), workflow definitions and two tenants'
// subscriptions; it returns the directories and file build takes.
func releaseFixture(t *testing.T, edit func(catalogDir string), specs map[string]string) (catalogDir, workflows, subs string) {
	t.Helper()
	root := t.TempDir()
	catalogDir, subs, workflows = filepath.Join(root, "catalog"), filepath.Join(root, "subs"), filepath.Join(root, "definitions.json")
	if err := os.CopyFS(catalogDir, catalog.FS); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(catalogDir)
	}
	if err := os.WriteFile(workflows, []byte(`{"default":"review","definitions":[
		{"id":"review","steps":[{"name":"triage","assigneeRole":"attendant","sla":"24h"}]},
		{"id":"check","services":["rg"],"steps":[{"name":"docs","assigneeRole":"attendant","sla":"24h","waitFor":"document.validated.v1"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, spec := range specs {
		p := filepath.Join(subs, name+".json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return catalogDir, workflows, subs
}

const (
	stuckSpec = `{"name":"stuck","eventTypes":["workflow.stuck.v1"],"filter":"payload.step == \"triage\"",
		"policy":{"default":"ALLOW","rules":[{"when":"payload.stuckAfterSeconds > 86400","outcome":"REQUIRE_APPROVAL"}]},
		"reaction":{"kind":"review-task","role":"operator"}}`
	startSpec = `{"name":"start","eventTypes":["document.validated.v1"],"policy":{"default":"ALLOW"},
		"reaction":{"kind":"start-workflow","definitionId":"review"},"agent":{"instruction":"?","project":["payload.kind"]}}`
	resumeSpec = `{"name":"resume","eventTypes":["document.validated.v1"],"policy":{"default":"ALLOW"},"reaction":{"kind":"resume-workflow"}}`
)

func TestReleaseBuildChecksTheBundleAsAWhole(t *testing.T) {
	good := map[string]string{"org-a/stuck": stuckSpec, "org-a/start": startSpec, "org-b/resume": resumeSpec}
	dropStep := func(dir string) {
		// This release's catalog removes workflow.stuck.v1's "step"
		// (which its own subscription filters on).
		p := filepath.Join(dir, "workflow", "workflow.stuck.v1.json")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var schema map[string]any
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatal(err)
		}
		delete(schema["properties"].(map[string]any), "step")
		var req []any
		for _, r := range schema["required"].([]any) {
			if r != "step" {
				req = append(req, r)
			}
		}
		schema["required"] = req
		data, _ = json.Marshal(schema)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		edit    func(string)
		specs   map[string]string
		refused string // what the problem must say; "" when the bundle is good
	}{
		{"a good release", nil, good, ""},
		{"its catalog removed a field a subscription filters", dropStep, good, "subscription org-a/stuck: filter"},
		{"a workflow definition the release lacks", nil, map[string]string{"org-a/start": strings.Replace(startSpec, `"review"`, `"gone"`, 1)},
			`definition "gone" is not among this release's workflows`},
		{"nothing waits for a resume", nil, map[string]string{"org-a/r": strings.Replace(resumeSpec, "document.validated.v1", "workflow.stuck.v1", 1)},
			"no workflow step of this release waits"},
		{"a policy rule on a field the type lacks", nil, map[string]string{"org-a/stuck": strings.Replace(stuckSpec, "stuckAfterSeconds", "nope", 1)},
			"policy.rules[0].when"},
		{"an agent projecting a field the type lacks", nil, map[string]string{"org-a/start": strings.Replace(startSpec, "payload.kind", "payload.nope", 1)},
			"agent.project[0]"},
		{"a type the release does not define", func(dir string) {
			if err := os.Remove(filepath.Join(dir, "document", "document.validated.v1.json")); err != nil {
				t.Fatal(err)
			}
		}, good, "catalog:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			catalogDir, workflows, subs := releaseFixture(t, tc.edit, tc.specs)
			out := filepath.Join(t.TempDir(), "bundle.json")
			var stdout strings.Builder
			err := run(t.Context(), []string{"release", "build", "--release", "r1", "--catalog", catalogDir, "--workflows", workflows,
				"--subscriptions", subs, "--out", out}, noEnv, &stdout, &stdout)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("build: %v\n%s", err, stdout.String())
				}
				if got := fabricctl(t, noEnv, "release", "check", "--bundle", out); !strings.Contains(got, "3 subscriptions check") {
					t.Errorf("check:\n%s", got)
				}
				return
			}
			if err == nil || !strings.Contains(stdout.String(), tc.refused) {
				t.Fatalf("build = %v\n%s\nwant a problem saying %q", err, stdout.String(), tc.refused)
			}
			if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
				t.Errorf("a bundle that fails its check was written")
			}
		})
	}
}

// A bundle edited after build is refused: check recomputes its digest.
func TestReleaseCheckRefusesAnEditedBundle(t *testing.T) {
	catalogDir, workflows, subs := releaseFixture(t, nil, map[string]string{"org-a/stuck": stuckSpec})
	out := filepath.Join(t.TempDir(), "bundle.json")
	fabricctl(t, noEnv, "release", "build", "--release", "r1", "--catalog", catalogDir, "--workflows", workflows, "--subscriptions", subs, "--out", out)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(strings.Replace(string(data), `triage`, `review`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	err = run(t.Context(), []string{"release", "check", "--bundle", out}, noEnv, &stdout, &stdout)
	if err == nil || !strings.Contains(stdout.String(), "does not match the bundle's content") {
		t.Errorf("check of an edited bundle = %v\n%s", err, stdout.String())
	}
}

// noEnv is an environment with nothing set.
func noEnv(string) string { return "" }
