// Package retention deletes rows a service no longer needs, on a schedule:
// processed inbox claims, published outbox rows, DLQ audit rows, and the
// tables a service registers itself (the request service's idempotency
// keys). Deletes run in bounded batches, each its own short transaction,
// so no lock is held for long and a large backlog never becomes one huge
// statement. Tables under row-level security are cleaned tenant by tenant
// with app.tenant_id set, as the service's own queries are: the service's
// role neither owns them nor bypasses RLS (fabric migration 00006 explains
// why nothing else would work without widening a policy).
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agora-platform/agora/pkg/fabric/internal/crosstenant"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

// Table is one table retention cleans.
type Table struct {
	Name   string        // in the service's schema
	Column string        // the timestamptz column a row's age is measured on
	Age    time.Duration // rows older than this are deleted; 0 keeps every row
	// TenantScoped marks a table whose row-level security admits one
	// tenant at a time (a service's tables; the fabric's also admit the
	// platform scope and are cleaned in one pass). It is cleaned once per tenant listed in
	// retention_tenant, so it needs the retention_note_tenant trigger
	// (fabric migration 00006) to keep that list complete.
	TenantScoped bool
}

// result is what one run did to one table (RunOnce). Its callers read
// its fields and never name it, so it is not exported.
type result struct {
	Table        string
	Deleted      int64
	Batches      int   // DELETE statements that removed rows
	LargestBatch int64 // never more than the batch size
}

// Options tune a Retention. The zero value is usable.
type Options struct {
	// Interval is the time between runs (default 1 h).
	Interval time.Duration
	// Batch bounds the rows one DELETE removes (default 1,000).
	Batch int
	// Meter records fabric.retention.rows_deleted{table}; none when nil.
	Meter  metric.Meter
	Logger *slog.Logger
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// retention deletes expired rows of its tables in one schema.
type retention struct {
	pool    *pgxpool.Pool
	schema  string
	tables  []Table
	opts    Options
	deleted metric.Int64Counter
	log     *slog.Logger
}

// New returns the retention of tables in schema. Tables with Age 0 are
// kept as they are. Names are checked here because they are spliced
// into SQL (quoted): a bad one is a programming error found at start-up.
func New(pool *pgxpool.Pool, schema string, tables []Table, opts Options) (*retention, error) {
	if !identifier.MatchString(schema) {
		return nil, fmt.Errorf("retention: schema %q is not a plain lowercase identifier", schema)
	}
	seen := map[string]bool{}
	var kept []Table
	for _, t := range tables {
		if !identifier.MatchString(t.Name) || !identifier.MatchString(t.Column) {
			return nil, fmt.Errorf("retention: table %q column %q: not plain lowercase identifiers", t.Name, t.Column)
		}
		if t.Age < 0 {
			return nil, fmt.Errorf("retention: table %s: negative age %s", t.Name, t.Age)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("retention: table %s registered twice", t.Name)
		}
		seen[t.Name] = true
		if t.Age > 0 {
			kept = append(kept, t)
		}
	}
	if opts.Interval <= 0 {
		opts.Interval = defaultInterval
	}
	if opts.Batch <= 0 {
		opts.Batch = defaultBatch
	}
	meter := opts.Meter
	if meter == nil {
		meter = noop.NewMeterProvider().Meter("")
	}
	deleted, err := meter.Int64Counter("fabric.retention.rows_deleted",
		metric.WithDescription("Rows deleted by retention because they outlived their table's age, by table."))
	if err != nil {
		return nil, fmt.Errorf("retention: metric: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &retention{pool: pool, schema: schema, tables: kept, opts: opts, deleted: deleted,
		log: log.With("component", "retention", "schema", schema)}, nil
}

// Run cleans every Interval until ctx ends, then returns nil. A failed run
// is logged and retried at the next interval: retention is housekeeping,
// never a reason to stop a service. The first run comes after a random
// part of the interval (at most a minute), so instances started together
// do not all delete the same rows at the same moment.
func (r *retention) Run(ctx context.Context) error {
	first := time.Duration(rand.Int64N(int64(min(r.opts.Interval, time.Minute))))
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// Errors are logged by RunOnce.
		_, _ = r.RunOnce(ctx)
		t.Reset(r.opts.Interval)
	}
}

// RunOnce deletes every table's expired rows now and returns what it did.
// A table that fails does not stop the others; their errors are joined.
// One log line reports a run that removed rows.
func (r *retention) RunOnce(ctx context.Context) ([]result, error) {
	start := time.Now()
	var results []result
	var errs []error
	var total int64
	var attrs []any
	for _, t := range r.tables {
		res, err := r.clean(ctx, t)
		results = append(results, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("retention of %s.%s: %w", r.schema, t.Name, err))
		}
		if res.Deleted > 0 {
			total += res.Deleted
			attrs = append(attrs, slog.Int64(t.Name, res.Deleted))
		}
	}
	err := errors.Join(errs...)
	if total > 0 {
		r.log.Info("retention removed rows", "rows", total, slog.Group("deleted", attrs...), "took", time.Since(start).Round(time.Millisecond))
	}
	if err != nil && ctx.Err() == nil {
		r.log.Warn("retention failed", "err", err)
	}
	return results, err
}

// clean deletes t's expired rows batch by batch (tenant by tenant when t
// is tenant-scoped) until a batch comes back short.
func (r *retention) clean(ctx context.Context, t Table) (result, error) {
	res := result{Table: t.Name}
	if !t.TenantScoped {
		// The fabric's tables admit the platform scope (migration 00013):
		// one statement per batch across every tenant.
		return res, r.drain(ctx, t, &res, func(sql string, args ...any) (int64, error) {
			var n int64
			err := crosstenant.Tx(ctx, r.pool, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, sql, args...)
				n = tag.RowsAffected()
				return err
			})
			return n, err
		}, "")
	}
	tenants, err := r.tenants(ctx)
	if err != nil {
		return res, err
	}
	for _, tenantID := range tenants {
		err := r.drain(ctx, t, &res, func(sql string, args ...any) (int64, error) {
			var n int64
			// Scoped like every request and message transaction.
			err := tenant.Tx(ctx, r.pool, tenantID, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, sql, args...)
				n = tag.RowsAffected()
				return err
			})
			return n, err
		}, tenantID)
		if err != nil {
			return res, fmt.Errorf("tenant %s: %w", tenantID, err)
		}
	}
	return res, nil
}

// drain runs t's batched DELETE through exec until fewer than Batch rows
// go, counting each batch into res and the metric as it commits (so a run
// cut short still reports what it removed).
func (r *retention) drain(ctx context.Context, t Table, res *result, exec func(sql string, args ...any) (int64, error), tenantID string) error {
	sql, args := r.statement(t, tenantID)
	for {
		if err := ctx.Err(); err != nil {
			return nil
		}
		n, err := exec(sql, args...)
		if err != nil {
			return err
		}
		if n > 0 {
			res.Deleted += n
			res.Batches++
			res.LargestBatch = max(res.LargestBatch, n)
			r.deleted.Add(ctx, n, metric.WithAttributes(attribute.String("table", t.Name)))
		}
		if n < int64(r.opts.Batch) {
			return nil
		}
	}
}

// statement is one bounded DELETE of t's expired rows. The row addresses
// (ctid) are picked first with a LIMIT and deleted by a TID scan: a plain
// DELETE cannot take a LIMIT. The age condition is repeated outside, so a
// row changed after it was picked is checked again before it goes. The
// cut-off is the database's clock, never the service's. A tenant-scoped
// table is filtered by tenant too, as every query of the platform is,
// because a superuser (local runs) bypasses row-level security.
func (r *retention) statement(t Table, tenantID string) (string, []any) {
	tbl := pgx.Identifier{r.schema, t.Name}.Sanitize()
	col := pgx.Identifier{t.Column}.Sanitize()
	cond := fmt.Sprintf("%s < now() - make_interval(secs => $1)", col)
	args := []any{t.Age.Seconds(), r.opts.Batch}
	if t.TenantScoped {
		cond += " AND tenant_id = $3"
		args = append(args, tenantID)
	}
	return fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid = ANY (ARRAY(SELECT ctid FROM %[1]s WHERE %[2]s LIMIT $2)) AND %[2]s`, tbl, cond), args
}

// tenants lists the tenants that have had rows in the schema's
// tenant-scoped tables (kept by the retention_note_tenant trigger).
func (r *retention) tenants(ctx context.Context) ([]string, error) {
	rows, err := r.pool.Query(ctx, "SELECT tenant_id FROM "+pgx.Identifier{r.schema, "retention_tenant"}.Sanitize()+" ORDER BY tenant_id")
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return tenants, nil
}
