package topology

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ChannelOpener opens AMQP channels; *amqp.Connection satisfies it.
type ChannelOpener interface {
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
func declareExchanges(ctx context.Context, conn ChannelOpener, exchanges []Exchange) error {
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
// (bound to platform.dead-letter with key Q), retry tiers and main queue with
// bindings. It is idempotent. A queue or exchange that exists with other
// arguments yields a *ConflictError naming the argument.
func Apply(ctx context.Context, conn ChannelOpener, d Description) error {
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
	defer ch.Close()
	for _, c := range d.Consumers {
		for _, q := range c.Queues() {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("topology: %w", err)
			}
			if _, err := ch.QueueDeclare(q.Name, true, false, false, false, q.Args); err != nil {
				return fmt.Errorf("topology: %w", classify(err, "queue", q.Name))
			}
		}
		if err := ch.QueueBind(c.DLQ(), c.Queue, DeadLetterExchange, false, nil); err != nil {
			return fmt.Errorf("topology: bind %s: %w", c.DLQ(), err)
		}
		for _, b := range c.Bindings {
			if err := ch.QueueBind(c.Queue, b.Key, b.Exchange, false, nil); err != nil {
				return fmt.Errorf("topology: bind %s to %s/%s: %w", c.Queue, b.Exchange, b.Key, err)
			}
		}
	}
	return nil
}
