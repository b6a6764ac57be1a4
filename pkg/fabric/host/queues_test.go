package host

import (
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"slices"
	"strings"
	"testing"
)

// A service's queues come from the catalog, lanes included; attaching a
// handler to a queue the catalog does not give the service is an error
// that names the fix.
func TestTheServiceQueuesAreTheCatalogs(t *testing.T) {
	var names []string
	for _, c := range topology.Platform().ConsumersOf("request") {
		if c.Service != "request" {
			t.Errorf("%s belongs to %s", c.Queue, c.Service)
		}
		names = append(names, c.Queue)
	}
	if want := []string{"request.workflow-events", "request.workflow-events.priority"}; !slices.Equal(names, want) {
		t.Errorf("request's queues = %v, want %v", names, want)
	}
	if q := topology.Platform().ConsumersOf("no-such-service"); len(q) != 0 {
		t.Errorf("an undeclared service has queues %v", q)
	}
	h := &host{Cfg: Config{Service: "analytics"}, opts: Options{Consumers: topology.Platform().ConsumersOf("analytics")}}
	if _, err := h.consumer("analytics.request-events"); err != nil {
		t.Errorf("consumer(analytics.request-events) = %v", err)
	}
	_, err := h.consumer("request.workflow-events")
	if err == nil || !strings.Contains(err.Error(), "catalog.yaml") {
		t.Errorf("Consumer of another service's queue = %v, want an error naming the catalog", err)
	}
}
