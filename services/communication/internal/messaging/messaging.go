// Package messaging turns platform messages (request.submitted.v1 and
// request.status-changed.v1 events, communication.send.v1 commands) into
// notifications: it resolves the citizen's contact, sends through the
// channel's adapter, and has the store record the outcome with its
// communication.notification-sent.v1 event, all inside the inbox
// transaction the fabric hands it.
package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/sweep"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// The communication service's queues (pkg/fabric/catalog/catalog.yaml,
// services:).
const (
	submittedQueue = "communication.request-submitted"
	// statusQueue tells citizens of every status change of their requests.
	statusQueue = "communication.request-status"
	// commandQueue feeds the channel adapters (SMS, WhatsApp, email).
	commandQueue = "communication.send-commands"
)

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	ConsumeTx(queue string, h fabric.TxHandler, o fabric.ConsumerOptions) error
	Go(name string, run func(ctx context.Context) error)
}

// Deps are the handlers' dependencies.
type Deps struct {
	Store Store
	// Senders are the channels' adapters; a channel without one records
	// its notifications as failed with reason no-adapter.
	Senders map[notify.Channel]Sender
	// Concurrency is how many handlers each queue runs.
	Concurrency int
	// HeldInterval is how often notifications held for quiet hours are
	// looked at (more often with coalescing on: heldPollInterval).
	HeldInterval time.Duration
	// CoalesceWindow is how long a request's status notices are held so
	// that the ones within it go out as one; 0 sends each at once.
	CoalesceWindow time.Duration
	Log            *slog.Logger
	// Faults lets crash tests stop the process at a named point
	// (FaultAccepted); nil in production.
	Faults faults
}

// faults is a crash test's hook: Hit may end the process.
type faults interface {
	Hit(point string)
}

// FaultAccepted is the point right after a provider accepted a message and
// before its outcome is recorded: a crash there leaves the message sent
// and its notification unsettled, so it is sent again with the same key.
const FaultAccepted = "communication.after-accept"

// Attach registers the communication service's consumers on h, and the
// dispatcher of the notifications held for quiet hours or to coalesce.
func Attach(h Host, d Deps) error {
	// due wakes the first dispatcher when a notice this process held falls
	// due (dueAlarm).
	interval := heldPollInterval(d.HeldInterval, d.CoalesceWindow)
	due := make(chan struct{}, 1)
	dl := &deliverer{store: d.Store, senders: d.Senders, log: d.Log, now: time.Now, window: d.CoalesceWindow, faults: d.Faults,
		alarm: newDueAlarm(interval, due)}
	// A crash between a provider's acceptance and the commit that records
	// it sends again everything the transaction had sent: with the inbox's
	// batches (up to 16 messages in one transaction) a crash resent a
	// batch's worth of mails. A queue whose handler sends takes one message
	// per transaction, so a crash resends only the mail in flight (one per
	// handler). Held notices are only recorded in the handler, so with
	// coalescing on the status queues keep their batches.
	batched := fabric.ConsumerOptions{Concurrency: d.Concurrency}
	single := fabric.ConsumerOptions{Concurrency: d.Concurrency, MaxBatch: 1}
	notices := batched
	if d.CoalesceWindow <= 0 {
		notices = single // every notice is sent by its handler
	}
	for _, c := range []struct {
		queue  string
		handle fabric.TxHandler
		opts   fabric.ConsumerOptions
	}{{submittedQueue, dl.handleSubmitted, notices}, {statusQueue, dl.handleStatusChanged, notices}, {commandQueue, dl.handleSend, single}} {
		if err := h.ConsumeTx(c.queue, c.handle, c.opts); err != nil {
			return fmt.Errorf("messaging: %w", err)
		}
	}
	// The dispatcher stops with the consumers, before the relay: a
	// notification in flight rolls back and stays held. It commits each
	// notification it sends on its own (a batch of one; sweep.Run takes
	// the next at once while there are due ones), for the reason above: a
	// batch of eight resent up to eight mails per worker after a crash.
	// With coalescing on, every status notice goes out through it rather
	// than the handlers, so it runs as many workers as a queue has
	// handlers, for mails to go out side by side (SKIP LOCKED shares the
	// due notices among them).
	workers, batch := 1, 1
	if d.CoalesceWindow > 0 {
		workers = max(d.Concurrency, 1)
	}
	// The first worker is woken when a notice this process held falls due,
	// and looks of its own accord every interval, stretching while it
	// finds nothing up to heldIdleMax: that look finds what another
	// instance held, or this one before a restart, at most heldIdleMax
	// late. The others help when there is a backlog: the first wakes them
	// when it finds a second due notice right after one it handled (a lone
	// notice is its alone: waking three helpers for it cost three empty
	// transactions), and they look less and less often while they find
	// nothing. An idle service runs a query every heldIdleMax.
	help := make(chan struct{}, workers)
	streak := 0 // the first worker's notices handled in a row
	first := func(ctx context.Context, limit int) (int, error) {
		n, err := dl.dispatchHeld(ctx, limit)
		if n == 0 {
			streak = 0
		} else if streak++; streak == 2 {
			wakeHelpers(help, workers-1)
		}
		return n, err
	}
	for i := range workers {
		h.Go(fmt.Sprintf("held-notifications-%d", i), func(ctx context.Context) error {
			if i == 0 {
				dl.dispatchWhenDue(ctx, interval, batch, due, first)
			} else {
				dl.dispatchWhenDue(ctx, interval, batch, help, dl.dispatchHeld)
			}
			return nil
		})
	}
	return nil
}

// heldIdleMax bounds how seldom an idle dispatcher looks for due notices
// of its own accord.
const heldIdleMax = 15 * time.Second

// dueAlarm wakes the dispatcher when a notice this process held falls due.
// It rings on a grid of the dispatcher's look interval, one timer per grid
// slot however many notices fall due in it: under load it wakes the
// dispatcher no more often than a poll every interval would, and at rest
// never. A notice whose holding transaction rolled back costs a look that
// finds nothing.
type dueAlarm struct {
	grid time.Duration
	wake chan<- struct{}

	mu    sync.Mutex
	slots map[int64]bool // grid slots with a timer set
}

func newDueAlarm(grid time.Duration, wake chan<- struct{}) *dueAlarm {
	return &dueAlarm{grid: max(grid, time.Millisecond), wake: wake, slots: map[int64]bool{}}
}

// heldCommitSlack is how long after its due time a notice's alarm rings at
// the earliest: the handler that held it commits after setting the alarm,
// normally within milliseconds; one that commits later is found by the
// dispatcher's next look.
const heldCommitSlack = 50 * time.Millisecond

// ring sets the alarm for a notice due at: it rings at the first grid
// point at least heldCommitSlack after it.
func (a *dueAlarm) ring(at time.Time) {
	g := int64(a.grid)
	slot := (at.Add(heldCommitSlack).UnixNano() + g - 1) / g
	a.mu.Lock()
	if a.slots[slot] {
		a.mu.Unlock()
		return
	}
	a.slots[slot] = true
	a.mu.Unlock()
	time.AfterFunc(time.Until(time.Unix(0, slot*g)), func() {
		a.mu.Lock()
		delete(a.slots, slot)
		a.mu.Unlock()
		select {
		case a.wake <- struct{}{}:
		default: // one pending wake-up is enough
		}
	})
}

// wakeHelpers hands up to n helpers a wake-up without blocking: one
// already pending is enough.
func wakeHelpers(help chan<- struct{}, n int) {
	for range n {
		select {
		case help <- struct{}{}:
		default:
			return
		}
	}
}

// heldPollInterval is how often the dispatcher looks for due held notices
// while it finds some, before it backs off toward heldIdleMax. A notice
// this process held wakes it at its due time (dueAlarm); the looks are for
// the others: held by another instance, or by this one before a restart.
// With coalescing on it looks four times a window (not below 50 ms), so a
// dispatcher that is busy sends a notice another instance held within a
// quarter window of its due time. The look is one indexed query on the
// small hold table.
func heldPollInterval(interval, window time.Duration) time.Duration {
	if window <= 0 {
		return interval
	}
	return min(interval, max(window/4, 50*time.Millisecond))
}

// Sender is a channel adapter: SMTP for e-mail, providers for the rest.
// Errors wrapping notify.ErrRejected are final; any other is retried.
type Sender interface {
	Send(ctx context.Context, m notify.Message) error
}

// Store keeps contacts and notifications. The …Tx methods run inside the
// inbox transaction, and MarkSentTx and MarkFailedTx enqueue the outcome
// event they are given in it; RecordFailure commits on its own, after that
// transaction is rolled back, so a failed attempt stays counted.
type Store interface {
	// EnsureTx also returns the citizen's contact (nil without one), and
	// fills an empty channel with the contact's preferred one (e-mail
	// without a contact).
	EnsureTx(ctx context.Context, tx pgx.Tx, tenantID, sourceEventID string, n notify.Notification) (notify.Notification, *notify.Contact, error)
	RecordFailure(ctx context.Context, tenantID, sourceEventID string, n notify.Notification, lastError string) error
	ContactTx(ctx context.Context, tx pgx.Tx, tenantID, citizenID string) (notify.Contact, error)
	MarkSentTx(ctx context.Context, tx pgx.Tx, tenantID, id string, event envelope.Envelope) error
	MarkFailedTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason, lastError string, attempted bool, event envelope.Envelope) error
	MarkWithheldTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason string) error
	MarkHeldTx(ctx context.Context, tx pgx.Tx, tenantID, id string, until time.Time, notice notify.Notice, cause envelope.Envelope) error
	// SupersedeHeldTx marks the other notices of n's request and channel
	// still held, of one of templates, coalesced into n, and returns them
	// oldest first; until tx ends, no other transaction does so for them.
	SupersedeHeldTx(ctx context.Context, tx pgx.Tx, tenantID string, n notify.Notification, templates []string) ([]notify.Superseded, error)
	DispatchDue(ctx context.Context, now time.Time, limit int, fn func(ctx context.Context, tx pgx.Tx, h notify.HeldNotice) error) (int, error)
	PostponeTx(ctx context.Context, tx pgx.Tx, tenantID, id, lastError string, until time.Time) error
}

// deliverer handles the messages that lead to notifications.
type deliverer struct {
	store   Store
	senders map[notify.Channel]Sender
	log     *slog.Logger
	now     func() time.Time
	// window is how long a request's status notices wait to coalesce (0:
	// sent at once).
	window time.Duration
	faults faults // nil but in crash tests
	// alarm hears the due time of every notice held.
	alarm *dueAlarm
}

// retryHeldAfter is how long a held notification whose channel failed
// waits before its next attempt.
const retryHeldAfter = time.Minute

// job is one notification to make, whatever message asked for it.
type job struct {
	requestID string
	citizenID string
	channel   notify.Channel // empty: the contact's preferred channel
	template  string
	params    map[string]string
	// coalesce: a status notice of the request, held for the coalescing
	// window. Commands are not: whoever sends one asked for that message.
	coalesce bool
}

// handleSubmitted sends the confirmation of a submitted request on the
// citizen's preferred channel. It is a fabric.TxHandler.
func (d *deliverer) handleSubmitted(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	var p payload.RequestSubmitted
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return fabric.Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
	}
	return d.deliver(ctx, tx, env, job{requestID: p.RequestID, citizenID: p.CitizenID, coalesce: true,
		template: notify.TemplateConfirmation, params: map[string]string{"protocol": p.Protocol}})
}

// handleStatusChanged tells the citizen that their request's status
// changed (request.status-changed.v1), once per event, on their preferred
// channel. An event from a producer that does not name the citizen yet
// (citizenId was added compatibly) is acked without a notice: there is
// nobody to address it to. It is a fabric.TxHandler.
func (d *deliverer) handleStatusChanged(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	var p payload.RequestStatusChanged
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return fabric.Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
	}
	if p.CitizenID == "" {
		d.log.Info("status change names no citizen; no notice", "event", env.ID, "request", p.RequestID)
		return nil
	}
	// changedAt orders the changes if they are coalesced (notify.Coalesce).
	return d.deliver(ctx, tx, env, job{requestID: p.RequestID, citizenID: p.CitizenID, coalesce: true,
		template: notify.TemplateStatus, params: map[string]string{"protocol": p.Protocol, "status": p.Status,
			"changedAt": p.ChangedAt.UTC().Format(time.RFC3339Nano)}})
}

// handleSend executes a communication.send.v1 command: recipientRef is the
// citizen id, resolved through the contact table like any other message.
// It is a fabric.TxHandler.
func (d *deliverer) handleSend(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
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

func (d *deliverer) deliver(ctx context.Context, tx pgx.Tx, env envelope.Envelope, j job) error {
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
	coalesce := j.coalesce && d.window > 0 && j.requestID != ""
	sendErr, err := d.settle(ctx, tx, tenantID, n, c, j.params, env, coalesce)
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
// With coalesce, a notice the rules allow is held for the coalescing
// window instead of sent (see coalesce). contact is nil when the citizen
// has none. A channel's temporary failure is returned as sendErr, for the
// caller to retry; err is a database error.
func (d *deliverer) settle(ctx context.Context, tx pgx.Tx, tenantID string, n notify.Notification, contact *notify.Contact,
	params map[string]string, cause envelope.Envelope, coalesce bool) (sendErr, err error) {
	fail := func(reason, lastError string, attempted bool) error {
		e, err := notify.SentEvent(cause, n, notify.Failed)
		if err != nil {
			return err
		}
		if err := d.store.MarkFailedTx(ctx, tx, tenantID, n.ID, reason, lastError, attempted, e); err != nil {
			return err
		}
		d.log.Warn("notification failed", "notification", n.ID, "reason", reason, "err", lastError)
		return nil
	}
	if contact == nil {
		return nil, fail(notify.ReasonNoContact, "the citizen has no contact", false)
	}
	to, ok := contact.Address(n.Channel)
	if !ok {
		return nil, fail(notify.ReasonNoContact, fmt.Sprintf("no %s address for the citizen", n.Channel), false)
	}
	template := contact.Narrow(n.Template)
	subject, body, err := notify.Render(template, params)
	if err != nil {
		return nil, fail(notify.ReasonUnknownTemplate, err.Error(), false)
	}
	sender := d.senders[n.Channel]
	if sender == nil {
		return nil, fail(notify.ReasonNoAdapter, "no adapter for channel "+string(n.Channel), false)
	}
	// A notice withheld for want of consent is settled before it could
	// coalesce: it must not carry its status into a held confirmation.
	switch verdict, until := notify.Decide(*contact, n.Channel, template, d.now()); {
	case verdict == notify.Withhold:
		d.log.Info("notification withheld: no consent to progress notices", "notification", n.ID)
		return nil, d.store.MarkWithheldTx(ctx, tx, tenantID, n.ID, notify.ReasonNoConsent)
	case coalesce:
		return nil, d.coalesce(ctx, tx, tenantID, n, params, cause, until)
	case verdict == notify.Hold:
		d.log.Info("notification held for quiet hours", "notification", n.ID, "until", until)
		if err := d.store.MarkHeldTx(ctx, tx, tenantID, n.ID, until, notify.Notice{Template: n.Template, Params: params}, cause); err != nil {
			return nil, err
		}
		d.alarm.ring(until)
		return nil, nil
	}
	// The intent to send is durable before the send, and the provider's
	// idempotency key derives from it, so nothing needs committing first:
	// a notice sent at once is the message the broker redelivers until the
	// commit that records the outcome acks it, and a held one is its
	// committed row and hold, which a rolled-back dispatch keeps. Either way
	// the retry has the same notification id, the message's idempotency
	// key (notify.Message.IdempotencyKey), and a provider that honours the
	// key answers it as accepted without sending again. Committing an
	// intent apart would need a second connection while the inbox's
	// transaction holds one (TestConcurrentDeliveriesWithASmallPool), for a
	// key the retry can already rebuild. The outcome (MarkSentTx and its
	// event) commits with the inbox claim, or with the hold's release.
	err = sender.Send(ctx, notify.Message{NotificationID: n.ID, RequestID: n.RequestID, Channel: n.Channel,
		To: to, Subject: subject, Body: body})
	switch {
	case err == nil:
		if d.faults != nil {
			d.faults.Hit(FaultAccepted)
		}
		e, err := notify.SentEvent(cause, n, notify.Sent)
		if err != nil {
			return nil, err
		}
		return nil, d.store.MarkSentTx(ctx, tx, tenantID, n.ID, e)
	case errors.Is(err, notify.ErrRejected):
		return nil, fail(notify.ReasonRejected, err.Error(), true)
	default:
		return err, nil
	}
}

// coalesce holds n for the coalescing window instead of sending it, and
// has it take over the notices of its request and channel still held: they
// become coalesced, and n says what they said (notify.Coalesce) and is due
// when the first of them was. quietUntil, when set, is the end of the
// citizen's quiet hours, before which n would not go anyway; the
// dispatcher applies the rules again when n is due. The notice that
// supersedes another is the newer one, so its cause (the latest change)
// is what its notification-sent.v1 derives from; a coalesced notice
// announces nothing, having never been sent.
func (d *deliverer) coalesce(ctx context.Context, tx pgx.Tx, tenantID string, n notify.Notification,
	params map[string]string, cause envelope.Envelope, quietUntil time.Time) error {
	due := d.now().Add(d.window)
	if quietUntil.After(due) {
		due = quietUntil
	}
	held, err := d.store.SupersedeHeldTx(ctx, tx, tenantID, n, notify.StatusTemplates())
	if err != nil {
		return fmt.Errorf("coalesce notice: %w", err)
	}
	notice, due := notify.Supersede(held, notify.Notice{Template: n.Template, Params: params}, due)
	for _, h := range held {
		d.log.Info("notification coalesced", "notification", h.ID, "into", n.ID)
	}
	if err := d.store.MarkHeldTx(ctx, tx, tenantID, n.ID, due, notice, cause); err != nil {
		return fmt.Errorf("coalesce notice: %w", err)
	}
	d.alarm.ring(due)
	return nil
}

// dispatchHeld sends up to limit held notifications that are due (their
// quiet hours or coalescing window are over), and returns how many it
// handled. The rules are applied again: the citizen may have withdrawn
// consent or moved their quiet hours meanwhile. A channel's temporary
// failure holds the notification retryHeldAfter more; a database error
// aborts the batch, and every notification in it stays held.
func (d *deliverer) dispatchHeld(ctx context.Context, limit int) (int, error) {
	return d.store.DispatchDue(ctx, d.now(), limit, func(ctx context.Context, tx pgx.Tx, h notify.HeldNotice) error {
		contact, err := d.store.ContactTx(ctx, tx, h.TenantID, h.Notification.CitizenID)
		var c *notify.Contact
		switch {
		case err == nil:
			c = &contact
		case !errors.Is(err, notify.ErrNotFound):
			return err
		}
		sendErr, err := d.settle(ctx, tx, h.TenantID, h.Notification, c, h.Params, h.Cause, false)
		if err != nil || sendErr == nil {
			return err
		}
		d.log.Warn("held notification not sent; holding it again", "notification", h.Notification.ID, "err", sendErr)
		return d.store.PostponeTx(ctx, tx, h.TenantID, h.Notification.ID, sendErr.Error(), d.now().Add(retryHeldAfter))
	})
}

// dispatchWhenDue runs dispatch at once when woken, and of its own accord
// every interval stretching to heldIdleMax while it finds nothing, until
// ctx ends.
func (d *deliverer) dispatchWhenDue(ctx context.Context, interval time.Duration, limit int, wake <-chan struct{}, dispatch sweep.Func) {
	sweep.RunIdle(ctx, interval, heldIdleMax, wake, limit, dispatch,
		func(err error) { d.log.Error("dispatch held notifications", "err", err) }, nil)
}
