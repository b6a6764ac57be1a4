package topology

import (
	"context"
	"errors"
	"fmt"
	"regexp"

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
// A retry queue declared before platform.retry existed dead-letters through
// the default exchange (x-dead-letter-exchange ""). Its arguments cannot
// change in place, so Apply accepts it as it is when it differs from the
// current declaration in that alone: dead-lettering is broker-internal and
// needs no permission, and redeclaring an existing queue does not check the
// DLX. Such a queue still routes back to Q alone; deleting it while empty
// lets the next Apply declare it through platform.retry.
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
		for _, q := range c.Queues() {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("topology: %w", err)
			}
			_, err := ch.QueueDeclare(q.Name, true, false, false, false, q.Args)
			if err == nil {
				continue
			}
			err = classify(err, "queue", q.Name)
			var conflict *ConflictError
			if q.Name == c.Queue || q.Name == c.DLQ() || !errors.As(err, &conflict) || conflict.Argument != "x-dead-letter-exchange" {
				return fmt.Errorf("topology: %w", err)
			}
			// The failed declaration closed the channel.
			if ch, err = conn.Channel(); err != nil {
				return fmt.Errorf("topology: open channel: %w", err)
			}
			if _, err := ch.QueueDeclare(q.Name, true, false, false, false, legacyRetryArgs(q.Args)); err != nil {
				// Not the earlier queue: name what else differs, or the
				// first conflict if it is still the DLX.
				err = classify(err, "queue", q.Name)
				var other *ConflictError
				if errors.As(err, &other) && other.Argument == "x-dead-letter-exchange" {
					err = conflict
				}
				return fmt.Errorf("topology: %w", err)
			}
		}
		for _, b := range c.FabricBindings() {
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

// legacyRetryArgs are a retry queue's arguments as they were declared before
// platform.retry: dead-lettering to Q through the default exchange.
func legacyRetryArgs(args amqp.Table) amqp.Table {
	out := amqp.Table{}
	for k, v := range args {
		out[k] = v
	}
	out["x-dead-letter-exchange"] = ""
	return out
}
