package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-platform/agora/e2e/harness"
)

// TestSubscriptionsThroughFabricctl manages a subscription with
// `fabricctl subscription` against the real workflow service (create,
// validate, approve as another person, activate) and reads it back with
// `fabricctl explain`, which also shows the type from the catalog.
func TestSubscriptionsThroughFabricctl(t *testing.T) {
	h := harness.New(t, os.Getenv)
	h.RequireProcesses(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fabricctl")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "pkg/fabric/cmd/fabricctl")).CombinedOutput(); err != nil {
		t.Fatalf("build fabricctl: %v\n%s", err, out)
	}
	h.Start(t, "workflow")
	tenant := "org-a-" + randHex(3)
	author, approver := h.Token(tenant, "ana", "attendant"), h.Token(tenant, "olga", "operator")
	ctl := func(token string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "WORKFLOW_URL="+h.URL("workflow"), "AGORA_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fabricctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	spec := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(spec, []byte(`{"name":"stuck triage","eventTypes":["workflow.stuck.v1"],
		"filter":"payload.step == \"triage\"","policy":{"default":"REQUIRE_HUMAN_REVIEW"},
		"reaction":{"kind":"review-task","role":"operator"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var created struct{ ID, State string }
	if err := json.Unmarshal([]byte(ctl(author, "subscription", "create", "--file", spec)), &created); err != nil || created.State != "DRAFT" {
		t.Fatalf("create: %+v %v", created, err)
	}
	ctl(author, "subscription", "move", "--id", created.ID, "--version", "1", "--to", "VALIDATING", "--reason", "ready")
	ctl(approver, "subscription", "move", "--id", created.ID, "--version", "1", "--to", "APPROVED", "--reason", "looks right")
	ctl(approver, "subscription", "move", "--id", created.ID, "--version", "1", "--to", "ACTIVE", "--reason", "go")
	if list := ctl(author, "subscription", "list"); !strings.Contains(list, created.ID) || !strings.Contains(list, "ACTIVE") {
		t.Errorf("subscription list:\n%s\nwant it ACTIVE", list)
	}
	out := ctl(author, "explain", "workflow.stuck.v1")
	for _, want := range []string{"workflow.stuck.v1  event", "stuckAfterSeconds", `subscription "stuck triage"`, `payload.step == "triage"`, "REQUIRE_HUMAN_REVIEW", "workflow.task-completed.v1"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	// Another tenant's explain lists none of them.
	if out := ctl(h.Token("org-b-"+randHex(3), "bruno", "operator"), "explain", "workflow.stuck.v1"); !strings.Contains(out, "none active") {
		t.Errorf("another tenant's explain:\n%s", out)
	}
	if out := ctl(author, "explain", "document.validated.v1"); !strings.Contains(out, "workflow/workflow.reactions") ||
		!strings.Contains(out, "document-verification/document-check") {
		t.Errorf("explain document.validated.v1 lacks its consumers or the step waiting for it:\n%s", out)
	}

	// A release: its version of the tenant's subscription, applied (it
	// waits for a second person, as any version), then rolled back.
	dir := t.TempDir()
	subs := filepath.Join(dir, "subs", tenant)
	if err := os.MkdirAll(subs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(subs, "stuck.json"), []byte(`{"name":"stuck triage","eventTypes":["workflow.stuck.v1"],
		"filter":"payload.step in [\"triage\", \"review\"]","policy":{"default":"REQUIRE_HUMAN_REVIEW"},
		"reaction":{"kind":"review-task","role":"operator"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "release.json")
	ctl(author, "release", "build", "--release", "2026.12-r2", "--subscriptions", filepath.Join(dir, "subs"),
		"--workflows", filepath.Join(root, "services/workflow/internal/process/definitions.json"), "--out", bundle)
	if out := ctl(author, "release", "apply", "--bundle", bundle, "--reason", "wider triage"); !strings.Contains(out, "version 2 of "+created.ID+" submitted") {
		t.Fatalf("release apply:\n%s", out)
	}
	ctl(approver, "subscription", "move", "--id", created.ID, "--version", "2", "--to", "APPROVED", "--reason", "release reviewed")
	ctl(approver, "subscription", "move", "--id", created.ID, "--version", "2", "--to", "ACTIVE", "--reason", "release go")
	if out := ctl(author, "explain", "workflow.stuck.v1"); !strings.Contains(out, `"review"]`) {
		t.Errorf("after the release, explain shows:\n%s", out)
	}
	ctl(approver, "release", "rollback", "--bundle", bundle, "--reason", "too wide")
	history := ctl(author, "subscription", "show", "--id", created.ID)
	for _, want := range []string{"release 2026.12-r2: wider triage", "release 2026.12-r2: too wide"} {
		if !strings.Contains(history, want) {
			t.Errorf("the subscription's audit lacks %q:\n%s", want, history)
		}
	}
	if out := ctl(author, "explain", "workflow.stuck.v1"); strings.Contains(out, `"review"]`) || !strings.Contains(out, `payload.step == "triage"`) {
		t.Errorf("after the rollback, explain shows:\n%s", out)
	}
}
