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
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/sweep"
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
	// EnsureTx also returns the citizen's contact (nil without one), and
	// fills an empty channel with the contact's preferred one (e-mail
	// without a contact).
	EnsureTx(ctx context.Context, tx pgx.Tx, tenantID, sourceEventID string, n notify.Notification) (notify.Notification, *notify.Contact, error)
	RecordFailure(ctx context.Context, tenantID, sourceEventID string, n notify.Notification, lastError string) error
	ContactTx(ctx context.Context, tx pgx.Tx, tenantID, citizenID string) (notify.Contact, error)
	MarkSentTx(ctx context.Context, tx pgx.Tx, tenantID, id string) error
	MarkFailedTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason, lastError string, attempted bool) error
	MarkWithheldTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason string) error
	MarkHeldTx(ctx context.Context, tx pgx.Tx, tenantID, id string, until time.Time, params map[string]string, cause envelope.Envelope) error
	DispatchDue(ctx context.Context, now time.Time, limit int, fn func(ctx context.Context, tx pgx.Tx, h notify.HeldNotice) error) (int, error)
	PostponeTx(ctx context.Context, tx pgx.Tx, tenantID, id, lastError string, until time.Time) error
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
	now     func() time.Time
}

// New returns a Deliverer sending through senders (a channel without one
// records its notifications as failed with reason no-adapter).
func New(store Store, ob Enqueuer, senders map[notify.Channel]Sender, log *slog.Logger) *Deliverer {
	return &Deliverer{store: store, outbox: ob, senders: senders, log: log, now: time.Now}
}

// RetryHeldAfter is how long a held notification whose channel failed
// waits before its next attempt.
const RetryHeldAfter = time.Minute

// job is one notification to make, whatever message asked for it.
type job struct {
	requestID string
	citizenID string
	channel   notify.Channel // empty: the contact's preferred channel
	template  string
	params    map[string]string
}

// HandleSubmitted sends the confirmation of a submitted request on the
// citizen's preferred channel. It is an fabric.TxHandler.
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
// nobody to address it to. It is an fabric.TxHandler.
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
// It is an fabric.TxHandler.
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
	// The notification id, and with it the mail's Message-ID, is derived
	// from the message, not drawn at random: when the process dies after
	// the relay accepted a mail but before this transaction commits, the
	// redelivery sends the same Message-ID again, which a relay or a mail
	// client drops as the duplicate it is.
	id := uuid.NewSHA1(notificationNamespace, []byte(tenantID+"/"+env.ID))
	n, c, err := d.store.EnsureTx(ctx, tx, tenantID, env.ID, notify.Notification{ID: id.String(), RequestID: j.requestID,
		CitizenID: j.citizenID, Channel: j.channel, Template: j.template})
	if err != nil {
		return fabric.Transient(fmt.Errorf("notification of message %s: %w", env.ID, err))
	}
	if n.Status != notify.Pending {
		return nil // settled by an earlier delivery of this message
	}
	sendErr, err := d.settle(ctx, tx, tenantID, n, c, j.params, env)
	if err != nil {
		return fabric.Transient(err)
	}
	if sendErr == nil {
		return nil
	}
	// Roll back first: the transaction holds the notification row and a
	// pool connection; recording the attempt needs neither held. The
	// inbox's own deferred rollback is then a no-op.
	if rerr := tx.Rollback(ctx); rerr != nil {
		return fabric.Transient(fmt.Errorf("send notification %s over %s: %w (rollback: %v)", n.ID, n.Channel, sendErr, rerr))
	}
	if rerr := d.store.RecordFailure(context.WithoutCancel(ctx), tenantID, env.ID, n, sendErr.Error()); rerr != nil {
		d.log.Error("record delivery attempt", "notification", n.ID, "err", rerr)
	}
	return fabric.Transient(fmt.Errorf("send notification %s over %s: %w", n.ID, n.Channel, sendErr))
}

// settle applies the citizen's rules to n and sends it when they allow,
// recording in tx whatever becomes of it: sent, failed, withheld or held.
// contact is nil when the citizen has none. A channel's temporary failure
// is returned as sendErr, for the caller to retry; err is a database
// error.
func (d *Deliverer) settle(ctx context.Context, tx pgx.Tx, tenantID string, n notify.Notification, contact *notify.Contact,
	params map[string]string, cause envelope.Envelope) (sendErr, err error) {
	fail := func(reason, lastError string, attempted bool) error {
		if err := d.store.MarkFailedTx(ctx, tx, tenantID, n.ID, reason, lastError, attempted); err != nil {
			return fmt.Errorf("mark notification %s failed: %w", n.ID, err)
		}
		d.log.Warn("notification failed", "notification", n.ID, "reason", reason, "err", lastError)
		return d.emit(ctx, tx, cause, n, notify.Failed)
	}
	if contact == nil {
		return nil, fail(notify.ReasonNoContact, "the citizen has no contact", false)
	}
	to, ok := contact.Address(n.Channel)
	if !ok {
		return nil, fail(notify.ReasonNoContact, fmt.Sprintf("no %s address for the citizen", n.Channel), false)
	}
	subject, body, err := notify.Render(n.Template, params)
	if err != nil {
		return nil, fail(notify.ReasonUnknownTemplate, err.Error(), false)
	}
	sender := d.senders[n.Channel]
	if sender == nil {
		return nil, fail(notify.ReasonNoAdapter, "no adapter for channel "+string(n.Channel), false)
	}
	switch verdict, until := notify.Decide(*contact, n.Channel, n.Template, d.now()); verdict {
	case notify.Withhold:
		d.log.Info("notification withheld: no consent to progress notices", "notification", n.ID)
		return nil, d.store.MarkWithheldTx(ctx, tx, tenantID, n.ID, notify.ReasonNoConsent)
	case notify.Hold:
		d.log.Info("notification held for quiet hours", "notification", n.ID, "until", until)
		return nil, d.store.MarkHeldTx(ctx, tx, tenantID, n.ID, until, params, cause)
	}
	err = sender.Send(ctx, notify.Message{NotificationID: n.ID, RequestID: n.RequestID, Channel: n.Channel,
		To: to, Subject: subject, Body: body})
	switch {
	case err == nil:
		if err := d.store.MarkSentTx(ctx, tx, tenantID, n.ID); err != nil {
			return nil, fmt.Errorf("mark notification %s sent: %w", n.ID, err)
		}
		return nil, d.emit(ctx, tx, cause, n, notify.Sent)
	case errors.Is(err, notify.ErrRejected):
		return nil, fail(notify.ReasonRejected, err.Error(), true)
	default:
		return err, nil
	}
}

// DispatchHeld sends up to limit held notifications whose quiet hours are
// over, and returns how many it handled. The rules are applied again: the
// citizen may have withdrawn consent or moved their quiet hours meanwhile.
// A channel's temporary failure holds the notification RetryHeldAfter
// more; a database error aborts the batch, and every notification in it
// stays held.
func (d *Deliverer) DispatchHeld(ctx context.Context, limit int) (int, error) {
	return d.store.DispatchDue(ctx, d.now(), limit, func(ctx context.Context, tx pgx.Tx, h notify.HeldNotice) error {
		contact, err := d.store.ContactTx(ctx, tx, h.TenantID, h.Notification.CitizenID)
		var c *notify.Contact
		switch {
		case err == nil:
			c = &contact
		case !errors.Is(err, notify.ErrNotFound):
			return err
		}
		sendErr, err := d.settle(ctx, tx, h.TenantID, h.Notification, c, h.Params, h.Cause)
		if err != nil || sendErr == nil {
			return err
		}
		d.log.Warn("held notification not sent; holding it again", "notification", h.Notification.ID, "err", sendErr)
		return d.store.PostponeTx(ctx, tx, h.TenantID, h.Notification.ID, sendErr.Error(), d.now().Add(RetryHeldAfter))
	})
}

// WatchHeld runs DispatchHeld every interval until ctx ends.
func (d *Deliverer) WatchHeld(ctx context.Context, interval time.Duration, limit int) {
	sweep.Run(ctx, interval, limit, d.DispatchHeld,
		func(err error) { d.log.Error("dispatch held notifications", "err", err) }, nil)
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
