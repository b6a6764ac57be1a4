// Package postgres stores the analytics projection and the report exports,
// and enqueues the exports' jobs in the same transactions. Transactions set
// app.tenant_id for row-level security and queries also filter by tenant,
// because superusers (tests, local runs) bypass row-level security.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/analytics/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// ErrNoState: the request has not been projected (yet).
var ErrNoState = errors.New("request not projected")

// Enqueuer stores envelopes in the caller's transaction (outbox.Outbox).
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Store is the Postgres adapter of the analytics service: the projection
// the handlers write and the reports read, and the report exports, whose
// workers read their snapshot of the projection.
type Store struct {
	pool   *pgxpool.Pool
	outbox Enqueuer
}

// New returns a Store on pool (search_path = the service schema) that
// enqueues export jobs to ob.
func New(pool *pgxpool.Pool, ob Enqueuer) *Store { return &Store{pool: pool, outbox: ob} }

// inTenant runs fn in a transaction scoped to tenantID and commits it.
func (s *Store) inTenant(ctx context.Context, tenantID string, fn func(tx pgx.Tx, q *pgdb.Queries) error) error {
	return tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error { return fn(tx, pgdb.New(tx)) })
}

// InsertState records s for a new request inside tx. It returns false when
// the request was already projected.
func (s *Store) InsertState(ctx context.Context, tx pgx.Tx, tenantID string, st projection.State) (bool, error) {
	n, err := pgdb.New(tx).InsertState(ctx, pgdb.InsertStateParams{TenantID: tenantID, RequestID: st.RequestID,
		Day: st.Day, ServiceID: st.ServiceID, Channel: st.Channel, Status: st.Status, ChangedAt: st.ChangedAt})
	if err != nil {
		return false, fmt.Errorf("insert state of request %s: %w", st.RequestID, err)
	}
	return n == 1, nil
}

// LockState returns the state of requestID, locked until tx ends, or
// ErrNoState.
func (s *Store) LockState(ctx context.Context, tx pgx.Tx, tenantID, requestID string) (projection.State, error) {
	r, err := pgdb.New(tx).GetStateForUpdate(ctx, pgdb.GetStateForUpdateParams{TenantID: tenantID, RequestID: requestID})
	if errors.Is(err, pgx.ErrNoRows) {
		return projection.State{}, fmt.Errorf("request %s: %w", requestID, ErrNoState)
	}
	if err != nil {
		return projection.State{}, fmt.Errorf("state of request %s: %w", requestID, err)
	}
	return projection.State{RequestID: r.RequestID, Day: r.Day, ServiceID: r.ServiceID, Channel: r.Channel,
		Status: r.Status, ChangedAt: r.ChangedAt}, nil
}

// UpdateState stores the new status of st inside tx.
func (s *Store) UpdateState(ctx context.Context, tx pgx.Tx, tenantID string, st projection.State) error {
	if err := pgdb.New(tenant.Deferring{Tx: tx}).UpdateState(ctx, pgdb.UpdateStateParams{TenantID: tenantID, RequestID: st.RequestID,
		Status: st.Status, ChangedAt: st.ChangedAt}); err != nil {
		return fmt.Errorf("update state of request %s: %w", st.RequestID, err)
	}
	return nil
}

// Apply appends deltas to the projection inside tx. They touch no row
// another message touches: Fold adds them to the counters later, and
// Counts sees them at once.
func (s *Store) Apply(ctx context.Context, tx pgx.Tx, tenantID string, deltas []projection.Delta) error {
	if len(deltas) == 0 {
		return nil
	}
	p := pgdb.AppendDeltasParams{TenantID: tenantID}
	for _, d := range deltas {
		p.Days = append(p.Days, d.Day)
		p.ServiceIds = append(p.ServiceIds, d.ServiceID)
		p.Channels = append(p.Channels, d.Channel)
		p.Statuses = append(p.Statuses, d.Status)
		p.Ns = append(p.Ns, d.N)
	}
	if err := pgdb.New(tenant.Deferring{Tx: tx}).AppendDeltas(ctx, p); err != nil {
		return fmt.Errorf("append %d counter deltas: %w", len(deltas), err)
	}
	return nil
}

// Fold moves up to limit appended deltas of each tenant into the
// counters, one transaction per tenant under that tenant (row-level
// security) and its fold lock, so one instance folds a tenant at a time
// (another skips it). It returns how many deltas it moved: a sweep.Func.
func (s *Store) Fold(ctx context.Context, limit int) (int, error) {
	tenants, err := pgdb.New(s.pool).ListCountTenants(ctx)
	if err != nil {
		return 0, fmt.Errorf("fold: tenants: %w", err)
	}
	moved := 0
	for _, tenantID := range tenants {
		err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
			var mine bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('analytics.fold:' || $1, 0))`, tenantID).Scan(&mine); err != nil || !mine {
				return err
			}
			n, err := pgdb.New(tx).FoldDeltas(ctx, pgdb.FoldDeltasParams{TenantID: tenantID, MaxRows: int32(limit)})
			moved += int(n)
			return err
		})
		if err != nil {
			return moved, fmt.Errorf("fold %s: %w", tenantID, err)
		}
	}
	return moved, nil
}

// Counts returns the non-empty cells of tenantID within r.
func (s *Store) Counts(ctx context.Context, tenantID string, r projection.Range) ([]projection.Row, error) {
	var out []projection.Row
	err := s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListCounts(ctx, pgdb.ListCountsParams{TenantID: tenantID, FromDay: r.From, ToDay: r.To})
		for _, row := range rows {
			out = append(out, projection.Row{Day: row.Day.Format(projection.DateLayout), ServiceID: row.ServiceID,
				Channel: row.Channel, Status: row.Status, Count: row.Count})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("counts of %s: %w", tenantID, err)
	}
	return out, nil
}
