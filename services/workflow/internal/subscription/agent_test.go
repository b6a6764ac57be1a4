package subscription

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

func TestAgentCheck(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	ok := func() Spec {
		return Spec{Name: "s", EventTypes: []string{"workflow.stuck.v1"}, Policy: Policy{Default: Allow},
			Reaction: Reaction{Kind: ReviewTask, Role: "operator"},
			Agent:    &Agent{Instruction: "Is this step stuck for a reason the rules know?", Project: []string{"payload.step", "event.type"}}}
	}
	schema := func(s string) func(*Spec) { return func(sp *Spec) { sp.Agent.DecisionSchema = json.RawMessage(s) } }
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		valid  bool
	}{
		{"valid, default schema", func(*Spec) {}, true},
		{"embedded schema", schema(`{"type":"object","required":["outcome","confidence"],"properties":{"outcome":{"enum":["ALLOW","REQUIRE_HUMAN_REVIEW"]},"confidence":{"type":"number"}}}`), true},
		{"timeout and topK", func(s *Spec) { s.Agent.Timeout, s.Agent.TopK = "30s", 20 }, true},
		{"no instruction", func(s *Spec) { s.Agent.Instruction = "  " }, false},
		{"no projection", func(s *Spec) { s.Agent.Project = nil }, false},
		{"a payload field the type lacks", func(s *Spec) { s.Agent.Project = []string{"payload.citizenName"} }, false},
		{"an envelope field not offered", func(s *Spec) { s.Agent.Project = []string{"event.tenantId"} }, false},
		{"not a path", func(s *Spec) { s.Agent.Project = []string{"payload.step) || true || has(payload.x"} }, false},
		{"the whole payload", func(s *Spec) { s.Agent.Project = []string{"payload"} }, false},
		// RESTRICTED fields never reach a model; a sensitive field of a
		// lesser type is sent masked (agent.Project), so it may be named.
		{"a RESTRICTED field", func(s *Spec) {
			s.EventTypes, s.Agent.Project = []string{"citizen.updated.v1"}, []string{"payload.citizenId"}
		}, false},
		{"beside a field that is not", func(s *Spec) {
			s.EventTypes, s.Agent.Project = []string{"citizen.updated.v1"}, []string{"payload.changedFields", "payload.citizenId"}
		}, false},
		{"the other fields of a RESTRICTED type", func(s *Spec) {
			s.EventTypes, s.Agent.Project = []string{"citizen.updated.v1"}, []string{"payload.changedFields"}
		}, true},
		{"a sensitive field of an INTERNAL type", func(s *Spec) {
			s.EventTypes, s.Agent.Project = []string{"request.submitted.v1"}, []string{"payload.citizenId"}
		}, true},
		{"timeout too long", func(s *Spec) { s.Agent.Timeout = "5m" }, false},
		{"timeout not a duration", func(s *Spec) { s.Agent.Timeout = "soon" }, false},
		{"topK too big", func(s *Spec) { s.Agent.TopK = 21 }, false},
		{"schema not JSON", schema(`{`), false},
		{"schema without outcome", schema(`{"type":"object","properties":{"reason":{"type":"string"}}}`), false},
		{"outcome not required", schema(`{"type":"object","properties":{"outcome":{"enum":["ALLOW"]}}}`), false},
		{"a model may not deny", schema(`{"type":"object","required":["outcome"],"properties":{"outcome":{"enum":["ALLOW","DENY"]}}}`), false},
		{"outcome without enum", schema(`{"type":"object","required":["outcome"],"properties":{"outcome":{"type":"string"}}}`), false},
		{"a reference outside the document", schema(`{"type":"object","required":["outcome"],"properties":{"outcome":{"enum":["ALLOW"]},"x":{"$ref":"file:///etc/passwd"}}}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.change(&s)
			err := s.Check(reg, func(string) bool { return false })
			if tc.valid != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("Check = %v, want valid %v", err, tc.valid)
			}
		})
	}
}

// TestPolicyBoundsTheAgent: the policy's default is the most an agent's
// proposal can reach; a failed step proposes REQUIRE_HUMAN_REVIEW.
func TestPolicyBoundsTheAgent(t *testing.T) {
	for _, tc := range []struct {
		proposal, failure string
		policy, want      Outcome
	}{
		{`{"outcome":"ALLOW"}`, "", Allow, Allow},
		{`{"outcome":"ALLOW"}`, "", RequireApproval, RequireApproval},
		{`{"outcome":"ALLOW"}`, "", Deny, Deny},
		{`{"outcome":"REQUIRE_APPROVAL"}`, "", Allow, RequireApproval},
		{`{"outcome":"REQUIRE_HUMAN_REVIEW"}`, "", RequireApproval, RequireHumanReview},
		{`{"outcome":"DENY"}`, "", Allow, RequireHumanReview},
		{`{"outcome":"ALLOW"}`, "timeout", Allow, RequireHumanReview},
		{``, "no model is configured", Allow, RequireHumanReview},
		{`{"no":"outcome"}`, "", Allow, RequireHumanReview},
	} {
		rec := AgentRecord{Proposal: json.RawMessage(tc.proposal), Failure: tc.failure}
		if got := Stricter(rec.Outcome(), tc.policy); got != tc.want {
			t.Errorf("proposal %s (failure %q) under policy %s = %s, want %s", tc.proposal, tc.failure, tc.policy, got, tc.want)
		}
	}
}
