package topic

import "testing"

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, key string
		want         bool
	}{
		{"workflow.#", "workflow.stuck.v1", true},
		{"workflow.#", "workflow", true},
		{"task.#", "workflow.stuck.v1", false},
		{"workflow.*", "workflow.stuck.v1", false},
		{"workflow.*.v1", "workflow.stuck.v1", true},
		{"#", "anything.at.all", true},
		{"#.v1", "workflow.stuck.v1", true},
		{"workflow.stuck.v1", "workflow.stuck.v1", true},
		{"workflow.stuck.v1", "workflow.stuck.v2", false},
	} {
		if got := Match(tc.pattern, tc.key); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.key, got)
		}
	}
}
