package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/analytics/internal/export"
	"github.com/agora-platform/agora/services/analytics/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// The report exports: Store keeps them, enqueues their jobs, and gives
// export workers their snapshot of the projection.
var _ export.Store = (*Store)(nil)

// CreateExport stores e and enqueues its report.export.v1 job in one
// transaction: the job is published if and only if the export exists.
func (s *Store) CreateExport(ctx context.Context, e export.Export) (export.Export, error) {
	job, err := export.NewJob(e)
	if err != nil {
		return export.Export{}, err
	}
	var out export.Export
	err = s.inTenant(ctx, e.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		if err := q.InsertExport(ctx, pgdb.InsertExportParams{TenantID: e.TenantID, ID: e.ID, RequestedBy: e.RequestedBy,
			FromDay: e.Range.From, ToDay: e.Range.To, Format: string(e.Format)}); err != nil {
			return fmt.Errorf("insert export %s: %w", e.ID, err)
		}
		if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "report-export", ID: e.ID}, Envelope: job}); err != nil {
			return fmt.Errorf("enqueue %s for %s: %w", job.Type, e.ID, err)
		}
		r, err := q.GetExport(ctx, pgdb.GetExportParams{TenantID: e.TenantID, ID: e.ID})
		if err != nil {
			return fmt.Errorf("read export %s back: %w", e.ID, err)
		}
		out = fromRow(r)
		return nil
	})
	return out, err
}

// GetExport returns export id of tenantID, or export.ErrNotFound (an id that is
// not a UUID included, so any id of another tenant and a garbage one look
// the same).
func (s *Store) GetExport(ctx context.Context, tenantID, id string) (export.Export, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return export.Export{}, export.ErrNotFound
	}
	var out export.Export
	err = s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		// The canonical spelling: PostgreSQL refuses some that uuid.Parse takes.
		r, err := q.GetExport(ctx, pgdb.GetExportParams{TenantID: tenantID, ID: u.String()})
		if errors.Is(err, pgx.ErrNoRows) {
			return export.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("export %s: %w", u, err)
		}
		out = fromRow(r)
		return nil
	})
	return out, err
}

// Claim implements export.Store.
func (s *Store) Claim(ctx context.Context, tenantID, id string) (export.Export, error) {
	var out export.Export
	err := s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		r, err := q.ClaimExport(ctx, pgdb.ClaimExportParams{TenantID: tenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			// Nothing to claim: finished, or not there at all.
			if _, err := q.GetExport(ctx, pgdb.GetExportParams{TenantID: tenantID, ID: id}); errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("export %s of %s: %w", id, tenantID, export.ErrNotFound)
			} else if err != nil {
				return fmt.Errorf("export %s: %w", id, err)
			}
			return export.ErrFinished
		}
		if err != nil {
			return fmt.Errorf("claim export %s: %w", id, err)
		}
		out = fromRow(r)
		return nil
	})
	return out, err
}

// Progress implements export.Store.
func (s *Store) Progress(ctx context.Context, tenantID, id string, attempt int, total, written int64) error {
	return s.fenced(ctx, tenantID, id, "progress", func(q *pgdb.Queries) (int64, error) {
		return q.UpdateExportProgress(ctx, pgdb.UpdateExportProgressParams{TenantID: tenantID, ID: id, Attempt: int32(attempt),
			RowsTotal: total, RowsWritten: written})
	})
}

// Finish implements export.Store.
func (s *Store) Finish(ctx context.Context, tenantID, id string, attempt int, objectKey string, rows int64) error {
	return s.fenced(ctx, tenantID, id, "finish", func(q *pgdb.Queries) (int64, error) {
		return q.FinishExport(ctx, pgdb.FinishExportParams{TenantID: tenantID, ID: id, Attempt: int32(attempt),
			Rows: rows, ObjectKey: objectKey})
	})
}

// fenced runs an update of attempt's and returns export.ErrSuperseded when
// it changed nothing: another attempt owns the export now.
func (s *Store) fenced(ctx context.Context, tenantID, id, what string, update func(q *pgdb.Queries) (int64, error)) error {
	return s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		n, err := update(q)
		if err != nil {
			return fmt.Errorf("%s of export %s: %w", what, id, err)
		}
		if n == 0 {
			return export.ErrSuperseded
		}
		return nil
	})
}

// Release implements export.Store.
func (s *Store) Release(ctx context.Context, tenantID, id string, attempt int, giveUp bool, reason string) error {
	status := export.StatusQueued
	if giveUp {
		status = export.StatusFailed
	}
	return s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		if _, err := q.ReleaseExport(ctx, pgdb.ReleaseExportParams{TenantID: tenantID, ID: id, Attempt: int32(attempt),
			Status: string(status), Error: reason}); err != nil {
			return fmt.Errorf("release export %s: %w", id, err)
		}
		return nil
	})
}

// Fail implements export.Store.
func (s *Store) Fail(ctx context.Context, tenantID, id, reason string) error {
	return s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		if _, err := q.FailExport(ctx, pgdb.FailExportParams{TenantID: tenantID, ID: id, Error: reason}); err != nil {
			return fmt.Errorf("fail export %s: %w", id, err)
		}
		return nil
	})
}

// View implements export.Store with a read-only REPEATABLE READ
// transaction: every page sees the projection as it was at the first
// query, so the file adds up to the count it reports. Progress goes
// through other, short transactions meanwhile.
func (s *Store) View(ctx context.Context, tenantID string, r projection.Range, fn func(export.Snapshot) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("export snapshot: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	if err := tenant.Set(ctx, tx, tenantID); err != nil {
		return err
	}
	// The day before the range sorts before every row in it: the first
	// page starts there.
	snap := &snapshot{q: pgdb.New(tx), tenantID: tenantID, r: r, after: pgdb.ListExportRowsRow{Day: r.From.AddDate(0, 0, -1)}}
	if err := fn(snap); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("export snapshot: commit: %w", err)
	}
	return nil
}

type snapshot struct {
	q        *pgdb.Queries
	tenantID string
	r        projection.Range
	after    pgdb.ListExportRowsRow // the last row returned
}

func (s *snapshot) Count(ctx context.Context) (int64, error) {
	n, err := s.q.CountExportRows(ctx, pgdb.CountExportRowsParams{TenantID: s.tenantID, FromDay: s.r.From, ToDay: s.r.To})
	if err != nil {
		return 0, fmt.Errorf("count export rows: %w", err)
	}
	return n, nil
}

func (s *snapshot) Next(ctx context.Context, n int) ([]projection.Row, error) {
	rows, err := s.q.ListExportRows(ctx, pgdb.ListExportRowsParams{TenantID: s.tenantID, FromDay: s.r.From, ToDay: s.r.To,
		AfterDay: s.after.Day, AfterService: s.after.ServiceID, AfterChannel: s.after.Channel, AfterStatus: s.after.Status,
		PageSize: int32(n)})
	if err != nil {
		return nil, fmt.Errorf("export rows after %s/%s/%s/%s: %w", s.after.Day.Format(projection.DateLayout),
			s.after.ServiceID, s.after.Channel, s.after.Status, err)
	}
	out := make([]projection.Row, len(rows))
	for i, row := range rows {
		out[i] = projection.Row{Day: row.Day.Format(projection.DateLayout), ServiceID: row.ServiceID,
			Channel: row.Channel, Status: row.Status, Count: row.Count}
	}
	if len(rows) > 0 {
		s.after = rows[len(rows)-1]
	}
	return out, nil
}

func fromRow(r pgdb.ReportExport) export.Export {
	e := export.Export{ID: r.ID, TenantID: r.TenantID, RequestedBy: r.RequestedBy,
		Range: projection.Range{From: r.FromDay, To: r.ToDay}, Format: export.Format(r.Format), Status: export.Status(r.Status),
		Attempt: int(r.Attempt), RowsTotal: r.RowsTotal, RowsWritten: r.RowsWritten,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	if r.ObjectKey != nil {
		e.ObjectKey = *r.ObjectKey
	}
	if r.Error != nil {
		e.Error = *r.Error
	}
	return e
}
