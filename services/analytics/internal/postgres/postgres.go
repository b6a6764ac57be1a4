// Package postgres stores the analytics projection. Transactions set
// app.tenant_id for row-level security and queries also filter by tenant,
// because superusers (tests, local runs) bypass row-level security.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/analytics/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// ErrNoState: the request has not been projected (yet).
var ErrNoState = errors.New("request not projected")

// Store is the Postgres adapter of the analytics service.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool (search_path = the service schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

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
	if err := pgdb.New(tx).UpdateState(ctx, pgdb.UpdateStateParams{TenantID: tenantID, RequestID: st.RequestID,
		Status: st.Status, ChangedAt: st.ChangedAt}); err != nil {
		return fmt.Errorf("update state of request %s: %w", st.RequestID, err)
	}
	return nil
}

// Apply adds deltas to the projection inside tx.
func (s *Store) Apply(ctx context.Context, tx pgx.Tx, tenantID string, deltas []projection.Delta) error {
	q := pgdb.New(tx)
	for _, d := range deltas {
		var err error
		if d.N >= 0 {
			err = q.AddCount(ctx, pgdb.AddCountParams{TenantID: tenantID, Day: d.Day, ServiceID: d.ServiceID,
				Channel: d.Channel, Status: d.Status, Delta: d.N})
		} else {
			var n int64
			n, err = q.SubtractCount(ctx, pgdb.SubtractCountParams{TenantID: tenantID, Day: d.Day, ServiceID: d.ServiceID,
				Channel: d.Channel, Status: d.Status, N: -d.N})
			if err == nil && n != 1 {
				err = errors.New("the cell does not exist")
			}
		}
		if err != nil {
			return fmt.Errorf("count %s/%s/%s/%s %+d: %w", d.Day.Format(projection.DateLayout), d.ServiceID, d.Channel, d.Status, d.N, err)
		}
	}
	return nil
}

// Counts returns the non-empty cells of tenantID within r.
func (s *Store) Counts(ctx context.Context, tenantID string, r projection.Range) ([]projection.Row, error) {
	var out []projection.Row
	err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		rows, err := pgdb.New(tx).ListCounts(ctx, pgdb.ListCountsParams{TenantID: tenantID, FromDay: r.From, ToDay: r.To})
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
