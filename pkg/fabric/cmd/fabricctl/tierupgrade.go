package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// holdingSuffix names the queue that holds a retry tier's messages while
// the tier is redeclared: Q.retry.<n>.upgrade. No consumer queue can be
// named so (".retry." is reserved), and no fabric policy matches it.
const holdingSuffix = ".upgrade"

// legacyTier reports whether a broker queue is a retry tier declared
// before policies carried the tiers' delays: with an x-message-ttl
// argument, which no policy can raise (the lower of the two applies) and
// which cannot be removed in place.
func legacyTier(q brokerQueue) bool {
	_, ok := q.Arguments["x-message-ttl"]
	return ok
}

// upgradeTiers redeclares, without the arguments of an earlier version,
// every retry tier of d that the broker holds with them, and finishes an
// upgrade an earlier run left half done (its holding queue still exists).
// No message is lost and none is unroutable on the way (docs/topologies.md,
// "Changing retry tiers and queue settings"):
//
//  1. the holding queue Q.retry.<n>.upgrade is declared like today's tier
//     (dead-lettering back to Q, at least once) and bound to the retry
//     exchange with the tier's key, before the old tier is unbound from
//     it: a retry published meanwhile reaches one of them or both (then
//     it is handled twice, which the inbox absorbs), never neither;
//  2. the old tier is unbound, and its messages are moved to the retry
//     exchange with the tier's key — to the holding queue alone now — each
//     acked only once the broker confirmed it routed and stored the copy;
//  3. the old tier, empty and unbound (checked through the management
//     API), is deleted, and declared again as today's, under its policy,
//     and bound;
//  4. the holding queue is unbound and its messages moved the same way,
//     now into the new tier; the empty holding queue is deleted.
//
// Services of this version never bind an earlier tier (topology.Apply), so
// none routes retries back into the old tier while it is emptied. A moved
// message waits its delay again from the move.
func upgradeTiers(ctx context.Context, conn *amqp.Connection, m *mgmtClient, d topology.Description, out io.Writer) (int, error) {
	queues, err := m.queues(ctx)
	if err != nil {
		return 0, err
	}
	upgraded := 0
	for _, c := range d.Consumers {
		for _, q := range c.Queues() {
			if q.Policy == nil {
				continue // not a retry tier
			}
			old, isOld := queues[q.Name]
			_, holding := queues[q.Name+holdingSuffix]
			if !(isOld && legacyTier(old)) && !holding {
				continue
			}
			t0 := time.Now()
			out1, back, err := upgradeTier(ctx, conn, m, c.RetryExchange(), q.Name, q.Args, isOld && legacyTier(old))
			if err != nil {
				return upgraded, fmt.Errorf("upgrade retry tier %s (%d messages moved to %s, %d back; run apply again to finish): %w",
					q.Name, out1, q.Name+holdingSuffix, back, err)
			}
			upgraded++
			fmt.Fprintf(out, "upgraded %s: %d messages moved to %s and %d back, in %s; declared without x-message-ttl, its delay is policy %s\n",
				q.Name, out1, q.Name+holdingSuffix, back, time.Since(t0).Round(time.Millisecond), q.Policy.Name)
		}
	}
	return upgraded, nil
}

// upgradeTier carries out upgradeTiers' steps for one tier; with legacy
// false only the holding queue is left to empty. It returns how many
// messages it moved out of the old tier and how many back from the
// holding queue.
func upgradeTier(ctx context.Context, conn *amqp.Connection, m *mgmtClient, exchange, tier string, args amqp.Table, legacy bool) (out, back int, err error) {
	hold := tier + holdingSuffix
	// One channel for every step, in confirm mode: the acks of moved
	// messages are settled by the next basic.get on it and, at the latest,
	// by deleting the queue they came from, before the channel closes (a
	// quorum queue returns what a closing channel has not settled yet:
	// copies moved twice, see move).
	ch, err := conn.Channel()
	if err != nil {
		return 0, 0, err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return 0, 0, err
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, moveBatch))
	if legacy {
		if _, err := ch.QueueDeclare(hold, true, false, false, false, args); err != nil {
			return 0, 0, fmt.Errorf("declare %s: %w", hold, err)
		}
		if err := ch.QueueBind(hold, tier, exchange, false, nil); err != nil {
			return 0, 0, fmt.Errorf("bind %s: %w", hold, err)
		}
		if err := ch.QueueUnbind(tier, tier, exchange, nil); err != nil {
			return 0, 0, fmt.Errorf("unbind %s: %w", tier, err)
		}
		if out, err = drain(ctx, ch, returns, m, tier, exchange, tier); err != nil {
			return out, 0, err
		}
		if err := deleteEmpty(ch, tier); err != nil {
			return out, 0, err
		}
		if _, err := ch.QueueDeclare(tier, true, false, false, false, args); err != nil {
			return out, 0, fmt.Errorf("declare %s: %w", tier, err)
		}
		if err := ch.QueueBind(tier, tier, exchange, false, nil); err != nil {
			return out, 0, fmt.Errorf("bind %s: %w", tier, err)
		}
	}
	if err := ch.QueueUnbind(hold, tier, exchange, nil); err != nil {
		return out, 0, fmt.Errorf("unbind %s: %w", hold, err)
	}
	if back, err = drain(ctx, ch, returns, m, hold, exchange, tier); err != nil {
		return out, back, err
	}
	return out, back, deleteEmpty(ch, hold)
}

// moveBatch is how many messages move takes before it waits for the
// confirms of their copies.
const moveBatch = 256

// drain moves every message of queue src, which must be bound nowhere, to
// exchange with key, until src is empty. It first makes sure that nothing
// can route to src any more.
func drain(ctx context.Context, ch *amqp.Channel, returns <-chan amqp.Return, m *mgmtClient, src, exchange, key string) (int, error) {
	bs, err := m.queueBindings(ctx, src)
	if err != nil {
		return 0, err
	}
	if len(bs) > 0 {
		return 0, fmt.Errorf("%s is still bound (%s): something bound it again; it is left as it is, with its messages", src, strings.Join(bs, ", "))
	}
	total := 0
	for {
		n, err := move(ctx, ch, returns, src, exchange, key)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
	}
}

// move takes up to moveBatch messages off src and publishes copies to
// exchange with key (mandatory, confirmed on ch); it acks the originals
// once every copy is confirmed, or returns them all to src if one was not
// routed or not confirmed (the copies that were stay: a duplicate, never a
// loss). It returns how many it moved; 0 when src was empty.
func move(ctx context.Context, ch *amqp.Channel, returns <-chan amqp.Return, src, exchange, key string) (int, error) {
	var confirms []*amqp.DeferredConfirmation
	var tags []uint64
	for len(confirms) < moveBatch {
		d, ok, err := ch.Get(src, false)
		if err != nil {
			return 0, fmt.Errorf("get from %s: %w", src, err)
		}
		if !ok {
			break
		}
		tags = append(tags, d.DeliveryTag)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, copyOf(d))
		if err != nil {
			return 0, fmt.Errorf("publish to %s/%s: %w", exchange, key, err)
		}
		confirms = append(confirms, dc)
	}
	if len(confirms) == 0 {
		return 0, nil
	}
	giveBack := func(why error) (int, error) {
		for _, tag := range tags {
			if err := ch.Nack(tag, false, true); err != nil {
				return 0, errors.Join(why, fmt.Errorf("return the messages to %s: %w (closing the channel returns them)", src, err))
			}
		}
		return 0, why
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, dc := range confirms {
		ok, err := dc.WaitContext(wctx)
		if err != nil {
			return giveBack(fmt.Errorf("confirm of a copy to %s/%s: %w", exchange, key, err))
		}
		if !ok {
			return giveBack(fmt.Errorf("the broker refused a copy to %s/%s", exchange, key))
		}
	}
	select {
	case r := <-returns:
		return giveBack(fmt.Errorf("a copy to %s/%s was unroutable (%s): nothing is bound with that key", exchange, key, r.ReplyText))
	default:
	}
	// One ack per message. A channel that closes right after acking a
	// burst of basic.get deliveries from a quorum queue leaves some
	// unsettled, and the queue takes them back (measured on RabbitMQ 3.10:
	// 7 of 40, with one multiple ack or 40 single ones); the next
	// basic.get on the same channel, or deleting the queue, settles them
	// first, so the channel stays open until then (upgradeTier).
	for _, tag := range tags {
		if err := ch.Ack(tag, false); err != nil {
			return 0, fmt.Errorf("ack moved messages on %s: %w (closing the channel returns them: duplicates, not losses)", src, err)
		}
	}
	return len(confirms), nil
}

// copyOf is d as a publishing: body, properties and headers, less the
// broker's own headers (refused by RabbitMQ 4.x on publish) and user-id
// (checked against the publishing user). The expiration is kept: a retry
// published with one still returns to its queue on time.
func copyOf(d amqp.Delivery) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range d.Headers {
		switch {
		case k == "x-death", k == "x-delivery-count", strings.HasPrefix(k, "x-first-death"), strings.HasPrefix(k, "x-last-death"):
			continue
		}
		h[k] = v
	}
	return amqp.Publishing{
		Headers: h, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, DeliveryMode: amqp.Persistent,
		Priority: d.Priority, CorrelationId: d.CorrelationId, ReplyTo: d.ReplyTo, Expiration: d.Expiration,
		MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, AppId: d.AppId, Body: d.Body,
	}
}

// deleteEmpty deletes queue, which drain emptied and nothing routes to.
// Quorum queues refuse queue.delete if-empty, so the check is drain's: a
// message found in it on deletion is reported, loudly.
func deleteEmpty(ch *amqp.Channel, queue string) error {
	n, err := ch.QueueDelete(queue, false, false, false)
	if err != nil {
		return fmt.Errorf("delete %s: %w", queue, err)
	}
	if n > 0 {
		return fmt.Errorf("%s held %d messages when it was deleted, after it had been emptied and unbound: "+
			"something published to it directly (the default exchange) during the upgrade", queue, n)
	}
	return nil
}
