package topology_test

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// catalogWith is a small catalog: an event family, a command and a job,
// consumed as services declares.
func catalogWith(t *testing.T, services string) (*registry.Registry, error) {
	t.Helper()
	def := func(typ, kind string) string {
		return "- {type: " + typ + ", kind: " + kind + ", domain: a, owner: o, scope: TENANT, sensitivity: PUBLIC, description: d}\n"
	}
	obj := &fstest.MapFile{Data: []byte(`{"type":"object"}`)}
	return registry.Load(fstest.MapFS{
		"catalog.yaml": {Data: []byte("definitions:\n" + def("a.made.v1", "event") + def("a.make.v1", "command") +
			def("a.export.v1", "job") + "services:\n" + services)},
		"a/a.made.v1.json": obj, "a/a.make.v1.json": obj, "a/a.export.v1.json": obj,
	})
}

func TestFromCatalogRoutesEachKeyByKind(t *testing.T) {
	reg, err := catalogWith(t, `
- name: s
  consumes:
    - {queue: s.all, keys: ["a.#"]}
    - {queue: s.commands, keys: [a.make.v1]}
    - {queue: s.jobs, keys: [a.export.v1], priority: []}
- name: t
  consumes:
    - {queue: t.lane, keys: [a.make.v1], priority: [a.made.v1]}
`)
	if err != nil {
		t.Fatal(err)
	}
	d, err := topology.FromCatalog(reg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]topology.Binding{
		"s.all":           {{Exchange: topology.EventsExchange, Key: "a.#"}},
		"s.commands":      {{Exchange: topology.CommandsExchange, Key: "a.make.v1"}},
		"s.jobs":          {{Exchange: topology.WorkExchange, Key: "a.export.v1"}},
		"t.lane":          {{Exchange: topology.CommandsExchange, Key: "a.make.v1"}},
		"t.lane.priority": {{Exchange: topology.EventsExchange, Key: "a.made.v1"}},
	}
	if len(d.Consumers) != len(want) {
		t.Fatalf("%d consumers, want %d: %+v", len(d.Consumers), len(want), d.Consumers)
	}
	for q, bindings := range want {
		c, ok := d.Consumer(q)
		if !ok {
			t.Errorf("no consumer %s", q)
			continue
		}
		if !reflect.DeepEqual(c.Bindings, bindings) {
			t.Errorf("%s bindings = %+v, want %+v", q, c.Bindings, bindings)
		}
		if wantSvc := q[:1]; c.Service != wantSvc {
			t.Errorf("%s belongs to %q, want %q", q, c.Service, wantSvc)
		}
	}
}

// A queue's retry tiers are the catalog's when it names them, the
// fabric's default otherwise.
func TestFromCatalogTakesAQueuesRetryTiers(t *testing.T) {
	reg, err := catalogWith(t, `
- name: s
  consumes:
    - {queue: s.quick, keys: [a.made.v1], retryTiers: [2s, 1m]}
    - {queue: s.usual, keys: [a.make.v1]}
`)
	if err != nil {
		t.Fatal(err)
	}
	d, err := topology.FromCatalog(reg)
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]time.Duration{
		"s.quick": {2 * time.Second, time.Minute},
		"s.usual": {30 * time.Second, 5 * time.Minute, 30 * time.Minute},
	} {
		c, _ := d.Consumer(q)
		if got := c.Tiers(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s tiers = %v, want %v", q, got, want)
		}
	}
	bad, err := catalogWith(t, "- {name: s, consumes: [{queue: s.q, keys: [a.made.v1], retryTiers: [soon]}]}\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topology.FromCatalog(bad); err == nil || !strings.Contains(err.Error(), `retry tier "soon"`) {
		t.Errorf("FromCatalog with tier soon = %v, want an error naming it", err)
	}
}

func TestFromCatalogRejectsKeysThatRouteNothing(t *testing.T) {
	tests := []struct{ name, services, want string }{
		{"not a type", "- {name: s, consumes: [{queue: s.q, keys: [a.unmade.v1]}]}", "neither a catalog type nor a topic pattern"},
		{"pattern matching no event", "- {name: s, consumes: [{queue: s.q, keys: [\"b.#\"]}]}", "matches no event"},
		{"pattern matching only a command", "- {name: s, consumes: [{queue: s.q, keys: [\"*.make.*\"]}]}", "matches no event"},
		{"bad queue name", "- {name: s, consumes: [{queue: q, keys: [a.made.v1]}]}", "<consumer>.<purpose>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := catalogWith(t, tt.services+"\n")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := topology.FromCatalog(reg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromCatalog() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// The generated platform.yaml is YAML(Platform()); loading it must declare
// exactly what Platform() declares, lanes included.
func TestPlatformYAMLRoundTrips(t *testing.T) {
	for _, d := range []topology.Description{topology.Platform(), loadFile(t, "car"), loadFile(t, "imoveis")} {
		b, err := d.YAML("# test\n")
		if err != nil {
			t.Fatal(err)
		}
		back, err := topology.Load(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", d.Name, err, b)
		}
		if !reflect.DeepEqual(back, d) {
			t.Errorf("%s: YAML then Load =\n%+v\nwant\n%+v", d.Name, back, d)
		}
	}
}

func loadFile(t *testing.T, name string) topology.Description {
	t.Helper()
	d, err := topology.LoadFile(topologyFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A service consumes nothing above its clearance: not a type it names,
// not one a pattern of its reaches, not one in its priority lane.
func TestFromCatalogHoldsEachServiceToItsClearance(t *testing.T) {
	def := func(typ, sensitivity string) string {
		return "- {type: " + typ + ", kind: event, domain: b, owner: o, scope: TENANT, sensitivity: " + sensitivity + ", description: d}\n"
	}
	obj := &fstest.MapFile{Data: []byte(`{"type":"object"}`)}
	load := func(service string) (*registry.Registry, error) {
		return registry.Load(fstest.MapFS{
			"catalog.yaml": {Data: []byte("definitions:\n" + def("b.note.v1", "CONFIDENTIAL") + def("b.secret.v1", "RESTRICTED") +
				def("b.open.v1", "PUBLIC") + "services:\n" + service)},
			"b/b.note.v1.json": obj, "b/b.secret.v1.json": obj, "b/b.open.v1.json": obj,
		})
	}
	for _, tc := range []struct {
		name, service, refused string // refused: the type the error must name; "" when allowed
	}{
		{"no clearance is INTERNAL", "- {name: s, consumes: [{queue: s.q, keys: [b.note.v1]}]}", "b.note.v1 (CONFIDENTIAL)"},
		{"a type above", "- {name: s, clearance: INTERNAL, consumes: [{queue: s.q, keys: [b.open.v1, b.note.v1]}]}", "b.note.v1 (CONFIDENTIAL)"},
		{"a pattern reaching above", "- {name: s, clearance: CONFIDENTIAL, consumes: [{queue: s.q, keys: [\"b.#\"]}]}", "b.secret.v1 (RESTRICTED)"},
		{"a priority type above", "- {name: s, clearance: CONFIDENTIAL, consumes: [{queue: s.q, keys: [b.note.v1], priority: [b.secret.v1]}]}", "b.secret.v1 (RESTRICTED)"},
		{"at the clearance", "- {name: s, clearance: CONFIDENTIAL, consumes: [{queue: s.q, keys: [b.note.v1, b.open.v1]}]}", ""},
		{"a pattern within it", "- {name: s, clearance: RESTRICTED, consumes: [{queue: s.q, keys: [\"b.#\"]}]}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := load(tc.service)
			if err != nil {
				t.Fatal(err)
			}
			_, err = topology.FromCatalog(reg)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("FromCatalog = %v, want it allowed", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "clearance")):
				t.Errorf("FromCatalog = %v, want a refusal naming %s and the clearance", err, tc.refused)
			}
		})
	}
	if _, err := load("- {name: s, clearance: SECRET, consumes: [{queue: s.q, keys: [b.open.v1]}]}"); err == nil || !strings.Contains(err.Error(), `clearance "SECRET"`) {
		t.Errorf("Load with clearance SECRET = %v, want an error naming it", err)
	}
}
