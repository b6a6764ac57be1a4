// Package topology declares the platform's exchanges, consumer queues, retry
// tiers and dead-letter queues from a description (a Go value or YAML).
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
)

// Platform exchange names (docs/architecture.md).
const (
	EventsExchange     = "platform.events"
	CommandsExchange   = "platform.commands"
	WorkExchange       = "platform.work"
	DeadLetterExchange = "platform.dead-letter"
	// RetryExchange carries a consumer's own messages back to its own queues:
	// retries to Q.retry.<n> (key Q.retry.<n>), replays from the DLQ and the
	// end of a retry tier's TTL to Q (key Q). It is a topic exchange so that
	// the broker's topic permissions can hold each service user to its own
	// keys (direct exchanges have none); nothing publishes to a queue through
	// the default exchange.
	RetryExchange = "platform.retry"
)

// DefaultRetryTiers are the delays of the retry queues when a consumer names none.
var defaultRetryTiers = []time.Duration{30 * time.Second, 5 * time.Minute, 30 * time.Minute}

// DefaultRetryTiers returns the platform's default retry delays: 30 s, 5 min, 30 min.
func DefaultRetryTiers() []time.Duration { return append([]time.Duration(nil), defaultRetryTiers...) }

// DefaultDeliveryLimit bounds broker-side redeliveries of one message on a
// consumer queue. The fabric counts attempts in its own header; this is the
// backstop for a consumer that crashes on a message again and again, set
// explicitly so RabbitMQ 3.10 and 4.x (default 20) behave the same.
const DefaultDeliveryLimit = 10

// DLQDeliveryLimit is set on every DLQ so inspection never loses a letter.
const DLQDeliveryLimit = 1_000_000

// Description is a whole topology.
type Description struct {
	Exchanges []Exchange `yaml:"exchanges"`
	Consumers []Consumer `yaml:"consumers"`
}

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
	RetryTiers    []Duration `yaml:"retryTiers"`
	DeliveryLimit int        `yaml:"deliveryLimit"`
}

// LaneSuffix names a consumer's priority lane: Q + LaneSuffix.
const LaneSuffix = ".priority"

// Lane returns the consumer's priority lane, when it has one.
func (c Consumer) Lane() (Consumer, bool) {
	if len(c.Priority) == 0 {
		return Consumer{}, false
	}
	return Consumer{Queue: c.Queue + LaneSuffix, Service: c.Service, Bindings: c.Priority,
		RetryTiers: c.RetryTiers, DeliveryLimit: c.DeliveryLimit}, true
}

// WithLanes returns d with every consumer's priority lane added as a
// consumer of its own, so declaring, permissions and lookups treat lanes
// like any other queue.
func (d Description) WithLanes() Description {
	out := d
	out.Consumers = nil
	for _, c := range d.Consumers {
		out.Consumers = append(out.Consumers, c)
		if lane, ok := c.Lane(); ok {
			out.Consumers = append(out.Consumers, lane)
		}
	}
	return out
}

// TopicMatch reports whether a topic exchange routes key to a binding of
// pattern ("*" one word, "#" zero or more).
func TopicMatch(pattern, key string) bool {
	return topicMatch(strings.Split(pattern, "."), strings.Split(key, "."))
}

func topicMatch(p, k []string) bool {
	if len(p) == 0 {
		return len(k) == 0
	}
	switch p[0] {
	case "#":
		for i := 0; i <= len(k); i++ {
			if topicMatch(p[1:], k[i:]) {
				return true
			}
		}
		return false
	case "*":
		return len(k) > 0 && topicMatch(p[1:], k[1:])
	}
	return len(k) > 0 && p[0] == k[0] && topicMatch(p[1:], k[1:])
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

// Tiers returns the consumer's retry delays, or the defaults.
func (c Consumer) Tiers() []time.Duration {
	if len(c.RetryTiers) == 0 {
		return DefaultRetryTiers()
	}
	out := make([]time.Duration, len(c.RetryTiers))
	for i, d := range c.RetryTiers {
		out[i] = time.Duration(d)
	}
	return out
}

// RetryQueue returns the name of retry tier n (1-based).
func (c Consumer) RetryQueue(n int) string { return RetryQueueName(c.Queue, n) }

// DLQ returns the consumer's dead-letter queue name.
func (c Consumer) DLQ() string { return DLQName(c.Queue) }

// RetryQueueName is `<queue>.retry.<n>`.
func RetryQueueName(queue string, n int) string { return queue + ".retry." + strconv.Itoa(n) }

// DLQName is `<queue>.dlq`.
func DLQName(queue string) string { return queue + ".dlq" }

// Limit returns the consumer's delivery limit or the default.
func (c Consumer) Limit() int {
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

// Lookup returns the consumers named queues, in that order: the queues
// a service declares at start-up. A queue the description lacks is an
// error naming it, since a service must not start without its queue.
func (d Description) Lookup(queues ...string) ([]Consumer, error) {
	out := make([]Consumer, 0, len(queues))
	for _, q := range queues {
		c, ok := d.Consumer(q)
		if !ok {
			return nil, fmt.Errorf("topology has no queue %s", q)
		}
		out = append(out, c)
	}
	return out, nil
}

// PlatformExchanges are the five exchanges every topology has.
func PlatformExchanges() []Exchange {
	return []Exchange{
		{Name: EventsExchange, Type: amqp.ExchangeTopic},
		{Name: CommandsExchange, Type: amqp.ExchangeDirect},
		{Name: WorkExchange, Type: amqp.ExchangeDirect},
		{Name: DeadLetterExchange, Type: amqp.ExchangeDirect},
		{Name: RetryExchange, Type: amqp.ExchangeTopic},
	}
}

// Platform returns the platform's topology: the five exchanges, the six
// initial consumer queues of docs/architecture.md, the data lake's queue for
// the other domains' events, the command and job queues, and the request
// service's workflow-events queue, all with default retry tiers.
func Platform() Description {
	ev := func(keys ...string) []Binding {
		var b []Binding
		for _, k := range keys {
			b = append(b, Binding{Exchange: EventsExchange, Key: k})
		}
		return b
	}
	return Description{
		Exchanges: PlatformExchanges(),
		Consumers: []Consumer{
			{Queue: "workflow.request-submitted", Service: "workflow", Bindings: ev("request.submitted.v1")},
			{Queue: "workflow.request-cancelled", Service: "workflow", Bindings: ev("request.cancelled.v1")},
			{Queue: "communication.request-submitted", Service: "communication", Bindings: ev("request.submitted.v1")},
			{Queue: "communication.request-status", Service: "communication", Bindings: ev("request.status-changed.v1")},
			{Queue: "analytics.request-events", Service: "analytics", Bindings: ev("request.#")},
			{Queue: "datalake.request-events", Service: "datalake-ingestion", Bindings: ev("request.#")},
			{Queue: "document.processing", Service: "document-worker", Bindings: ev("document.uploaded.v1")},
			{Queue: "ai.knowledge-builder", Service: "ai-builder", Bindings: []Binding{{Exchange: CommandsExchange, Key: "ai.knowledge.index.v1"}}},
			// The data lake keeps every tenant domain event, so no event type
			// is left without a subscriber (an unroutable event never leaves
			// its outbox).
			{Queue: "datalake.platform-events", Service: "datalake-ingestion", Bindings: ev(
				"workflow.#", "task.#", "communication.#", "document.#", "ai.#", "citizen.#", "appointment.#", "platform.#", "catalog.#")},
			// Channel adapters (SMS, WhatsApp, email) are fed by commands.
			{Queue: "communication.send-commands", Service: "communication", Bindings: []Binding{{Exchange: CommandsExchange, Key: "communication.send.v1"}}},
			// Commands and jobs, each with its competing workers: an operator
			// reprocesses a document, an integration starts a process, the
			// workflow registers a decided request in SEI, analytics exports
			// a report.
			{Queue: "document.process-commands", Service: "document-worker", Bindings: []Binding{{Exchange: CommandsExchange, Key: "document.process.v1"}}},
			{Queue: "workflow.start-commands", Service: "workflow", Bindings: []Binding{{Exchange: CommandsExchange, Key: "workflow.start.v1"}}},
			{Queue: "workflow.sei-register", Service: "workflow", Bindings: []Binding{{Exchange: CommandsExchange, Key: "integration.sei.register.v1"}}},
			{Queue: "analytics.report-export", Service: "analytics", Bindings: []Binding{{Exchange: WorkExchange, Key: "report.export.v1"}}},
			// The reactive fabric: the workflow evaluates its tenants' active
			// subscriptions on these types (the only ones a subscription may
			// name, so none is accepted that could never fire).
			{Queue: "workflow.reactions", Service: "workflow", Bindings: ev(
				"workflow.stuck.v1", "task.sla-breached.v1", "document.processed.v1", "document.validated.v1",
				"workflow.schedule-fired.v1", "catalog.service-updated.v1")},
			// The request service keeps the status a citizen sees current.
			// Alerts (an SLA breach, a stuck process) go ahead of a backlog
			// of ordinary progress in their priority lane.
			{Queue: "request.workflow-events", Service: "request",
				Bindings: ev("workflow.process-started.v1", "workflow.task-completed.v1", "workflow.process-completed.v1"),
				Priority: ev("task.sla-breached.v1", "workflow.stuck.v1")},
		},
	}.WithLanes()
}

// Load reads a YAML description. Exchanges default to the platform's five
// when the file lists none.
func Load(data []byte) (Description, error) {
	var d Description
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return Description{}, fmt.Errorf("topology: parse: %w", err)
	}
	if len(d.Exchanges) == 0 {
		d.Exchanges = PlatformExchanges()
	}
	if err := d.Validate(); err != nil {
		return Description{}, err
	}
	return d.WithLanes(), nil
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

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid topology")

// Validate checks names, exchange references and tiers.
func (d Description) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("topology: %w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	ex := map[string]bool{}
	for _, e := range d.Exchanges {
		switch e.Type {
		case amqp.ExchangeTopic, amqp.ExchangeDirect, amqp.ExchangeFanout, amqp.ExchangeHeaders:
		default:
			return bad("exchange %q: type %q", e.Name, e.Type)
		}
		if e.Name == RetryExchange && e.Type != amqp.ExchangeTopic {
			return bad("exchange %s must be a topic exchange (topic permissions restrict its keys), not %q", RetryExchange, e.Type)
		}
		ex[e.Name] = true
	}
	if !ex[DeadLetterExchange] {
		return bad("exchange %s is required: every DLQ is bound to it", DeadLetterExchange)
	}
	if !ex[RetryExchange] {
		return bad("exchange %s is required: retries and replays travel on it", RetryExchange)
	}
	seen := map[string]bool{}
	for _, c := range d.Consumers {
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
			if !ex[b.Exchange] {
				return bad("queue %q binds to undeclared exchange %q", c.Queue, b.Exchange)
			}
			if b.Key == "" {
				return bad("queue %q: binding to %q has no key", c.Queue, b.Exchange)
			}
		}
		for i, t := range c.RetryTiers {
			if t <= 0 {
				return bad("queue %q: retry tier %d must be positive", c.Queue, i+1)
			}
		}
		for _, p := range c.Priority {
			if !ex[p.Exchange] {
				return bad("queue %q: priority binding to undeclared exchange %q", c.Queue, p.Exchange)
			}
			if strings.ContainsAny(p.Key, "*#") {
				return bad("queue %q: priority key %q: name the types themselves", c.Queue, p.Key)
			}
			for _, b := range c.Bindings {
				if b.Exchange == p.Exchange && TopicMatch(b.Key, p.Key) {
					return bad("queue %q: binding %q also matches priority key %q (it would arrive twice)", c.Queue, b.Key, p.Key)
				}
			}
		}
	}
	return nil
}

// QueueSpec is one queue to declare with its arguments.
type QueueSpec struct {
	Name string
	Args amqp.Table
}

// Queues returns, for consumer c, its DLQ, retry tiers and main queue, in
// declaration order, with their exact arguments.
func (c Consumer) Queues() []QueueSpec {
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
	out := []QueueSpec{{Name: c.DLQ(), Args: amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(DLQDeliveryLimit)}}}
	for i, d := range c.Tiers() {
		// Back to Q alone through platform.retry, where only Q is bound
		// with key Q: never through platform.events, which would hand it
		// to every other consumer, and not through the default exchange,
		// since declaring a queue whose DLX is "" needs write permission on
		// it (see Apply for retry queues declared that way before).
		args := safeDLX(RetryExchange, c.Queue)
		args["x-message-ttl"] = int64(d / time.Millisecond)
		out = append(out, QueueSpec{Name: c.RetryQueue(i + 1), Args: args})
	}
	main := safeDLX(DeadLetterExchange, c.Queue)
	main["x-delivery-limit"] = int64(c.Limit())
	return append(out, QueueSpec{Name: c.Queue, Args: main})
}

// QueueBinding binds Queue to Exchange with Key.
type QueueBinding struct {
	Queue, Exchange, Key string
}

// FabricBindings are the bindings the fabric itself needs for c, besides
// c.Bindings: Q.dlq to platform.dead-letter with key Q, each retry tier
// Q.retry.<n> to platform.retry with key Q.retry.<n> (retries), and Q to
// platform.retry with key Q (the end of a retry tier, DLQ replay).
func (c Consumer) FabricBindings() []QueueBinding {
	out := []QueueBinding{{Queue: c.DLQ(), Exchange: DeadLetterExchange, Key: c.Queue}}
	for n := range c.Tiers() {
		q := c.RetryQueue(n + 1)
		out = append(out, QueueBinding{Queue: q, Exchange: RetryExchange, Key: q})
	}
	return append(out, QueueBinding{Queue: c.Queue, Exchange: RetryExchange, Key: c.Queue})
}
