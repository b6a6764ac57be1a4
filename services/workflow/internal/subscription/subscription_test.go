package subscription

import (
	"errors"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

func TestLifecycle(t *testing.T) {
	all := []State{Draft, Validating, Approved, Active, Disabled, Deprecated, Removed}
	allowed := map[[2]State]bool{
		{Draft, Validating}: true, {Draft, Removed}: true,
		{Validating, Approved}: true, {Validating, Draft}: true,
		{Approved, Active}: true, {Approved, Deprecated}: true,
		{Active, Disabled}: true, {Active, Deprecated}: true,
		{Disabled, Active}: true, {Disabled, Deprecated}: true,
		{Deprecated, Removed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanMove(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanMove(%s, %s) = %v", from, to, got)
			}
		}
	}
}

func TestSpecCheck(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	defs := func(id string) bool { return id == "standard-review" }
	ok := func() Spec {
		return Spec{Name: "s", EventTypes: []string{"workflow.stuck.v1"}, Filter: `payload.step == "triage"`,
			Policy: Policy{Default: Allow}, Reaction: Reaction{Kind: StartWorkflow, DefinitionID: "standard-review"}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		valid  bool
	}{
		{"valid", func(*Spec) {}, true},
		{"review task", func(s *Spec) { s.Reaction = Reaction{Kind: ReviewTask, Role: "operator"} }, true},
		{"no name", func(s *Spec) { s.Name = " " }, false},
		{"no types", func(s *Spec) { s.EventTypes = nil }, false},
		{"unknown definition", func(s *Spec) { s.Reaction.DefinitionID = "nope" }, false},
		{"review for citizens", func(s *Spec) { s.Reaction = Reaction{Kind: ReviewTask, Role: "citizen"} }, false},
		{"unknown reaction", func(s *Spec) { s.Reaction.Kind = "email-everyone" }, false},
		{"rule outcome", func(s *Spec) { s.Policy.Rules = []Rule{{When: "true", Outcome: "SOMETIMES"}} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.change(&s)
			err := s.Check(reg, defs)
			if tc.valid != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Check = %v, want valid %v", err, tc.valid)
			}
		})
	}
}
