package topology

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"gopkg.in/yaml.v3"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/topic"
)

// Platform exchange names (docs/architecture.md). All five are topic
// exchanges, even those whose keys are exact names: the broker's topic
// permissions, which hold each service user to the routing keys it owns
// (deploy/acl), apply to topic exchanges only.
const (
	EventsExchange     = "platform.events"
	CommandsExchange   = "platform.commands"
	WorkExchange       = "platform.work"
	DeadLetterExchange = "platform.dead-letter"
	// RetryExchange carries a consumer's own messages back to its own queues:
	// retries to Q.retry.<n> (key Q.retry.<n>), replays from the DLQ and the
	// end of a retry tier's TTL to Q (key Q). Nothing publishes to a queue
	// through the default exchange.
	RetryExchange = "platform.retry"
)

// defaultRetryTiers are the delays of the retry queues when a consumer names none:
// 30 s, 5 min, 30 min.
var defaultRetryTiers = []time.Duration{30 * time.Second, 5 * time.Minute, 30 * time.Minute}

// DefaultDeliveryLimit bounds broker-side redeliveries of one message on a
// consumer queue. The fabric counts attempts in its own header; this is the
// backstop for a consumer that crashes on a message again and again, set
// explicitly so RabbitMQ 3.10 and 4.x (default 20) behave the same.
const DefaultDeliveryLimit = 10

// dlqDeliveryLimit is set on every DLQ so inspection never loses a letter.
const dlqDeliveryLimit = 1_000_000

// Description is a whole topology.
//
// Name, Codec, Tenant, Events, DeadLetter and Retry let a topology other
// than the platform's name its own exchanges and wire format; left empty
// they are the platform's (the dead-letter exchange platform.dead-letter
// with a DLQ Q.dlq per consumer, the retry exchange platform.retry, the
// agora envelope), so a Description built in Go as before declares exactly
// what it declared before.
type Description struct {
	// Name identifies the system ("platform", "car", "imoveis"); codecs of
	// formats without a producer field use it as the envelope's producer.
	Name string `yaml:"name,omitempty"`
	// Codec names the wire format of the system's messages: "agora" (the
	// platform's envelope, the default), "car" or "imoveis" (package codec).
	Codec string `yaml:"codec,omitempty"`
	// Tenant is the fixed tenant of every message of a format that carries
	// none (required then, refused for agora, which carries its own).
	Tenant string `yaml:"tenant,omitempty"`
	// Events is the exchange the system publishes every message on, keyed
	// as its codec says. Empty for the platform, which routes by kind
	// (events, commands, jobs: Route); required by other codecs.
	Events string `yaml:"events,omitempty"`
	// deadLetter names the dead-letter exchange and the DLQs.
	DeadLetter deadLetter `yaml:"deadLetter,omitempty"`
	// retry names the retry exchange and the default retry tiers.
	Retry     retry      `yaml:"retry,omitempty"`
	Exchanges []Exchange `yaml:"exchanges"`
	Consumers []Consumer `yaml:"consumers"`
}

// deadLetter says where dead letters go. Exchange must be one of the
// description's exchanges (default platform.dead-letter). Queue is the DLQ's
// name: a pattern with "{queue}" for one DLQ per consumer ("{queue}.dlq",
// the default; "car.dlq.{queue}"), bound to the exchange with the
// consumer's queue name as key; or a plain name for one DLQ shared by every
// consumer ("imoveis.dlq"), bound with "#" on a topic exchange (with each
// consumer's queue name on any other). Either way a dead letter names its
// consumer in the x-fabric-consumer header.
type deadLetter struct {
	Exchange string `yaml:"exchange,omitempty"`
	Queue    string `yaml:"queue,omitempty"`
}

// retry says how retries travel. Exchange must be one of the description's
// exchanges and a topic exchange (default platform.retry); retry tier n of
// consumer Q is queue Q.retry.<n>, bound to it with key Q.retry.<n>, and Q
// is bound to it with key Q. Tiers are the delays of consumers that name
// none of their own (default 30 s, 5 min, 30 min).
type retry struct {
	Exchange string     `yaml:"exchange,omitempty"`
	Tiers    []Duration `yaml:"tiers,omitempty"`
}

// dlqPattern is the default DLQ name: one per consumer, Q.dlq.
const dlqPattern = "{queue}.dlq"

// queuePlaceholder stands for the consumer's queue in a DLQ pattern.
const queuePlaceholder = "{queue}"

// Codec names (package codec implements them).
const (
	CodecAgora = "agora"
)

// Exchange is a durable exchange.
type Exchange struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
}

// Binding binds a consumer queue to an exchange with a routing key (or
// pattern, on topic exchanges).
type Binding struct {
	Exchange string `yaml:"exchange"`
	Key      string `yaml:"key"`
}

// Consumer is one consumer queue `<consumer>.<purpose>` with its bindings,
// retry tiers (Q.retry.<n>) and dead-letter queue (Q.dlq).
type Consumer struct {
	Queue    string    `yaml:"queue"`
	Service  string    `yaml:"service"`
	Bindings []Binding `yaml:"bindings"`
	// Priority binds the consumer's priority lane, queue Q.priority (with
	// its own retry tiers and DLQ): what goes ahead of a backlog in Q, since
	// RabbitMQ's quorum queues have no message priorities. The service
	// consumes both queues with one handler, the lane with handlers of its
	// own (the weight). No binding of Q may also match a priority key, or
	// the message would come twice. Description.WithLanes adds the lanes.
	Priority      []Binding  `yaml:"priority,omitempty"`
	RetryTiers    []Duration `yaml:"retryTiers,omitempty"`
	DeliveryLimit int        `yaml:"deliveryLimit,omitempty"`
	// Prefetch is the consumer's window of unacked deliveries when its
	// ConsumerOptions name none (a paced queue takes 1: what waits, waits
	// in the queue, where every instance can take it).
	Prefetch int `yaml:"prefetch,omitempty"`
	// pace, when set, paces the consumer when its ConsumerOptions name no
	// pacer of their own (a local rate limiter, package ratelimit).
	Pace *pace `yaml:"pace,omitempty"`

	// naming is where this consumer's retries and dead letters go, set
	// from its description by Resolve (Load and Apply resolve); the zero
	// value is the platform's.
	naming naming
}

// pace is a rate: PerSecond messages a second, in bursts of at most Burst
// (default 1).
type pace struct {
	PerSecond float64 `yaml:"perSecond"`
	Burst     int     `yaml:"burst,omitempty"`
}

// naming is a consumer's resolved dead-letter and retry names; empty
// fields are the platform's defaults.
type naming struct {
	deadLetterExchange string
	dlq                string // pattern or shared name
	dlqKey             string // binding key of a shared DLQ ("" = the queue's name)
	retryExchange      string
	tiers              []Duration // the description's default tiers
}

// laneSuffix names a consumer's priority lane: Q + laneSuffix.
const laneSuffix = ".priority"

// lane returns the consumer's priority lane, when it has one.
func (c Consumer) lane() (Consumer, bool) {
	if len(c.Priority) == 0 {
		return Consumer{}, false
	}
	return Consumer{Queue: c.Queue + laneSuffix, Service: c.Service, Bindings: c.Priority,
		RetryTiers: c.RetryTiers, DeliveryLimit: c.DeliveryLimit, Prefetch: c.Prefetch, Pace: c.Pace,
		naming: c.naming}, true
}

// WithLanes returns d with every consumer's priority lane added as a
// consumer of its own, so declaring, permissions and lookups treat lanes
// like any other queue.
func (d Description) WithLanes() Description {
	out := d
	out.Consumers = nil
	for _, c := range d.Consumers {
		out.Consumers = append(out.Consumers, c)
		if lane, ok := c.lane(); ok {
			out.Consumers = append(out.Consumers, lane)
		}
	}
	return out
}

// Duration is a time.Duration that reads "30s" / "5m" in YAML.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("duration %q: %w", n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Tiers returns the consumer's retry delays: its own, else its
// description's, else the platform's defaults.
func (c Consumer) Tiers() []time.Duration {
	tiers := c.RetryTiers
	if len(tiers) == 0 {
		tiers = c.naming.tiers
	}
	if len(tiers) == 0 {
		return append([]time.Duration(nil), defaultRetryTiers...)
	}
	out := make([]time.Duration, len(tiers))
	for i, d := range tiers {
		out[i] = time.Duration(d)
	}
	return out
}

// RetryQueue returns the name of retry tier n (1-based).
func (c Consumer) RetryQueue(n int) string { return retryQueueName(c.Queue, n) }

// DLQ returns the consumer's dead-letter queue name: Q.dlq on the
// platform, else its description's DLQ pattern (or shared DLQ).
func (c Consumer) DLQ() string {
	if c.naming.dlq == "" {
		return dlqName(c.Queue)
	}
	return strings.Replace(c.naming.dlq, queuePlaceholder, c.Queue, 1)
}

// SharedDLQ reports whether the consumer's DLQ is shared with the other
// consumers of its description (a DLQ name without "{queue}").
func (c Consumer) SharedDLQ() bool {
	return c.naming.dlq != "" && !strings.Contains(c.naming.dlq, queuePlaceholder)
}

// DeadLetterExchange returns the exchange the consumer's dead letters are
// published to, with its queue name as key: platform.dead-letter unless its
// description names another.
func (c Consumer) DeadLetterExchange() string {
	if c.naming.deadLetterExchange == "" {
		return DeadLetterExchange
	}
	return c.naming.deadLetterExchange
}

// RetryExchange returns the exchange the consumer's retries (key
// Q.retry.<n>) and returns to its queue (key Q) travel on: platform.retry
// unless its description names another.
func (c Consumer) RetryExchange() string {
	if c.naming.retryExchange == "" {
		return RetryExchange
	}
	return c.naming.retryExchange
}

// retryQueueName is `<queue>.retry.<n>`.
func retryQueueName(queue string, n int) string { return queue + ".retry." + strconv.Itoa(n) }

// dlqName is `<queue>.dlq`.
func dlqName(queue string) string { return queue + ".dlq" }

// limit returns the consumer's delivery limit or the default.
func (c Consumer) limit() int {
	if c.DeliveryLimit <= 0 {
		return DefaultDeliveryLimit
	}
	return c.DeliveryLimit
}

// Consumer returns the consumer named queue.
func (d Description) Consumer(queue string) (Consumer, bool) {
	for _, c := range d.Consumers {
		if c.Queue == queue {
			return c, true
		}
	}
	return Consumer{}, false
}

// ConsumersOf returns the consumers of service, priority lanes included, in
// the description's order: the queues the host declares for it.
func (d Description) ConsumersOf(service string) []Consumer {
	var out []Consumer
	for _, c := range d.Consumers {
		if c.Service == service {
			out = append(out, c)
		}
	}
	return out
}

// PlatformExchanges are the five exchanges every topology has.
func PlatformExchanges() []Exchange {
	return []Exchange{
		{Name: EventsExchange, Type: amqp.ExchangeTopic},
		{Name: CommandsExchange, Type: amqp.ExchangeTopic},
		{Name: WorkExchange, Type: amqp.ExchangeTopic},
		{Name: DeadLetterExchange, Type: amqp.ExchangeTopic},
		{Name: RetryExchange, Type: amqp.ExchangeTopic},
	}
}

func durations(ds []time.Duration) []Duration {
	out := make([]Duration, len(ds))
	for i, d := range ds {
		out[i] = Duration(d)
	}
	return out
}

// Resolve returns d with each consumer carrying its description's naming
// (dead-letter exchange, DLQ, retry exchange, default tiers), so that
// Consumer.DLQ, RetryQueue, Queues, FabricBindings and the consumer's
// retries and dead letters use them. Fields d leaves empty leave the
// consumers' naming as it was (the platform's, for a consumer built in Go).
// Load, Platform and Apply resolve; a description built in Go with its own
// deadLetter or Retry should be resolved before its consumers are handed
// to the fabric.
func (d Description) Resolve() Description {
	out := d
	out.Consumers = make([]Consumer, len(d.Consumers))
	dlqKey := ""
	if d.DeadLetter.Queue != "" && !strings.Contains(d.DeadLetter.Queue, queuePlaceholder) {
		dlx := d.DeadLetter.Exchange
		if dlx == "" {
			dlx = DeadLetterExchange
		}
		for _, e := range d.Exchanges {
			if e.Name == dlx && e.Type == amqp.ExchangeTopic {
				dlqKey = "#"
			}
		}
	}
	for i, c := range d.Consumers {
		if d.DeadLetter.Exchange != "" {
			c.naming.deadLetterExchange = d.DeadLetter.Exchange
		}
		if d.DeadLetter.Queue != "" {
			c.naming.dlq = d.DeadLetter.Queue
			c.naming.dlqKey = dlqKey
		}
		if d.Retry.Exchange != "" {
			c.naming.retryExchange = d.Retry.Exchange
		}
		if len(d.Retry.Tiers) > 0 {
			c.naming.tiers = append([]Duration(nil), d.Retry.Tiers...)
		}
		out.Consumers[i] = c
	}
	return out
}

// Load reads a YAML description (docs/topologies.md), validates it and
// resolves its naming. Exchanges default to the platform's five when the
// file lists none and names no exchange of its own.
func Load(data []byte) (Description, error) {
	var d Description
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return Description{}, fmt.Errorf("topology: parse: %w", err)
	}
	if len(d.Exchanges) == 0 && d.DeadLetter.Exchange == "" && d.Retry.Exchange == "" && d.Events == "" {
		d.Exchanges = PlatformExchanges()
	}
	if err := d.Validate(); err != nil {
		return Description{}, err
	}
	return d.WithLanes().Resolve(), nil
}

// LoadFile reads a YAML description from path.
func LoadFile(path string) (Description, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Description{}, fmt.Errorf("topology: %w", err)
	}
	d, err := Load(data)
	if err != nil {
		return Description{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

var queuePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$`)

var codecPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// errInvalid is wrapped by every validation error.
var errInvalid = errors.New("invalid topology")

// Validate checks names, exchange references, tiers, the dead-letter and
// retry naming, and the codec's tenant and exchange.
func (d Description) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("topology: %w: %s", errInvalid, fmt.Sprintf(format, a...))
	}
	dlx, retryEx := d.DeadLetter.Exchange, d.Retry.Exchange
	if dlx == "" {
		dlx = DeadLetterExchange
	}
	if retryEx == "" {
		retryEx = RetryExchange
	}
	ex := map[string]string{}
	for _, e := range d.Exchanges {
		switch e.Type {
		case amqp.ExchangeTopic, amqp.ExchangeDirect, amqp.ExchangeFanout, amqp.ExchangeHeaders:
		default:
			return bad("exchange %q: type %q", e.Name, e.Type)
		}
		if _, dup := ex[e.Name]; dup {
			return bad("exchange %q declared twice", e.Name)
		}
		if e.Name == retryEx && e.Type != amqp.ExchangeTopic {
			return bad("exchange %s must be a topic exchange (topic permissions restrict its keys), not %q", retryEx, e.Type)
		}
		ex[e.Name] = e.Type
	}
	if _, ok := ex[dlx]; !ok {
		return bad("exchange %s is required: every DLQ is bound to it", dlx)
	}
	if _, ok := ex[retryEx]; !ok {
		return bad("exchange %s is required: retries and replays travel on it", retryEx)
	}
	if err := d.validateFormat(ex, bad); err != nil {
		return err
	}
	if q := d.DeadLetter.Queue; q != "" {
		if n := strings.Count(q, queuePlaceholder); n > 1 || !queuePattern.MatchString(strings.Replace(q, queuePlaceholder, "q.q", 1)) {
			return bad("deadLetter.queue %q is neither a queue name nor a pattern with one %s", q, queuePlaceholder)
		}
	}
	for i, t := range d.Retry.Tiers {
		if t <= 0 {
			return bad("retry tier %d must be positive", i+1)
		}
	}
	r := d.Resolve()
	seen := map[string]bool{}
	fabricQueues := map[string]string{} // a DLQ or retry queue → its consumer
	for _, c := range r.Consumers {
		if !queuePattern.MatchString(c.Queue) {
			return bad("queue %q is not <consumer>.<purpose>", c.Queue)
		}
		if strings.HasSuffix(c.Queue, ".dlq") || strings.Contains(c.Queue, ".retry.") {
			return bad("queue %q uses a reserved suffix", c.Queue)
		}
		if seen[c.Queue] {
			return bad("queue %q declared twice", c.Queue)
		}
		seen[c.Queue] = true
		if len(c.Bindings) == 0 {
			return bad("queue %q has no binding", c.Queue)
		}
		for _, b := range c.Bindings {
			if _, ok := ex[b.Exchange]; !ok {
				return bad("queue %q binds to undeclared exchange %q", c.Queue, b.Exchange)
			}
			if b.Key == "" {
				return bad("queue %q: binding to %q has no key", c.Queue, b.Exchange)
			}
		}
		if _, ok := ex[c.DeadLetterExchange()]; !ok {
			return bad("queue %q dead-letters to undeclared exchange %q", c.Queue, c.DeadLetterExchange())
		}
		if t, ok := ex[c.RetryExchange()]; !ok || t != amqp.ExchangeTopic {
			return bad("queue %q retries through %q, which is not a declared topic exchange", c.Queue, c.RetryExchange())
		}
		for i, t := range c.RetryTiers {
			if t <= 0 {
				return bad("queue %q: retry tier %d must be positive", c.Queue, i+1)
			}
		}
		if c.Prefetch < 0 {
			return bad("queue %q: prefetch %d is negative", c.Queue, c.Prefetch)
		}
		if c.Pace != nil && (c.Pace.PerSecond <= 0 || c.Pace.Burst < 0) {
			return bad("queue %q: pace needs a positive perSecond and a burst ≥ 0", c.Queue)
		}
		owned := []string{c.DLQ()}
		for n := range c.Tiers() {
			owned = append(owned, c.RetryQueue(n+1))
		}
		for _, q := range owned {
			if other, ok := fabricQueues[q]; ok && !(q == c.DLQ() && c.SharedDLQ()) {
				return bad("queues %q and %q would share fabric queue %q", other, c.Queue, q)
			}
			fabricQueues[q] = c.Queue
		}
		for _, p := range c.Priority {
			if _, ok := ex[p.Exchange]; !ok {
				return bad("queue %q: priority binding to undeclared exchange %q", c.Queue, p.Exchange)
			}
			if strings.ContainsAny(p.Key, "*#") {
				return bad("queue %q: priority key %q: name the types themselves", c.Queue, p.Key)
			}
			for _, b := range c.Bindings {
				if b.Exchange == p.Exchange && topic.Match(b.Key, p.Key) {
					return bad("queue %q: binding %q also matches priority key %q (it would arrive twice)", c.Queue, b.Key, p.Key)
				}
			}
		}
	}
	for q, owner := range fabricQueues {
		if seen[q] {
			return bad("queue %q is also a DLQ or retry queue of %q", q, owner)
		}
	}
	return nil
}

// validateFormat checks the codec's needs: a format without a tenant gets
// a fixed one, and a system other than the platform names its exchange.
func (d Description) validateFormat(ex map[string]string, bad func(string, ...any) error) error {
	codec := d.Codec
	if codec == "" {
		codec = CodecAgora
	}
	if !codecPattern.MatchString(codec) {
		return bad("codec %q is not a lowercase name", codec)
	}
	if d.Events != "" {
		if _, ok := ex[d.Events]; !ok {
			return bad("events exchange %q is not declared", d.Events)
		}
	}
	if codec == CodecAgora {
		if d.Tenant != "" {
			return bad("tenant %q: the agora envelope carries its own tenant; a fixed tenant is for formats without one", d.Tenant)
		}
		return nil
	}
	if d.Name == "" {
		return bad("codec %s needs the topology's name", codec)
	}
	if !envelope.ValidTenant(d.Tenant) {
		return bad("codec %s carries no tenant: the topology must state a fixed tenant (lowercase letters, digits, hyphens), not %q", codec, d.Tenant)
	}
	if d.Events == "" {
		return bad("codec %s: events must name the exchange the system publishes on", codec)
	}
	return nil
}

// queueSpec is one queue to declare with its arguments, and the broker
// policy that carries what may change without redeclaring it.
type queueSpec struct {
	Name string
	// Args are what the queue is declared with: what never changes and
	// what must hold before any policy exists (docs/topologies.md,
	// "Changing retry tiers and queue settings").
	Args amqp.Table
	// Policy is the broker policy of the queue (a retry tier's delay), set
	// by `fabricctl topology apply` and the definitions file, not by the
	// services that declare the queue; nil when the queue has none.
	Policy *queuePolicy
}

// Queues returns, for consumer c, its DLQ, retry tiers and main queue, in
// declaration order, with their exact arguments and policies.
//
// A retry tier's delay is not an argument: arguments cannot change on an
// existing queue, and for message-ttl the lower of argument and policy
// wins, so a tier declared with it could never be lengthened. The delay is
// the tier's policy (message-ttl) and, first of all, the per-message
// expiration the consumer gives each retry, which holds with or without
// the policy (broker.Consumer). Everything that decides whether a message
// can be lost stays an argument: the queue type, dead-lettering (arguments
// win over policies for it) and its at-least-once strategy with
// reject-publish overflow, and the delivery limits.
func (c Consumer) Queues() []queueSpec {
	// At-least-once dead-lettering (quorum only) needs reject-publish
	// overflow; without it the broker may drop a message while moving it.
	safeDLX := func(exchange, key string) amqp.Table {
		return amqp.Table{
			"x-queue-type":              "quorum",
			"x-dead-letter-exchange":    exchange,
			"x-dead-letter-routing-key": key,
			"x-dead-letter-strategy":    "at-least-once",
			"x-overflow":                "reject-publish",
		}
	}
	// Inspecting a DLQ returns messages to it; on RabbitMQ 4.x a quorum
	// queue's default delivery limit (20) would then drop them (no DLX).
	// An explicit, unreachable limit keeps dead letters until an operator acts.
	out := []queueSpec{{Name: c.DLQ(), Args: amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(dlqDeliveryLimit)}}}
	for i, d := range c.Tiers() {
		// Back to Q alone through platform.retry, where only Q is bound
		// with key Q: never through platform.events, which would hand it
		// to every other consumer, and not through the default exchange,
		// since declaring a queue whose DLX is "" needs write permission on
		// it (see Apply for retry queues declared that way before). The
		// delay is the tier's policy, not an argument (see above; Apply
		// keeps tiers declared with x-message-ttl before, and `fabricctl
		// topology apply` upgrades them).
		q := c.RetryQueue(i + 1)
		out = append(out, queueSpec{Name: q, Args: safeDLX(c.RetryExchange(), c.Queue), Policy: tierPolicy(q, d)})
	}
	main := safeDLX(c.DeadLetterExchange(), c.Queue)
	main["x-delivery-limit"] = int64(c.limit())
	return append(out, queueSpec{Name: c.Queue, Args: main})
}

// QueueBinding binds Queue to Exchange with Key.
type QueueBinding struct {
	Queue, Exchange, Key string
}

// FabricBindings are the bindings the fabric itself needs for c, besides
// c.Bindings: Q.dlq to platform.dead-letter with key Q, each retry tier
// Q.retry.<n> to platform.retry with key Q.retry.<n> (retries), and Q to
// platform.retry with key Q (the end of a retry tier, DLQ replay) — or the
// exchanges and DLQ its description names (a shared DLQ on a topic
// exchange is bound with "#").
func (c Consumer) FabricBindings() []QueueBinding {
	dlqKey := c.Queue
	if c.SharedDLQ() && c.naming.dlqKey != "" {
		dlqKey = c.naming.dlqKey
	}
	retry := c.RetryExchange()
	out := []QueueBinding{{Queue: c.DLQ(), Exchange: c.DeadLetterExchange(), Key: dlqKey}}
	for n := range c.Tiers() {
		q := c.RetryQueue(n + 1)
		out = append(out, QueueBinding{Queue: q, Exchange: retry, Key: q})
	}
	return append(out, QueueBinding{Queue: c.Queue, Exchange: retry, Key: c.Queue})
}
