// Package postgres stores contacts and notifications in the service's
// schema. Every transaction sets app.tenant_id for row-level security and
// every query also filters by tenant, because superusers (tests, local
// runs) bypass row-level security.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/communication/internal/notify"
	"github.com/agora-platform/agora/services/communication/internal/postgres/pgdb"
)

// Store is the Postgres adapter of the communication service.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool (search_path = the service schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

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
	return notify.Contact{CitizenID: c.CitizenID, Email: deref(c.Email), Phone: deref(c.Phone),
		Preferred: notify.Channel(c.PreferredChannel), UpdatedAt: c.UpdatedAt}
}

func notificationOf(n pgdb.Notification) notify.Notification {
	return notify.Notification{ID: n.ID, RequestID: deref(n.RequestID), CitizenID: n.CitizenID,
		Channel: notify.Channel(n.Channel), Template: n.Template, Status: notify.Status(n.Status),
		Attempts: int(n.Attempts), LastError: deref(n.LastError), FailureReason: deref(n.FailureReason),
		CreatedAt: n.CreatedAt, SentAt: n.SentAt}
}

// PutContact creates or replaces the contact of c.CitizenID in tenantID.
func (s *Store) PutContact(ctx context.Context, tenantID string, c notify.Contact, by string) (notify.Contact, error) {
	var out notify.Contact
	err := s.inTenant(ctx, tenantID, func(q *pgdb.Queries) error {
		row, err := q.UpsertContact(ctx, pgdb.UpsertContactParams{TenantID: tenantID, CitizenID: c.CitizenID,
			Email: opt(c.Email), Phone: opt(c.Phone), PreferredChannel: string(c.Preferred), UpdatedBy: by})
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
// returns the one an earlier failed attempt left.
func (s *Store) EnsureTx(ctx context.Context, tx pgx.Tx, tenantID, sourceEventID string, n notify.Notification) (notify.Notification, error) {
	row, err := pgdb.New(tx).EnsureNotification(ctx, pgdb.EnsureNotificationParams{ID: n.ID, TenantID: tenantID,
		SourceEventID: sourceEventID, RequestID: opt(n.RequestID), CitizenID: n.CitizenID,
		Channel: string(n.Channel), Template: n.Template})
	if err != nil {
		return notify.Notification{}, fmt.Errorf("ensure notification for %s: %w", sourceEventID, err)
	}
	return notificationOf(row), nil
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

// MarkSentTx marks notification id sent inside tx.
func (s *Store) MarkSentTx(ctx context.Context, tx pgx.Tx, tenantID, id string) error {
	return pgdb.New(tx).MarkSent(ctx, pgdb.MarkSentParams{TenantID: tenantID, ID: id})
}

// MarkFailedTx marks notification id failed for reason inside tx; attempted
// counts the attempt that produced the failure.
func (s *Store) MarkFailedTx(ctx context.Context, tx pgx.Tx, tenantID, id, reason, lastError string, attempted bool) error {
	var n int32
	if attempted {
		n = 1
	}
	return pgdb.New(tx).MarkFailed(ctx, pgdb.MarkFailedParams{TenantID: tenantID, ID: id,
		LastError: opt(lastError), FailureReason: &reason, Attempted: n})
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
