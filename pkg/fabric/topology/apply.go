package topology

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// channelOpener opens AMQP channels; *amqp.Connection satisfies it.
type channelOpener interface {
	Channel() (*amqp.Channel, error)
}

// ConflictError says a declaration disagrees with what the broker already has.
type ConflictError struct {
	Kind     string // "queue" or "exchange"
	Name     string
	Argument string // e.g. "x-message-ttl", or "type" for an exchange
	Detail   string // the broker's own words
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %q exists with a different %s: %s (delete it or change the description)", e.Kind, e.Name, e.Argument, e.Detail)
}

var inequivalent = regexp.MustCompile(`inequivalent arg '([^']+)' for (queue|exchange) '([^']+)'`)

func classify(err error, kind, name string) error {
	var aerr *amqp.Error
	if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
		if m := inequivalent.FindStringSubmatch(aerr.Reason); m != nil {
			return &ConflictError{Kind: m[2], Name: m[3], Argument: m[1], Detail: aerr.Reason}
		}
		return &ConflictError{Kind: kind, Name: name, Argument: "arguments", Detail: aerr.Reason}
	}
	return fmt.Errorf("declare %s %q: %w", kind, name, err)
}

// declareExchanges makes sure every exchange exists. An existing exchange is
// only checked passively, which needs no configure permission: in a
// provisioned vhost the exchanges belong to the administrator's definitions
// and a service user may not (re)declare — and so may not delete — them.
// A missing exchange is declared, which needs that permission.
func declareExchanges(ctx context.Context, conn channelOpener, exchanges []Exchange) error {
	for _, e := range exchanges {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("topology: %w", err)
		}
		ch, err := conn.Channel()
		if err != nil {
			return fmt.Errorf("topology: open channel: %w", err)
		}
		err = ch.ExchangeDeclarePassive(e.Name, e.Type, true, false, false, false, nil)
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
			// The failed passive declare closed that channel.
			if ch, err = conn.Channel(); err != nil {
				return fmt.Errorf("topology: open channel: %w", err)
			}
			err = ch.ExchangeDeclare(e.Name, e.Type, true, false, false, false, nil)
			if errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused {
				ch.Close()
				return fmt.Errorf("topology: exchange %q does not exist and this user may not declare it (provision the broker definitions first): %w", e.Name, err)
			}
		}
		ch.Close()
		if err != nil {
			return fmt.Errorf("topology: %w", classify(err, "exchange", e.Name))
		}
	}
	return nil
}

// Apply declares d on the broker: exchanges, then for each consumer its DLQ
// (bound to platform.dead-letter with key Q), retry tiers (each bound to
// platform.retry with its own name as key) and main queue (bound to
// platform.retry with key Q, and with its own bindings) — or the
// dead-letter and retry exchanges and DLQs d names (Resolve). It is idempotent. A
// queue or exchange that exists with other arguments yields a
// *ConflictError naming the argument.
//
// Apply declares queues; it sets no policy (AMQP cannot, and the services
// that call it may not): the retry tiers' policies are set by `fabricctl
// topology apply` and the definitions file.
//
// A retry tier declared by an earlier version may carry arguments the
// current declaration no longer has, and arguments cannot change in place;
// Apply accepts such a tier as it is when it differs in these alone:
//
//   - x-message-ttl, the tier's delay before policies carried it. The tier
//     works as before (each message's own expiration and the argument, the
//     lower wins). Apply does not bind it: it was bound when it was
//     declared, and `fabricctl topology apply` upgrades it by unbinding it,
//     moving its messages out and deleting it, which a service binding it
//     again meanwhile could make lose a retry.
//   - x-dead-letter-exchange "", from before platform.retry existed:
//     dead-lettering is broker-internal and needs no permission, and
//     redeclaring an existing queue does not check the DLX. Such a queue
//     still routes back to Q alone.
func Apply(ctx context.Context, conn channelOpener, d Description) error {
	d = d.Resolve()
	if err := d.Validate(); err != nil {
		return err
	}
	if err := declareExchanges(ctx, conn, d.Exchanges); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("topology: open channel: %w", err)
	}
	defer func() { ch.Close() }()
	for _, c := range d.Consumers {
		legacy := map[string]bool{} // tiers kept with an earlier x-message-ttl
		for _, q := range c.Queues() {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("topology: %w", err)
			}
			args := q.Args
			var first *ConflictError
			for attempt := 0; ; attempt++ {
				_, err := ch.QueueDeclare(q.Name, true, false, false, false, args)
				if err == nil {
					break
				}
				err = classify(err, "queue", q.Name)
				var conflict *ConflictError
				if !errors.As(err, &conflict) {
					return fmt.Errorf("topology: %w", err)
				}
				if first == nil {
					first = conflict
				}
				next, ok := adoptLegacy(args, conflict)
				if q.Name == c.Queue || q.Name == c.DLQ() || !ok || attempt == len(legacyArgs) {
					// Not an earlier tier: name what else differs, or
					// the first difference if it is still the same one.
					if conflict.Argument == first.Argument {
						conflict = first
					}
					return fmt.Errorf("topology: %w", conflict)
				}
				args = next
				// The failed declaration closed the channel.
				if ch, err = conn.Channel(); err != nil {
					return fmt.Errorf("topology: open channel: %w", err)
				}
			}
			if _, ok := args["x-message-ttl"]; ok {
				legacy[q.Name] = true
			}
		}
		for _, b := range c.FabricBindings() {
			if legacy[b.Queue] {
				continue
			}
			if err := ch.QueueBind(b.Queue, b.Key, b.Exchange, false, nil); err != nil {
				return fmt.Errorf("topology: bind %s to %s/%s: %w", b.Queue, b.Exchange, b.Key, err)
			}
		}
		for _, b := range c.Bindings {
			if err := ch.QueueBind(c.Queue, b.Key, b.Exchange, false, nil); err != nil {
				return fmt.Errorf("topology: bind %s to %s/%s: %w", c.Queue, b.Exchange, b.Key, err)
			}
		}
	}
	return nil
}

// legacyArgs are the retry tier arguments of earlier versions that Apply
// accepts on an existing tier (see Apply).
var legacyArgs = []string{"x-message-ttl", "x-dead-letter-exchange"}

// currentValue reads the broker's value out of an inequivalent-argument
// refusal (rabbit_misc, the same on RabbitMQ 3.10 and 4.x): "... received
// none but current is the value '30000' of type 'long'" when one side
// lacks the argument, "... received 'platform.retry' but current is
// 'car.retry'" when both have it.
var currentValue = regexp.MustCompile(`but current is (?:the value '(.*)' of type '[a-z]+'|'(.*)')$`)

// adoptLegacy returns args with the broker's value of the argument conflict
// names, when that is an earlier tier's: any x-message-ttl, or an
// x-dead-letter-exchange of "".
func adoptLegacy(args amqp.Table, conflict *ConflictError) (amqp.Table, bool) {
	m := currentValue.FindStringSubmatch(conflict.Detail)
	if m == nil {
		return nil, false
	}
	current := m[1] + m[2] // one of them matched
	out := amqp.Table{}
	for k, v := range args {
		out[k] = v
	}
	switch conflict.Argument {
	case "x-message-ttl":
		ttl, err := strconv.ParseInt(current, 10, 64)
		if err != nil || ttl < 0 {
			return nil, false
		}
		out["x-message-ttl"] = ttl
	case "x-dead-letter-exchange":
		if current != "" {
			return nil, false
		}
		out["x-dead-letter-exchange"] = ""
	default:
		return nil, false
	}
	return out, true
}
