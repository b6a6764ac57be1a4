// Package postgres stores contacts and notifications in the service's
// schema, and enqueues the notifications' outcomes in the same
// transactions. Every transaction sets app.tenant_id for row-level security and
// every query also filters by tenant, because superusers (tests, local
// runs) bypass row-level security.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/communication/internal/notify"
	"github.com/agora-platform/agora/services/communication/internal/postgres/pgdb"
)

// Enqueuer stores envelopes in the caller's transaction (outbox.Outbox).
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Store is the Postgres adapter of the communication service.
type Store struct {
	pool   *pgxpool.Pool
	outbox Enqueuer
}

// New returns a Store on pool (search_path = the service schema) that
// enqueues events to ob.
func New(pool *pgxpool.Pool, ob Enqueuer) *Store { return &Store{pool: pool, outbox: ob} }

// inTenant runs fn in a transaction scoped to tenantID and commits it.
func (s *Store) inTenant(ctx context.Context, tenantID string, fn func(q *pgdb.Queries) error) error {
	return tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error { return fn(pgdb.New(tx)) })
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func contactOf(c pgdb.Contact) notify.Contact {
	out := notify.Contact{CitizenID: c.CitizenID, Email: deref(c.Email), Phone: deref(c.Phone),
		Preferred: notify.Channel(c.PreferredChannel), ProgressNotices: &c.ProgressNotices, UpdatedAt: c.UpdatedAt}
	if c.QuietStart != nil {
		out.QuietHours = &notify.QuietHours{Start: *c.QuietStart, End: deref(c.QuietEnd), TimeZone: deref(c.QuietTimeZone)}
	}
	return out
}

func notificationOf(n pgdb.Notification) notify.Notification {
	return notify.Notification{ID: n.ID, RequestID: deref(n.RequestID), CitizenID: n.CitizenID,
		Channel: notify.Channel(n.Channel), Template: n.Template, Status: notify.Status(n.Status),
		Attempts: int(n.Attempts), LastError: deref(n.LastError), FailureReason: deref(n.FailureReason),
		CoalescedInto: deref(n.CoalescedInto), CreatedAt: n.CreatedAt, SentAt: n.SentAt}
}

// PutContact creates or replaces the contact of c.CitizenID in tenantID.
func (s *Store) PutContact(ctx context.Context, tenantID string, c notify.Contact, by string) (notify.Contact, error) {
	var out notify.Contact
	err := s.inTenant(ctx, tenantID, func(q *pgdb.Queries) error {
		p := pgdb.UpsertContactParams{TenantID: tenantID, CitizenID: c.CitizenID, Email: opt(c.Email),
			Phone: opt(c.Phone), PreferredChannel: string(c.Preferred), UpdatedBy: by,
			ProgressNotices: c.WantsProgressNotices()}
		if q := c.QuietHours; q != nil {
			p.QuietStart, p.QuietEnd, p.QuietTimeZone = &q.Start, &q.End, &q.TimeZone
		}
		row, err := q.UpsertContact(ctx, p)
		out = contactOf(row)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("put contact %s: %w", c.CitizenID, err)
	}
	return out, nil
}

// Contact returns the contact of citizenID in tenantID, or notify.ErrNotFound.
func (s *Store) Contact(ctx context.Context, tenantID, citizenID string) (notify.Contact, error) {
	var out notify.Contact
	err := s.inTenant(ctx, tenantID, func(q *pgdb.Queries) error {
		var err error
		out, err = getContact(ctx, q, tenantID, citizenID)
		return err
	})
	return out, err
}

// ContactTx is Contact inside tx (whose tenant is already set).
func (s *Store) ContactTx(ctx context.Context, tx pgx.Tx, tenantID, citizenID string) (notify.Contact, error) {
	return getContact(ctx, pgdb.New(tx), tenantID, citizenID)
}

func getContact(ctx context.Context, q *pgdb.Queries, tenantID, citizenID string) (notify.Contact, error) {
	row, err := q.GetContact(ctx, pgdb.GetContactParams{TenantID: tenantID, CitizenID: citizenID})
	if errors.Is(err, pgx.ErrNoRows) {
		return notify.Contact{}, fmt.Errorf("contact %s: %w", citizenID, notify.ErrNotFound)
	}
	if err != nil {
		return notify.Contact{}, fmt.Errorf("contact %s: %w", citizenID, err)
	}
	return contactOf(row), nil
}

// EnsureTx creates the pending notification of sourceEventID inside tx, or
// returns the one an earlier failed attempt left, with the citizen's
// contact (nil when they have none), in one round trip. An empty
// n.Channel is the contact's preferred channel, e-mail without a contact.
func (s *Store) EnsureTx(ctx context.Context, tx pgx.Tx, tenantID, sourceEventID string, n notify.Notification) (notify.Notification, *notify.Contact, error) {
	row, err := pgdb.New(tx).EnsureNotification(ctx, pgdb.EnsureNotificationParams{ID: n.ID, TenantID: tenantID,
		SourceEventID: sourceEventID, RequestID: opt(n.RequestID), CitizenID: n.CitizenID,
		Channel: opt(string(n.Channel)), Template: n.Template})
	if err != nil {
		return notify.Notification{}, nil, fmt.Errorf("ensure notification for %s: %w", sourceEventID, err)
	}
	out := notificationOf(pgdb.Notification{ID: row.ID, TenantID: row.TenantID, SourceEventID: row.SourceEventID,
		RequestID: row.RequestID, CitizenID: row.CitizenID, Channel: row.Channel, Template: row.Template,
		Status: row.Status, Attempts: row.Attempts, LastError: row.LastError, FailureReason: row.FailureReason,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, SentAt: row.SentAt})
	if row.ContactCitizenID == nil {
		return out, nil, nil
	}
	c := contactOf(pgdb.Contact{
		TenantID: tenantID, CitizenID: *row.ContactCitizenID, Email: row.ContactEmail, Phone: row.ContactPhone,
		PreferredChannel: deref(row.ContactPreferredChannel),
		ProgressNotices:  row.ContactProgressNotices == nil || *row.ContactProgressNotices,
		QuietStart:       row.ContactQuietStart, QuietEnd: row.ContactQuietEnd, QuietTimeZone: row.ContactQuietTimeZone,
	})
	if row.ContactUpdatedAt != nil {
		c.UpdatedAt = *row.ContactUpdatedAt
	}
	return out, &c, nil
}

// RecordFailure counts a failed attempt of n (the notification of
// sourceEventID, still pending) with its error, creating the row if the
// rolled-back delivery transaction took it away. It commits at once.
func (s *Store) RecordFailure(ctx context.Context, tenantID, sourceEventID string, n notify.Notification, lastError string) error {
	err := s.inTenant(ctx, tenantID, func(q *pgdb.Queries) error {
		return q.RecordAttemptFailure(ctx, pgdb.RecordAttemptFailureParams{ID: n.ID, TenantID: tenantID,
			SourceEventID: sourceEventID, RequestID: opt(n.RequestID), CitizenID: n.CitizenID,
			Channel: string(n.Channel), Template: n.Template, LastError: &lastError})
	})
	if err != nil {
		return fmt.Errorf("record attempt of notification %s: %w", n.ID, err)
	}
	return nil
}

// MarkSentTx marks notification id sent and enqueues its outcome event
// inside tx.
func (s *Store) MarkSentTx(ctx context.Context, tx pgx.Tx, tenantID, id string, event envelope.Envelope) error {
	// Deferred: the update travels with the transaction's next statement
	// or its COMMIT (pipetx), as the event's outbox row does.
	if err := pgdb.New(tenant.Deferring{Tx: tx}).MarkSent(ctx, pgdb.MarkSentParams{TenantID: tenantID, ID: id}); err != nil {
		return fmt.Errorf("mark notification %s sent: %w", id, err)
	}
	return s.enqueue(ctx, tx, id, event)
}

// MarkFailedTx marks notification id failed for reason and enqueues its
// outcome event inside tx; attempted counts the attempt that produced the
// failure.
func (s *Store) MarkFailedTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason, lastError string, attempted bool, event envelope.Envelope) error {
	var n int32
	if attempted {
		n = 1
	}
	if err := pgdb.New(tx).MarkFailed(ctx, pgdb.MarkFailedParams{TenantID: tenantID, ID: id,
		LastError: opt(lastError), FailureReason: &reason, Attempted: n}); err != nil {
		return fmt.Errorf("mark notification %s failed: %w", id, err)
	}
	return s.enqueue(ctx, tx, id, event)
}

// enqueue stores event, about notification id, in the outbox inside tx.
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, id string, event envelope.Envelope) error {
	if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "notification", ID: id}, Envelope: event}); err != nil {
		return fmt.Errorf("enqueue %s of notification %s: %w", event.Type, id, err)
	}
	return nil
}

// Notifications returns the notifications of requestID in tenantID; when
// citizenID is set, only that citizen's.
func (s *Store) Notifications(ctx context.Context, tenantID, requestID, citizenID string) ([]notify.Notification, error) {
	out := []notify.Notification{}
	err := s.inTenant(ctx, tenantID, func(q *pgdb.Queries) error {
		rows, err := q.ListNotifications(ctx, pgdb.ListNotificationsParams{TenantID: tenantID,
			RequestID: &requestID, CitizenID: opt(citizenID)})
		for _, r := range rows {
			out = append(out, notificationOf(r))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("notifications of request %s: %w", requestID, err)
	}
	return out, nil
}

// MarkWithheldTx records inside tx that notification id is not sent for
// reason.
func (s *Store) MarkWithheldTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason string) error {
	return pgdb.New(tx).MarkWithheld(ctx, pgdb.MarkWithheldParams{TenantID: tenantID, ID: id, FailureReason: &reason})
}

// MarkHeldTx holds notification id until until inside tx, keeping what
// sending it then needs: what it says (its template may have changed by
// coalescing) and the header of the message that asked for it.
func (s *Store) MarkHeldTx(ctx context.Context, tx pgx.Tx, tenantID, id string, until time.Time, notice notify.Notice, cause envelope.Envelope) error {
	ps, err := json.Marshal(notice.Params)
	if err != nil {
		return fmt.Errorf("hold notification %s: %w", id, err)
	}
	cause.Payload = json.RawMessage("{}") // the header is what a derived event needs
	c, err := json.Marshal(cause)
	if err != nil {
		return fmt.Errorf("hold notification %s: %w", id, err)
	}
	// One statement marks the notification held and indexes its hold.
	if err := pgdb.New(tx).MarkHeld(ctx, pgdb.MarkHeldParams{TenantID: tenantID, ID: id, Template: notice.Template,
		NotBefore: until, Params: ps, Cause: c}); err != nil {
		return fmt.Errorf("hold notification %s: %w", id, err)
	}
	return nil
}

// SupersedeHeldTx makes n the one held status notice of its request and
// channel: under a lock on that key, kept until tx ends, it marks every
// other notice of theirs still held, of one of templates, coalesced into
// n, releases their holds and returns them, oldest first.
func (s *Store) SupersedeHeldTx(ctx context.Context, tx pgx.Tx, tenantID string, n notify.Notification, templates []string) ([]notify.Superseded, error) {
	q := pgdb.New(tx)
	if err := q.LockRequestNotices(ctx, pgdb.LockRequestNoticesParams{TenantID: tenantID, RequestID: n.RequestID,
		Channel: string(n.Channel)}); err != nil {
		return nil, fmt.Errorf("coalesce notice %s: lock its request: %w", n.ID, err)
	}
	rows, err := q.SupersedeHeld(ctx, pgdb.SupersedeHeldParams{TenantID: tenantID, RequestID: &n.RequestID,
		Channel: string(n.Channel), Templates: templates, ID: n.ID})
	if err != nil {
		return nil, fmt.Errorf("coalesce notice %s: %w", n.ID, err)
	}
	out := make([]notify.Superseded, 0, len(rows))
	for _, r := range rows {
		sup := notify.Superseded{ID: r.ID, Notice: notify.Notice{Template: r.Template}, NotBefore: r.NotBefore}
		if err := json.Unmarshal(r.Params, &sup.Notice.Params); err != nil {
			return nil, fmt.Errorf("coalesce notice %s: params of %s: %w", n.ID, r.ID, err)
		}
		out = append(out, sup)
	}
	return out, nil
}

// DispatchDue hands each held notification due at now (at most limit) to
// fn inside one transaction, scoped to the notification's tenant in turn,
// and commits. Its hold is gone unless fn puts it back (PostponeTx); fn's
// error aborts the batch and keeps every hold. It returns how many
// notifications fn got.
func (s *Store) DispatchDue(ctx context.Context, now time.Time, limit int, fn func(ctx context.Context, tx pgx.Tx, h notify.HeldNotice) error) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("dispatch held: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := pgdb.New(tx)
	if err := tenant.Platform(ctx, tx); err != nil { // due holds of every tenant
		return 0, fmt.Errorf("dispatch held: %w", err)
	}
	holds, err := q.DueHolds(ctx, pgdb.DueHoldsParams{Now: now, MaxRows: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("dispatch held: due: %w", err)
	}
	if len(holds) == 0 {
		return 0, nil
	}
	// Every hold taken is released at once, while in platform scope; one
	// whose send fails is held again (PostponeTx), and the whole batch
	// stays held if the transaction rolls back. A hold's notification is
	// read with its tenant's others, in the tenant's scope.
	ids := make([]string, len(holds))
	for i, h := range holds {
		ids[i] = h.NotificationID
	}
	if err := q.DeleteHolds(ctx, ids); err != nil {
		return 0, fmt.Errorf("dispatch held: release: %w", err)
	}
	rows, scope, err := s.heldByTenant(ctx, tx, q, holds)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range holds {
		row, ok := rows[h.NotificationID]
		if !ok || notify.Status(row.Status) != notify.Held {
			continue // erased with its citizen's data meanwhile, or no longer held
		}
		if scope != h.TenantID {
			if err := tenant.Set(ctx, tx, h.TenantID); err != nil {
				return 0, err
			}
			scope = h.TenantID
		}
		held := notify.HeldNotice{TenantID: h.TenantID, Notification: notificationOf(row)}
		if err := json.Unmarshal(row.Params, &held.Params); err != nil {
			return 0, fmt.Errorf("dispatch held: params of %s: %w", row.ID, err)
		}
		if err := json.Unmarshal(row.Cause, &held.Cause); err != nil {
			return 0, fmt.Errorf("dispatch held: cause of %s: %w", row.ID, err)
		}
		if err := fn(ctx, tx, held); err != nil {
			return 0, err
		}
		n++
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("dispatch held: commit: %w", err)
	}
	return n, nil
}

// heldByTenant reads the notifications of holds, one statement per tenant
// (each in its tenant's scope, which notification's row-level security
// needs), and returns the tenant whose scope it leaves tx in, the last
// read.
func (s *Store) heldByTenant(ctx context.Context, tx pgx.Tx, q *pgdb.Queries, holds []pgdb.NotificationHold) (map[string]pgdb.Notification, string, error) {
	byTenant := map[string][]string{}
	var tenants []string
	for _, h := range holds {
		if _, ok := byTenant[h.TenantID]; !ok {
			tenants = append(tenants, h.TenantID)
		}
		byTenant[h.TenantID] = append(byTenant[h.TenantID], h.NotificationID)
	}
	out := make(map[string]pgdb.Notification, len(holds))
	for _, t := range tenants {
		if err := tenant.Set(ctx, tx, t); err != nil {
			return nil, "", err
		}
		rows, err := q.HeldNotifications(ctx, pgdb.HeldNotificationsParams{TenantID: t, Ids: byTenant[t]})
		if err != nil {
			return nil, "", fmt.Errorf("dispatch held: notifications of %s: %w", t, err)
		}
		for _, r := range rows {
			out[r.ID] = r
		}
	}
	return out, tenants[len(tenants)-1], nil
}

// PostponeTx counts a failed attempt to send held notification id and
// holds it again until until.
func (s *Store) PostponeTx(ctx context.Context, tx pgx.Tx, tenantID, id, lastError string, until time.Time) error {
	q := pgdb.New(tx)
	if err := q.PostponeHeld(ctx, pgdb.PostponeHeldParams{TenantID: tenantID, ID: id, LastError: &lastError, NotBefore: &until}); err != nil {
		return fmt.Errorf("postpone notification %s: %w", id, err)
	}
	if err := q.PutHold(ctx, pgdb.PutHoldParams{NotificationID: id, TenantID: tenantID, NotBefore: until}); err != nil {
		return fmt.Errorf("postpone notification %s: %w", id, err)
	}
	return nil
}
