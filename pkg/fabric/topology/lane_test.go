package topology_test

import (
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

func TestPriorityLanes(t *testing.T) {
	lane, ok := topology.Platform().Consumer("request.workflow-events.priority")
	if !ok || lane.Service != "request" || len(lane.Bindings) != 2 || lane.DLQ() != "request.workflow-events.priority.dlq" {
		t.Fatalf("the request service's lane = %+v", lane)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"overlap", `consumers:
  - queue: a.events
    service: a
    bindings: [{exchange: platform.events, key: "workflow.#"}]
    priority: [{exchange: platform.events, key: workflow.stuck.v1}]`, "also matches priority key"},
		{"wildcard", `consumers:
  - queue: a.events
    service: a
    bindings: [{exchange: platform.events, key: request.submitted.v1}]
    priority: [{exchange: platform.events, key: "task.#"}]`, "name the types themselves"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := topology.Load([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	d, err := topology.Load([]byte(`consumers:
  - queue: a.events
    service: a
    bindings: [{exchange: platform.events, key: request.submitted.v1}]
    priority: [{exchange: platform.events, key: workflow.stuck.v1}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Consumer("a.events.priority"); !ok {
		t.Errorf("a loaded topology's lane is missing: %+v", d.Consumers)
	}
}
