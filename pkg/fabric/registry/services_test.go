package registry

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadRejectsBadServices(t *testing.T) {
	const defs = "definitions:\n" +
		"- {type: a.b.v1, kind: event, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d}\n" +
		"- {type: a.c.v1, kind: command, domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d}\n"
	tests := []struct {
		name, services, want string
	}{
		{"bad name", "- {name: Bad_Name}", "lowercase"},
		{"service twice", "- {name: s}\n- {name: s}", "declared twice"},
		{"publishes an unknown type", "- {name: s, publishes: [a.x.v1]}", `publishes "a.x.v1"`},
		{"queue twice", "- {name: s, consumes: [{queue: s.q, keys: [a.b.v1]}]}\n- {name: t, consumes: [{queue: s.q, keys: [a.b.v1]}]}", `also declared by "s"`},
		{"queue without keys", "- {name: s, consumes: [{queue: s.q}]}", "binds no key"},
		{"unknown priority type", "- {name: s, consumes: [{queue: s.q, keys: [a.b.v1], priority: [a.x.v1]}]}", `priority type "a.x.v1"`},
		{"unknown field", "- {name: s, subscribes: [a.b.v1]}", "subscribes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"catalog.yaml":  {Data: []byte(defs + "services:\n" + tt.services + "\n")},
				"a/a.b.v1.json": {Data: []byte(`{"type":"object"}`)},
				"a/a.c.v1.json": {Data: []byte(`{"type":"object"}`)},
			}
			_, err := Load(fsys)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestDefaultCatalogDeclaresEveryService(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range r.Services() {
		names = append(names, s.Name)
	}
	want := "request workflow communication document-worker ai-builder datalake-ingestion analytics"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("services = %s, want %s", got, want)
	}
}

// Every queue that receives a type is listed with it: by name, through a
// pattern (events only) and through a priority lane.
func TestConsumers(t *testing.T) {
	r, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string][]string{
		// By name in three services, by "request.#" in two.
		"request.submitted.v1": {"workflow/workflow.request-submitted", "communication/communication.request-submitted",
			"datalake-ingestion/datalake.request-events", "analytics/analytics.request-events"},
		// A priority lane, and the lake's patterns.
		"task.sla-breached.v1": {"request/request.workflow-events", "workflow/workflow.reactions", "datalake-ingestion/datalake.platform-events"},
		// A job: no pattern reaches it.
		"report.export.v1": {"analytics/analytics.report-export"},
	} {
		d, _ := r.Lookup(typ)
		if !slices.Equal(d.Consumers, want) {
			t.Errorf("%s consumers = %v, want %v", typ, d.Consumers, want)
		}
	}
}
