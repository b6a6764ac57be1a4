// Package acl computes the platform's least-privilege broker permissions: one
// RabbitMQ user per service, with configure/write/read regexes and topic
// permissions derived from the fabric topology (who consumes which queue) and
// the message catalogue (which exchange and routing key each published type
// travels on). It is the one declarative source behind
// deploy/rabbitmq/definitions.json, the Helm chart's broker secret and the ACL
// matrix test.
//
// What each AMQP 0-9-1 operation checks (RabbitMQ access-control guide):
//
//	exchange.declare / exchange.delete   configure on the exchange
//	queue.declare / queue.delete         configure on the queue
//	queue.declare of a NEW queue w/ DLX  + write on the DLX, read on the queue
//	                                     (a redeclaration checks neither)
//	queue.bind / queue.unbind            write on the queue, read on the exchange
//	                                     (+ topic read on the binding key, topic exchanges)
//	basic.publish                        write on the exchange ("" is checked as
//	                                     "amq.default"; + topic write on the
//	                                     routing key, topic exchanges)
//	basic.consume / basic.get / purge    read on the queue
//	dead-lettering, TTL expiry           nothing (broker-internal)
//
// No user may write on the default exchange, which reaches every queue of
// the vhost. A consumer's retries (key Q.retry.<n>) and DLQ replays (key Q)
// travel on platform.retry, a topic exchange, and its retry tiers dead-letter
// there with key Q. Each service user may write to and bind from
// platform.retry with its own queues' keys only (topic permissions); a
// consumer's queues need write and read on it (publish; bind, and the DLX
// check when its retry queues are first declared).
//
// Permission regexes are unanchored in RabbitMQ, so every regex built here is
// `^(a|b|c)$` over regex-quoted names (or patterns, for retry tiers).
package acl

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Vhost is the platform's virtual host.
const Vhost = "agora"

// DefaultExchange is the name RabbitMQ checks permissions against when a
// client publishes to the default exchange "". No user is granted it.
const DefaultExchange = "amq.default"

// Service is one platform service's messaging footprint that the topology
// cannot tell: the message types it publishes. What it consumes comes from
// the topology's consumers whose Service is Name.
type Service struct {
	// Name is the service (and broker user) name, e.g. "document-worker".
	Name string
	// Publishes lists the message types the service publishes; the exchange
	// and routing key of each come from the catalogue via topology.Route.
	Publishes []string
}

// PlatformServices returns the services the catalogue declares and what
// each publishes (catalog.yaml, services:). A type nobody declares
// publishing is granted to no one.
func PlatformServices(reg *registry.Registry) []Service {
	var out []Service
	for _, s := range reg.Services() {
		out = append(out, Service{Name: s.Name, Publishes: s.Publishes})
	}
	return out
}

// Grant is what one service may do on the broker, as sets of names. The
// regexes are derived from it; tests use the sets as the expected policy.
type Grant struct {
	Service string
	// Consumers are the topology consumers the service owns.
	Consumers []topology.Consumer
	// Queues are every queue the service owns: Q, Q.retry.<n>, Q.dlq.
	Queues []string
	// ConfigureExchanges may be (re)declared (and, as RabbitMQ cannot
	// tell declare from delete, deleted). Empty for services: the platform
	// exchanges come from the definitions (owned by agora-admin) and the
	// fabric only checks them passively, which needs no permission.
	ConfigureExchanges []string
	// WriteExchanges may be published to. Never DefaultExchange.
	WriteExchanges []string
	// ReadExchanges may be bound from.
	ReadExchanges []string
	// PublishKeys are the routing keys per exchange the service publishes with.
	PublishKeys map[string][]string
	// BindKeys are the binding keys per exchange the service binds with.
	// platform.retry is not among them: there a consumer's keys are its own
	// queues' names, Q.retry.<n> for any n (TopicPermissions).
	BindKeys map[string][]string
}

// Consumes reports whether the service owns at least one queue.
func (g Grant) Consumes() bool { return len(g.Consumers) > 0 }

// Permissions are the three vhost permission regexes.
type Permissions struct {
	Configure, Write, Read string
}

// TopicPermission restricts routing keys on one topic exchange.
type TopicPermission struct {
	Exchange    string
	Write, Read string
}

// Permissions returns the anchored regexes for g. A consumer's queue Q and
// Q.dlq are granted by name, its retry queues as Q.retry.<n> for any n: how
// many tiers a consumer has is configuration (RETRY_TIERS in tests and
// demos), which queues belong to whom is the grant.
func (g Grant) Permissions() Permissions {
	var own []string
	for _, c := range g.Consumers {
		own = append(own, regexp.QuoteMeta(c.Queue), regexp.QuoteMeta(c.DLQ()), retryTierPattern(c.Queue))
	}
	with := func(exchanges []string) string {
		return anchoredPatterns(append(slices.Clone(own), quoteAll(exchanges)...))
	}
	return Permissions{
		Configure: with(g.ConfigureExchanges),
		Write:     with(g.WriteExchanges),
		Read:      with(g.ReadExchanges),
	}
}

// TopicPermissions returns g's routing-key restrictions on the platform's
// topic exchanges (all but platform.retry's are keyed by what the catalog
// says the service sends and binds); every user gets an entry for each,
// because without one RabbitMQ allows every key. On platform.events,
// platform.commands and platform.work: the types g publishes and the keys
// its queues bind with. On platform.dead-letter: its own queues' names, for
// writing (a consumer's dead letters, key Q) and binding (its DLQs) alike,
// so no service can put a letter in another's DLQ. On platform.retry,
// likewise: Q and Q.retry.<n> (any n ≥ 1) of g's own consumers. A service
// that consumes nothing gets no key on the last two.
func (g Grant) TopicPermissions() []TopicPermission {
	var retry []string
	for _, c := range g.Consumers {
		retry = append(retry, regexp.QuoteMeta(c.Queue), retryTierPattern(c.Queue))
	}
	retryKeys := noKey
	if len(retry) > 0 {
		retryKeys = anchoredPatterns(retry)
	}
	var out []TopicPermission
	for _, ex := range []string{topology.EventsExchange, topology.CommandsExchange, topology.WorkExchange, topology.DeadLetterExchange} {
		out = append(out, TopicPermission{Exchange: ex, Write: anchoredKeys(g.PublishKeys[ex]), Read: anchoredKeys(g.BindKeys[ex])})
	}
	return append(out, TopicPermission{Exchange: topology.RetryExchange, Write: retryKeys, Read: retryKeys})
}

// retryTierPattern matches the names of queue's retry tiers, Q.retry.<n> for
// any n ≥ 1 (unanchored; anchoredPatterns anchors it).
func retryTierPattern(queue string) string {
	return regexp.QuoteMeta(queue) + `\.retry\.[1-9][0-9]*`
}

// Anchored returns `^(n1|n2|…)$` over the sorted, de-duplicated, regex-quoted
// names, or `^$` (RabbitMQ's "nothing") when names is empty. RabbitMQ checks
// the default exchange "" as "amq.default", so `^$` never matches a real
// resource.
func Anchored(names []string) string { return anchoredPatterns(quoteAll(names)) }

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = regexp.QuoteMeta(n)
	}
	return out
}

// anchoredPatterns is `^(p1|p2|…)$` over the sorted, de-duplicated
// patterns, or `^$` when there are none.
func anchoredPatterns(patterns []string) string {
	set := uniq(patterns)
	if len(set) == 0 {
		return "^$"
	}
	return "^(" + strings.Join(set, "|") + ")$"
}

// anchoredKeys is Anchored for routing keys, where the empty key is real: a
// publish with key "" must not pass, so the empty set is a regex that
// matches nothing at all: an empty character class, which both RabbitMQ's
// PCRE and Go's RE2 (the tests) accept.
func anchoredKeys(keys []string) string {
	if len(uniq(keys)) == 0 {
		return noKey
	}
	return Anchored(keys)
}

// noKey matches no routing key, not even "".
const noKey = `^[^\s\S]$`

func uniq(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

// Policy is the platform's broker access: the topology it was computed from
// and one grant per service, in service order.
type Policy struct {
	Topology topology.Description
	Grants   []Grant
}

// Grant returns the grant of service.
func (p Policy) Grant(service string) (Grant, bool) {
	for _, g := range p.Grants {
		if g.Service == service {
			return g, true
		}
	}
	return Grant{}, false
}

// ErrPolicy is wrapped by every error Build returns.
var ErrPolicy = errors.New("acl: inconsistent policy inputs")

// Build computes the grants of services over topo, routing published types
// through reg. It fails when a published type is not in the catalogue, when a
// topology consumer belongs to no listed service, or when a service is listed
// twice.
func Build(topo topology.Description, reg *registry.Registry, services []Service) (Policy, error) {
	if err := topo.Validate(); err != nil {
		return Policy{}, fmt.Errorf("acl: %w", err)
	}
	p := Policy{Topology: topo}
	index := map[string]int{}
	for _, s := range services {
		if _, dup := index[s.Name]; dup {
			return Policy{}, fmt.Errorf("%w: service %q listed twice", ErrPolicy, s.Name)
		}
		index[s.Name] = len(p.Grants)
		g := Grant{
			Service:     s.Name,
			PublishKeys: map[string][]string{},
			BindKeys:    map[string][]string{},
		}
		for _, typ := range s.Publishes {
			def, ok := reg.Lookup(typ)
			if !ok {
				return Policy{}, fmt.Errorf("%w: %s publishes %q, which is not in the catalogue", ErrPolicy, s.Name, typ)
			}
			ex, key := topology.Route(def)
			g.WriteExchanges = append(g.WriteExchanges, ex)
			g.PublishKeys[ex] = append(g.PublishKeys[ex], key)
		}
		p.Grants = append(p.Grants, g)
	}
	for _, c := range topo.Consumers {
		i, ok := index[c.Service]
		if !ok {
			return Policy{}, fmt.Errorf("%w: queue %q belongs to service %q, which is not listed", ErrPolicy, c.Queue, c.Service)
		}
		g := &p.Grants[i]
		g.Consumers = append(g.Consumers, c)
		for _, q := range c.Queues() {
			g.Queues = append(g.Queues, q.Name)
		}
		// Retries go to the consumer's own Q.retry.<n> and replays to Q
		// through platform.retry (topic permissions hold the keys to the
		// service's own, TopicPermissions), dead letters to
		// platform.dead-letter with key Q. Declaring a new queue with a DLX
		// needs write on that exchange too (retry tiers: platform.retry;
		// Q: platform.dead-letter). The fabric binds Q.dlq, Q and its retry
		// tiers from both (FabricBindings). Nothing is granted on the
		// default exchange.
		g.WriteExchanges = append(g.WriteExchanges, topology.RetryExchange, topology.DeadLetterExchange)
		g.ReadExchanges = append(g.ReadExchanges, topology.RetryExchange, topology.DeadLetterExchange)
		g.BindKeys[topology.DeadLetterExchange] = append(g.BindKeys[topology.DeadLetterExchange], c.Queue)
		g.PublishKeys[topology.DeadLetterExchange] = append(g.PublishKeys[topology.DeadLetterExchange], c.Queue)
		for _, b := range c.Bindings {
			g.ReadExchanges = append(g.ReadExchanges, b.Exchange)
			g.BindKeys[b.Exchange] = append(g.BindKeys[b.Exchange], b.Key)
		}
	}
	for i := range p.Grants {
		g := &p.Grants[i]
		g.Queues = uniq(g.Queues)
		g.ConfigureExchanges = uniq(g.ConfigureExchanges)
		g.WriteExchanges = uniq(g.WriteExchanges)
		g.ReadExchanges = uniq(g.ReadExchanges)
		for k, v := range g.PublishKeys {
			g.PublishKeys[k] = uniq(v)
		}
		for k, v := range g.BindKeys {
			g.BindKeys[k] = uniq(v)
		}
	}
	return p, nil
}

// Platform builds the policy of the fabric's embedded catalogue: its
// services' grants over the topology derived from it (topology.Platform).
func Platform() (Policy, error) {
	reg, err := registry.Default()
	if err != nil {
		return Policy{}, fmt.Errorf("acl: %w", err)
	}
	return Build(topology.Platform(), reg, PlatformServices(reg))
}
