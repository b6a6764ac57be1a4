package registry

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/agora-platform/agora/pkg/fabric/internal/topic"
)

// Service is one platform service's declaration in the catalog
// (catalog.yaml, services:): the types it publishes and the queues it
// consumes. Everything the broker needs to know about the service is
// derived from it — its queues, bindings, retry tiers and DLQs
// (topology.Platform), its broker grants (deploy/acl) and the AsyncAPI
// document — so a service's messaging footprint is written once, here.
type Service struct {
	// Name is the service, and its broker user ("document-worker").
	Name string `yaml:"name"`
	// Publishes lists the types the service sends. A type's owner is the
	// domain that defines it; publishing is granted only to the services
	// listed here, so a type nobody sends yet is granted to no one.
	Publishes []string `yaml:"publishes,omitempty"`
	// Consumes lists the service's queues.
	Consumes []subscription `yaml:"consumes,omitempty"`
	// Clearance is the most sensitive data the service may consume
	// (PUBLIC … RESTRICTED; INTERNAL when not declared): a queue may bind
	// no type above it, directly or through a pattern (topology checks,
	// since it resolves patterns to types), so the service's broker grants
	// never reach such a type either.
	Clearance sensitivity `yaml:"clearance,omitempty"`
}

// subscription is one consumer queue <service>.<purpose> and the routing
// keys bound to it: a catalog type, or (events only) a topic pattern such
// as "request.#". The exchange of each key follows from the kind of the
// types it names (topology.Route).
type subscription struct {
	Queue string   `yaml:"queue"`
	Keys  []string `yaml:"keys"`
	// Priority names event types that go to the queue's priority lane,
	// Q.priority, ahead of a backlog in Q (topology.Consumer.Priority).
	Priority []string `yaml:"priority,omitempty"`
	// RetryTiers are the delays of the queue's retry tiers, Q.retry.<n>
	// ("10s", "5m"), when not the fabric's default (30s, 5m, 30m).
	RetryTiers []string `yaml:"retryTiers,omitempty"`
}

// findConsumers fills each definition's Consumers from the services'
// queues. Patterns reach events only: commands and jobs are addressed by
// their exact type (topology.Route).
func (r *Registry) findConsumers() {
	for typ, d := range r.defs {
		d.Consumers = nil
		for _, s := range r.services {
			for _, c := range s.Consumes {
				reaches := slices.Contains(c.Priority, typ)
				for _, k := range c.Keys {
					reaches = reaches || k == typ || d.Kind == KindEvent && topic.Match(k, typ)
				}
				if reaches {
					d.Consumers = append(d.Consumers, s.Name+"/"+c.Queue)
				}
			}
		}
		r.defs[typ] = d
	}
}

// Services returns the services the catalog declares, in its order.
func (r *Registry) Services() []Service { return slices.Clone(r.services) }

var serviceName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// checkServices refuses a declaration that could not be deployed: an
// unknown type published or given priority, a service or queue declared
// twice. Whether each key routes to a type is topology's to check, since
// routing is its business.
func (r *Registry) checkServices() error {
	names, queues := map[string]bool{}, map[string]string{}
	for _, s := range r.services {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: service %q: %s", errBadDefinition, s.Name, fmt.Sprintf(format, a...))
		}
		if !serviceName.MatchString(s.Name) {
			return bad("name is not lowercase letters, digits and hyphens")
		}
		if names[s.Name] {
			return bad("declared twice")
		}
		names[s.Name] = true
		if _, ok := sensitivityRank[s.Clearance]; !ok {
			return bad("clearance %q is not PUBLIC|INTERNAL|CONFIDENTIAL|RESTRICTED", s.Clearance)
		}
		for _, t := range s.Publishes {
			if _, ok := r.defs[t]; !ok {
				return bad("publishes %q, which the catalog does not define", t)
			}
		}
		for _, c := range s.Consumes {
			if other, dup := queues[c.Queue]; dup {
				return bad("queue %q is also declared by %q", c.Queue, other)
			}
			queues[c.Queue] = s.Name
			if len(c.Keys) == 0 {
				return bad("queue %q binds no key", c.Queue)
			}
			for _, t := range c.Priority {
				if _, ok := r.defs[t]; !ok {
					return bad("queue %q: priority type %q is not defined", c.Queue, t)
				}
			}
		}
	}
	return nil
}
