// Package messaging turns platform messages (request.submitted.v1 events and
// communication.send.v1 commands) into notifications: it resolves the
// citizen's contact, sends through the channel's adapter, records the
// outcome and enqueues communication.notification-sent.v1, all inside the
// inbox transaction the fabric hands it.
package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// Producer is the envelope producer of the events this service emits.
const Producer = "communication-service"

// Sender is a channel adapter: SMTP for e-mail, providers for the rest.
// Errors wrapping notify.ErrRejected are final; any other is retried.
type Sender interface {
	Send(ctx context.Context, m notify.Message) error
}

// Store keeps contacts and notifications. The …Tx methods run inside the
// inbox transaction; RecordFailure commits on its own, after that
// transaction is rolled back, so a failed attempt stays counted.
type Store interface {
	EnsureTx(ctx context.Context, tx pgx.Tx, tenantID, sourceEventID string, n notify.Notification) (notify.Notification, error)
	RecordFailure(ctx context.Context, tenantID, sourceEventID string, n notify.Notification, lastError string) error
	ContactTx(ctx context.Context, tx pgx.Tx, tenantID, citizenID string) (notify.Contact, error)
	MarkSentTx(ctx context.Context, tx pgx.Tx, tenantID, id string) error
	MarkFailedTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason, lastError string, attempted bool) error
}

// Enqueuer stores events in the caller's transaction; *outbox.Outbox does.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Deliverer handles the messages that lead to notifications.
type Deliverer struct {
	store   Store
	outbox  Enqueuer
	senders map[notify.Channel]Sender
	log     *slog.Logger
}

// New returns a Deliverer sending through senders (a channel without one
// records its notifications as failed with reason no-adapter).
func New(store Store, ob Enqueuer, senders map[notify.Channel]Sender, log *slog.Logger) *Deliverer {
	return &Deliverer{store: store, outbox: ob, senders: senders, log: log}
}

// job is one notification to make, whatever message asked for it.
type job struct {
	requestID string
	citizenID string
	channel   notify.Channel // empty: the contact's preferred channel
	template  string
	params    map[string]string
}

// HandleSubmitted sends the confirmation of a submitted request on the
// citizen's preferred channel. It is an inbox.TxHandler.
func (d *Deliverer) HandleSubmitted(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	var p payload.RequestSubmitted
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return fabric.Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
	}
	return d.deliver(ctx, tx, env, job{requestID: p.RequestID, citizenID: p.CitizenID,
		template: notify.TemplateConfirmation, params: map[string]string{"protocol": p.Protocol}})
}

// HandleStatusChanged tells the citizen that their request's status
// changed (request.status-changed.v1), once per event, on their preferred
// channel. An event from a producer that does not name the citizen yet
// (citizenId was added compatibly) is acked without a notice: there is
// nobody to address it to. It is an inbox.TxHandler.
func (d *Deliverer) HandleStatusChanged(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	var p payload.RequestStatusChanged
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return fabric.Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
	}
	if p.CitizenID == "" {
		d.log.Info("status change names no citizen; no notice", "event", env.ID, "request", p.RequestID)
		return nil
	}
	return d.deliver(ctx, tx, env, job{requestID: p.RequestID, citizenID: p.CitizenID,
		template: notify.TemplateStatus, params: map[string]string{"protocol": p.Protocol, "status": p.Status}})
}

// HandleSend executes a communication.send.v1 command: recipientRef is the
// citizen id, resolved through the contact table like any other message.
// It is an inbox.TxHandler.
func (d *Deliverer) HandleSend(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	var c payload.Send
	if err := json.Unmarshal(env.Payload, &c); err != nil {
		return fabric.Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
	}
	ch, err := notify.ParseChannel(c.Channel)
	if err != nil {
		return fabric.Invalid(fmt.Errorf("command %s: %w", env.ID, err))
	}
	params := make(map[string]string, len(c.Params))
	for k, v := range c.Params {
		if s, ok := v.(string); ok {
			params[k] = s
		} else {
			params[k] = fmt.Sprint(v)
		}
	}
	return d.deliver(ctx, tx, env, job{requestID: c.RequestID, citizenID: c.RecipientRef, channel: ch,
		template: c.Template, params: params})
}

// notificationNamespace names the notification ids derived from tenant
// and message id (UUIDv5).
var notificationNamespace = uuid.MustParse("4f1d2c8e-7a0b-5c3e-9d61-2b8f0a4e6c17")

func (d *Deliverer) deliver(ctx context.Context, tx pgx.Tx, env envelope.Envelope, j job) error {
	tenantID, err := tenant.From(ctx)
	if err != nil {
		return fabric.Invalid(fmt.Errorf("message %s: %w", env.ID, err))
	}
	contact, err := d.store.ContactTx(ctx, tx, tenantID, j.citizenID)
	found := err == nil
	if err != nil && !errors.Is(err, notify.ErrNotFound) {
		return fabric.Transient(fmt.Errorf("contact of message %s: %w", env.ID, err))
	}
	ch := j.channel
	if ch == "" {
		ch = notify.Email
		if found {
			ch = contact.Preferred
		}
	}
	// The notification id, and with it the mail's Message-ID, is derived
	// from the message, not drawn at random: when the process dies after
	// the relay accepted a mail but before this transaction commits, the
	// redelivery sends the same Message-ID again, which a relay or a mail
	// client drops as the duplicate it is.
	id := uuid.NewSHA1(notificationNamespace, []byte(tenantID+"/"+env.ID))
	n, err := d.store.EnsureTx(ctx, tx, tenantID, env.ID, notify.Notification{ID: id.String(), RequestID: j.requestID,
		CitizenID: j.citizenID, Channel: ch, Template: j.template})
	if err != nil {
		return fabric.Transient(fmt.Errorf("notification of message %s: %w", env.ID, err))
	}
	if n.Status != notify.Pending {
		return nil // settled by an earlier delivery of this message
	}
	fail := func(reason, lastError string, attempted bool) error {
		if err := d.store.MarkFailedTx(ctx, tx, tenantID, n.ID, reason, lastError, attempted); err != nil {
			return fabric.Transient(fmt.Errorf("mark notification %s failed: %w", n.ID, err))
		}
		d.log.Warn("notification failed", "notification", n.ID, "reason", reason, "err", lastError)
		return d.emit(ctx, tx, env, n, notify.Failed)
	}
	to, ok := contact.Address(ch)
	if !found || !ok {
		return fail(notify.ReasonNoContact, fmt.Sprintf("no %s address for the citizen", ch), false)
	}
	subject, body, err := notify.Render(j.template, j.params)
	if err != nil {
		return fail(notify.ReasonUnknownTemplate, err.Error(), false)
	}
	sender := d.senders[ch]
	if sender == nil {
		return fail(notify.ReasonNoAdapter, "no adapter for channel "+string(ch), false)
	}
	err = sender.Send(ctx, notify.Message{NotificationID: n.ID, RequestID: j.requestID, Channel: ch,
		To: to, Subject: subject, Body: body})
	switch {
	case err == nil:
		if err := d.store.MarkSentTx(ctx, tx, tenantID, n.ID); err != nil {
			return fabric.Transient(fmt.Errorf("mark notification %s sent: %w", n.ID, err))
		}
		return d.emit(ctx, tx, env, n, notify.Sent)
	case errors.Is(err, notify.ErrRejected):
		return fail(notify.ReasonRejected, err.Error(), true)
	default:
		// Roll back first: the transaction holds the notification row and
		// a pool connection; recording the attempt needs neither held.
		// The inbox's own deferred rollback is then a no-op.
		if rerr := tx.Rollback(ctx); rerr != nil {
			return fabric.Transient(fmt.Errorf("send notification %s over %s: %w (rollback: %v)", n.ID, ch, err, rerr))
		}
		if rerr := d.store.RecordFailure(context.WithoutCancel(ctx), tenantID, env.ID, n, err.Error()); rerr != nil {
			d.log.Error("record delivery attempt", "notification", n.ID, "err", rerr)
		}
		return fabric.Transient(fmt.Errorf("send notification %s over %s: %w", n.ID, ch, err))
	}
}

func (d *Deliverer) emit(ctx context.Context, tx pgx.Tx, cause envelope.Envelope, n notify.Notification, st notify.Status) error {
	p := payload.NotificationSent{NotificationID: n.ID, RequestID: n.RequestID,
		Channel: enum.Of(payload.NotificationChannel(n.Channel)), Status: string(st)}
	e, err := envelope.Derive(cause, p.MessageType(), Producer, p)
	if err != nil {
		return fabric.Transient(err)
	}
	if err := d.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "notification", ID: n.ID}, Envelope: e}); err != nil {
		return fabric.Transient(fmt.Errorf("enqueue notification-sent %s: %w", n.ID, err))
	}
	return nil
}
