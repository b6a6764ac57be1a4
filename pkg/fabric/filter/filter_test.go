package filter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/filter"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

func stuck(t *testing.T, tenant, step string, after int) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("workflow.stuck.v1", tenant, "workflow-service", map[string]any{
		"processId": "0192d3a0-0000-7000-8000-000000000001", "requestId": "0192d3a0-0000-7000-8000-000000000002",
		"definitionId": "standard-review", "taskId": "0192d3a0-0000-7000-8000-000000000003", "step": step,
		"waitingSince": "2026-12-01T10:00:00Z", "stuckAfterSeconds": after})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCompileAndMatch(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	types := []string{"workflow.stuck.v1"}
	for _, tc := range []struct {
		name, src string
		step      string
		want      bool
	}{
		{"empty matches all", "", "triage", true},
		{"field equals", `payload.step == "decision"`, "decision", true},
		{"field differs", `payload.step == "decision"`, "triage", false},
		{"envelope and payload", `event.tenantId == "org-a" && payload.stuckAfterSeconds > 3600`, "triage", true},
		{"index syntax", `payload["definitionId"].startsWith("standard")`, "triage", true},
		{"presence", `has(payload.requestId)`, "triage", true},
		{"list membership", `payload.step in ["triage", "review"]`, "triage", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := filter.Compile(reg, types, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Match(stuck(t, "org-a", tc.step, 259200))
			if err != nil || got != tc.want {
				t.Errorf("Match = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		types     []string
		want      string
	}{
		{"syntax", `payload.step ==`, []string{"workflow.stuck.v1"}, "Syntax"},
		{"not a bool", `payload.step`, []string{"workflow.stuck.v1"}, "want a bool"},
		{"unknown field", `payload.stpe == "triage"`, []string{"workflow.stuck.v1"}, "no payload field stpe"},
		{"field of one type only", `payload.step == "triage"`, []string{"workflow.stuck.v1", "request.submitted.v1"}, "request.submitted.v1 has no payload field step"},
		{"unknown type", `true`, []string{"nothing.v1"}, "unknown event type"},
		{"too long", strings.Repeat("true && ", 300) + "true", []string{"workflow.stuck.v1"}, "longer than"},
		{"unknown function", `exec("rm")`, []string{"workflow.stuck.v1"}, "undeclared reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := filter.Compile(reg, tc.types, tc.src)
			if !errors.Is(err, fabric.ErrInvalid) || !strings.HasPrefix(err.Error(), "invalid filter: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile(%q) = %v, want an invalid filter (fabric.ErrInvalid) mentioning %q", tc.src, err, tc.want)
			}
		})
	}
}

func TestEvaluationIsBounded(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	// Every pair of a 200-element list: 40,000 steps, over the cost limit.
	f, err := filter.Compile(reg, []string{"workflow.stuck.v1"},
		`[`+strings.TrimSuffix(strings.Repeat("1,", 200), ",")+`].all(x, [`+strings.TrimSuffix(strings.Repeat("1,", 200), ",")+`].all(y, x == y))`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Match(stuck(t, "org-a", "triage", 60)); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("Match = %v, want the cost limit", err)
	}
}
