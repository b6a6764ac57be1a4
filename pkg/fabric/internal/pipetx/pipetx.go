// Package pipetx provides a PostgreSQL transaction whose deferred writes
// travel with its next statement, or with its COMMIT, instead of costing a
// round trip each.
//
// A consumer's transaction under load is a chain of short statements, and
// on a machine where the database shares the cores every round trip costs
// a write, a read and two wake-ups on each side. Some statements' results
// are not needed where they are issued: BEGIN, and writes such as an
// outbox row, whose only possible outcome of interest is an error. Tx
// queues those and sends them in one pipeline with whatever comes next, so
// BEGIN rides with the first statement and an outbox insert with the next
// query or the COMMIT. Ordering is kept: queued statements always run
// before the statement they travel with.
//
// What changes for the caller is where a deferred write's error appears:
// at the next statement, Flush or Commit, which return it as a
// *DeferredError (its *pgconn.PgError reachable with errors.As). A caller that must
// attribute a failure to one unit of work (one message of a batch) calls
// Flush before deciding that unit's fate.
package pipetx

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a pgx.Tx on one pooled connection whose BEGIN and deferred writes
// ride with the next statement. It is not safe for concurrent use (nor is
// any pgx.Tx). A savepoint (Begin on a Tx) shares its parent's queue.
//
// LargeObjects is not supported: its zero value is returned.
type Tx struct {
	root *Tx
	name string // savepoint name; empty on the root
	// closed: Commit or Rollback ran on this Tx (or savepoint).
	closed bool

	// Savepoint only: where its SAVEPOINT sits in the root's queue, and
	// the root's sends when it was queued (the same count: still queued).
	queuedAt, sendsAt int

	// Root only.
	pc     *pgxpool.Conn
	conn   *pgx.Conn
	queued []*pgx.QueuedQuery
	sent   bool // a statement reached the server: ending needs a round trip
	sends  int
	depth  int // savepoints opened, for their names
}

// Begin acquires a connection from pool and returns a transaction on it.
// Nothing is sent yet: BEGIN travels with the first statement.
func Begin(ctx context.Context, pool *pgxpool.Pool) (*Tx, error) {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pipetx: acquire: %w", err)
	}
	t := &Tx{pc: pc, conn: pc.Conn()}
	t.root = t
	t.queue("BEGIN")
	return t, nil
}

// ended reports whether t, or the transaction it is a savepoint of, has
// ended: its connection may already serve someone else.
func (t *Tx) ended() bool { return t.closed || t.root.closed }

// Defer queues a statement whose result is not needed: it runs, in order,
// before the next statement sent on the transaction, or at Flush or
// Commit. It must be a single statement (it travels in a pipeline). After
// the transaction ended it returns pgx.ErrTxClosed: a write deferred then
// would be lost.
func (t *Tx) Defer(sql string, args ...any) error {
	if t.ended() {
		return pgx.ErrTxClosed
	}
	t.queue(sql, args...)
	return nil
}

func (t *Tx) queue(sql string, args ...any) {
	r := t.root
	r.queued = append(r.queued, &pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// Queued is how many deferred statements wait to be sent.
func (t *Tx) Queued() int { return len(t.root.queued) }

// send pipelines the queued statements followed by extra and returns the
// results, with the queued statements' already read and checked.
func (t *Tx) send(ctx context.Context, extra ...*pgx.QueuedQuery) (pgx.BatchResults, error) {
	r := t.root
	b := &pgx.Batch{QueuedQueries: append(r.queued, extra...)}
	n := len(r.queued)
	r.queued = nil
	r.sent = true
	r.sends++
	br := r.conn.SendBatch(ctx, b)
	for i := range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, &DeferredError{SQL: b.QueuedQueries[i].SQL, Err: err}
		}
	}
	return br, nil
}

// DeferredError is the failure of a deferred statement, reported by the
// statement, Flush or Commit it travelled with. The transaction is
// aborted (Commit has rolled it back).
type DeferredError struct {
	SQL string
	Err error
}

func (e *DeferredError) Error() string {
	f := strings.Fields(e.SQL)
	return "pipetx: deferred " + strings.Join(f[:min(len(f), 3)], " ") + ": " + e.Err.Error()
}

func (e *DeferredError) Unwrap() error { return e.Err }

// direct reports whether nothing is queued, and then counts the
// statement about to go straight to the connection as sent.
func (r *Tx) direct() bool {
	if len(r.queued) > 0 {
		return false
	}
	r.sent, r.sends = true, r.sends+1
	return true
}

// Flush sends the queued statements now and returns the first error.
func (t *Tx) Flush(ctx context.Context) error {
	if t.ended() {
		return pgx.ErrTxClosed
	}
	if len(t.root.queued) == 0 {
		return nil
	}
	br, err := t.send(ctx)
	if err != nil {
		return err
	}
	return br.Close()
}

// Exec runs sql after the queued statements, in one round trip.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.ended() {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	if r := t.root; r.direct() {
		return r.conn.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql after the queued statements, in one round trip.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.ended() {
		return nil, pgx.ErrTxClosed
	}
	if r := t.root; r.direct() {
		return r.conn.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// batchRows ends the pipeline its rows came from when they are closed.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// QueryRow runs sql after the queued statements, in one round trip.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.ended() {
		return &row{err: pgx.ErrTxClosed}
	}
	if r := t.root; r.direct() {
		return r.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	return &row{rows: rows, err: err}
}

// row is QueryRow's result over Query's rows, as pgx's own.
type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// SendBatch sends b after the queued statements, in one round trip; the
// results are b's alone.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.ended() {
		return failedBatch{pgx.ErrTxClosed}
	}
	if r := t.root; r.direct() {
		return r.conn.SendBatch(ctx, b)
	}
	br, err := t.send(ctx, b.QueuedQueries...)
	if err != nil {
		return failedBatch{err}
	}
	return br
}

// failedBatch answers every result of a batch that was not run with the
// error that stopped it.
type failedBatch struct{ err error }

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return &row{err: f.err} }
func (f failedBatch) Close() error                     { return f.err }
func (f failedBatch) Tx() pgx.Tx                       { return nil }

// CopyFrom sends the queued statements, then copies.
func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if t.ended() {
		return 0, pgx.ErrTxClosed
	}
	if err := t.Flush(ctx); err != nil {
		return 0, err
	}
	t.root.sent = true
	return t.root.conn.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares sql on the transaction's connection.
func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.root.conn.Prepare(ctx, name, sql)
}

// LargeObjects is not supported by Tx.
func (t *Tx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Conn returns the underlying connection. Statements run on it directly
// do not carry the queued ones: Flush first.
func (t *Tx) Conn() *pgx.Conn { return t.root.conn }

// Begin opens a savepoint; SAVEPOINT itself is deferred.
func (t *Tx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.ended() {
		return nil, pgx.ErrTxClosed
	}
	r := t.root
	r.depth++
	sp := &Tx{root: r, name: "pipetx_sp_" + strconv.Itoa(r.depth), queuedAt: len(r.queued), sendsAt: r.sends}
	t.queue("SAVEPOINT " + sp.name)
	return sp, nil
}

// Commit sends the queued statements and COMMIT in one round trip (for a
// savepoint: queues RELEASE SAVEPOINT). A transaction with no statement
// at all commits without a round trip. If a queued statement fails,
// the transaction is rolled back and Commit returns that error.
func (t *Tx) Commit(ctx context.Context) error {
	if t.ended() {
		return pgx.ErrTxClosed
	}
	t.closed = true
	r := t.root
	if t != r {
		t.queue("RELEASE SAVEPOINT " + t.name)
		return nil
	}
	defer r.release()
	if !r.sent && len(r.queued) == 1 {
		r.queued = nil // only BEGIN, which never left: nothing to commit
		return nil
	}
	br, err := t.send(ctx, &pgx.QueuedQuery{SQL: "COMMIT"})
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		r.end(ctx)
		return err
	}
	if tag.String() == "ROLLBACK" { // COMMIT of an aborted transaction
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback drops the queued statements and rolls back. For a savepoint it
// drops what was queued inside it and rolls back to it, without a round
// trip when SAVEPOINT itself was still queued. A transaction that never
// sent a statement rolls back without a round trip. As with pgx, Rollback
// after Commit returns pgx.ErrTxClosed, so a deferred Rollback is safe.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.ended() {
		return pgx.ErrTxClosed
	}
	t.closed = true
	r := t.root
	if t != r {
		if r.sends == t.sendsAt {
			r.queued = r.queued[:t.queuedAt] // SAVEPOINT never left: neither does anything after it
			return nil
		}
		// Everything still queued was queued inside the savepoint. The
		// RELEASE keeps the server's savepoint stack flat (a rolled-back
		// savepoint otherwise stays open) and rides with what comes next.
		r.queued = nil
		if _, err := r.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+t.name); err != nil {
			return err
		}
		r.sends++
		t.queue("RELEASE SAVEPOINT " + t.name)
		return nil
	}
	defer r.release()
	r.queued = nil
	if !r.sent {
		return nil
	}
	if _, err := r.conn.Exec(ctx, "ROLLBACK"); err != nil {
		r.conn.Close(context.WithoutCancel(ctx))
		return err
	}
	return nil
}

// end rolls back whatever a failed COMMIT left open, or drops the
// connection rather than pool it in that state.
func (r *Tx) end(ctx context.Context) {
	if r.conn.IsClosed() || r.conn.PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := r.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		r.conn.Close(context.WithoutCancel(ctx))
	}
}

// release returns the connection to the pool (which destroys it if it is
// not idle).
func (r *Tx) release() {
	if r.pc != nil {
		r.pc.Release()
		r.pc = nil
	}
}

// Deferrer is what Tx offers for deferring: outbox.Enqueue queues its rows
// through it when its transaction has it.
type Deferrer interface {
	Defer(sql string, args ...any) error
}

// Deferring runs its statements on Tx, except Exec, which it defers when
// Tx does (a pipetx.Tx): for generated queries (sqlc) whose Exec result is
// not needed, such as marking a row done.
type Deferring struct{ pgx.Tx }

// Exec defers sql on a deferring transaction, and runs it at once on any
// other. A deferred statement returns an empty command tag.
func (d Deferring) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if df, ok := d.Tx.(Deferrer); ok {
		return pgconn.CommandTag{}, df.Defer(sql, args...)
	}
	return d.Tx.Exec(ctx, sql, args...)
}

var _ pgx.Tx = (*Tx)(nil)
var _ Deferrer = (*Tx)(nil)
