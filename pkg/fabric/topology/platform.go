package topology

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agora-platform/agora/pkg/fabric/internal/topic"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// Route returns the exchange and routing key of a catalog type: events on
// platform.events (topic), commands on platform.commands, jobs on
// platform.work, each keyed by its type.
func Route(d registry.Definition) (exchange, key string) {
	switch d.Kind {
	case registry.KindCommand:
		return CommandsExchange, d.Type
	case registry.KindJob:
		return WorkExchange, d.Type
	default:
		return EventsExchange, d.Type
	}
}

// platform is the topology derived from the embedded catalog, built once.
var platform = sync.OnceValues(func() (Description, error) {
	reg, err := registry.Default()
	if err != nil {
		return Description{}, err
	}
	return fromCatalog(reg)
})

// Platform returns the platform's topology, derived from the embedded
// catalog's service declarations (fromCatalog). The catalog is compiled
// into every binary and checked by the registry's and this package's
// tests, so a catalog that does not derive is a broken build: Platform
// panics then, naming the fault.
func Platform() Description {
	d, err := platform()
	if err != nil {
		panic(fmt.Sprintf("topology: the embedded catalog does not derive a platform topology: %v", err))
	}
	return d
}

// fromCatalog derives the platform topology from the services the catalog
// declares (registry.Service): the five platform exchanges, and for each
// queue a service consumes, its bindings, with the exchange of each key
// following from the kind of the types it names, its priority lane, and
// the fabric's default retry tiers and DLQ. A key must name a catalog type
// or be a topic pattern matching at least one event (patterns bind on
// platform.events, the one topic exchange).
func fromCatalog(reg *registry.Registry) (Description, error) {
	d := Description{
		Name:       "platform",
		Codec:      CodecAgora,
		DeadLetter: deadLetter{Exchange: DeadLetterExchange, Queue: dlqPattern},
		Retry:      retry{Exchange: RetryExchange, Tiers: durations(defaultRetryTiers)},
		Exchanges:  PlatformExchanges(),
	}
	for _, s := range reg.Services() {
		for _, sub := range s.Consumes {
			c := Consumer{Queue: sub.Queue, Service: s.Name}
			for _, k := range sub.Keys {
				b, err := bindingOf(reg, k)
				if err != nil {
					return Description{}, fmt.Errorf("topology: %s queue %s: %w", s.Name, sub.Queue, err)
				}
				c.Bindings = append(c.Bindings, b)
			}
			for _, k := range sub.Priority {
				b, err := bindingOf(reg, k)
				if err != nil {
					return Description{}, fmt.Errorf("topology: %s queue %s priority: %w", s.Name, sub.Queue, err)
				}
				c.Priority = append(c.Priority, b)
			}
			for _, v := range sub.RetryTiers {
				t, err := time.ParseDuration(v)
				if err != nil || t <= 0 {
					return Description{}, fmt.Errorf("topology: %s queue %s: retry tier %q: want a positive duration such as 30s", s.Name, sub.Queue, v)
				}
				c.RetryTiers = append(c.RetryTiers, Duration(t))
			}
			if err := cleared(reg, s, sub.Queue); err != nil {
				return Description{}, fmt.Errorf("topology: %s queue %s: %w", s.Name, sub.Queue, err)
			}
			d.Consumers = append(d.Consumers, c)
		}
	}
	if err := d.Validate(); err != nil {
		return Description{}, err
	}
	return d.WithLanes().Resolve(), nil
}

// cleared refuses a queue of s that receives a type more sensitive than
// s's clearance, by name, pattern or priority lane: the registry already
// knows which queues receive each type (Definition.Consumers), which
// includes every type added to a pattern's domain later.
func cleared(reg *registry.Registry, s registry.Service, queue string) error {
	for _, def := range reg.All() {
		if slices.Contains(def.Consumers, s.Name+"/"+queue) && def.Sensitivity.Above(s.Clearance) {
			return fmt.Errorf("it receives %s (%s), above the service's clearance %s: raise the clearance in catalog.yaml, or bind narrower keys",
				def.Type, def.Sensitivity, s.Clearance)
		}
	}
	return nil
}

// bindingOf routes one binding key of the catalog.
func bindingOf(reg *registry.Registry, key string) (Binding, error) {
	if def, ok := reg.Lookup(key); ok {
		ex, k := Route(def)
		return Binding{Exchange: ex, Key: k}, nil
	}
	if !strings.ContainsAny(key, "*#") {
		return Binding{}, fmt.Errorf("key %q is neither a catalog type nor a topic pattern", key)
	}
	// Patterns bind on platform.events only (commands and jobs are
	// addressed by their exact type); one that reaches no event is a typo.
	for _, def := range reg.All() {
		if def.Kind == registry.KindEvent && topic.Match(key, def.Type) {
			return Binding{Exchange: EventsExchange, Key: key}, nil
		}
	}
	return Binding{}, fmt.Errorf("pattern %q matches no event of the catalog", key)
}

// YAML renders d in the topology file format (docs/topologies.md), so that
// Load of the result declares what d declares. Priority lanes are written
// as their parent's priority keys, which Load turns back into lanes.
func (d Description) YAML(header string) ([]byte, error) {
	lanes := map[string]bool{}
	for _, c := range d.Consumers {
		if lane, ok := c.lane(); ok {
			lanes[lane.Queue] = true
		}
	}
	f := d
	f.Consumers = nil
	for _, c := range d.Consumers {
		if !lanes[c.Queue] {
			f.Consumers = append(f.Consumers, c)
		}
	}
	var doc yaml.Node
	if err := doc.Encode(f); err != nil {
		return nil, fmt.Errorf("topology: render %s: %w", d.Name, err)
	}
	flowSmallMaps(&doc)
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("topology: render %s: %w", d.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("topology: render %s: %w", d.Name, err)
	}
	return buf.Bytes(), nil
}

// flowSmallMaps writes every mapping of at most two keys (an exchange, a
// binding) on one line, as a person writing the file would.
func flowSmallMaps(n *yaml.Node) {
	if n.Kind == yaml.MappingNode && len(n.Content) <= 4 {
		n.Style = yaml.FlowStyle
	}
	for _, c := range n.Content {
		flowSmallMaps(c)
	}
}
