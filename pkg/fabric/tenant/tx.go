package tenant

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/internal/pipetx"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

// setting is the Postgres setting every tenant table's row-level security
// policy reads (current_setting('app.tenant_id', true)).
const setting = "app.tenant_id"

// beginner starts a transaction: *pgxpool.Pool, *pgx.Conn, or a pgx.Tx
// (which nests as a savepoint).
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Tx runs fn in a transaction scoped to tenantID for row-level security and
// commits it when fn returns nil; any error rolls it back. fn's own error
// is returned as it is, so callers can still match their sentinel errors.
//
// The rollback runs without ctx's cancellation: a request that is cancelled
// mid-transaction still gives its connection back clean instead of leaving
// pgx to close it.
func Tx(ctx context.Context, db beginner, tenantID string, fn func(pgx.Tx) error) error {
	tx, err := begin(ctx, db, tenantID)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("tenant tx: commit: %w", err)
	}
	return nil
}

// begin opens a transaction scoped to tenantID. On a pool it is a
// pipetx.Tx: BEGIN and the setting ride with the first statement, and
// deferred writes (outbox rows) with the COMMIT. A connection sends BEGIN
// and the setting in one simple-protocol round trip (the setting as a
// quoted literal: the simple protocol has no parameters); a transaction,
// nesting a savepoint, sets it after.
func begin(ctx context.Context, db beginner, tenantID string) (pgx.Tx, error) {
	if pool, ok := db.(*pgxpool.Pool); ok {
		tx, err := pipetx.Begin(ctx, pool)
		if err != nil {
			return nil, fmt.Errorf("tenant tx: begin for %s: %w", tenantID, err)
		}
		if err := tx.Defer("SELECT set_config('"+setting+"', $1, true)", tenantID); err != nil {
			tx.Rollback(context.WithoutCancel(ctx)) // gives the connection back
			return nil, fmt.Errorf("tenant tx: begin for %s: %w", tenantID, err)
		}
		return tx, nil
	}
	if txb, ok := db.(interface {
		BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		tx, err := txb.BeginTx(ctx, pgx.TxOptions{
			BeginQuery: "BEGIN; SELECT set_config('" + setting + "', " + literal(tenantID) + ", true)"})
		if err != nil {
			return nil, fmt.Errorf("tenant tx: begin for %s: %w", tenantID, err)
		}
		return tx, nil
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("tenant tx: begin: %w", err)
	}
	if err := Set(ctx, tx, tenantID); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	return tx, nil
}

// literal quotes s as an escape string constant (E'…'), whose meaning does
// not depend on standard_conforming_strings: backslashes and quotes are
// doubled. PostgreSQL refuses a NUL in text, literal or parameter alike.
func literal(s string) string {
	return "E'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
}

// Set scopes the open transaction tx to tenantID until it ends
// (set_config(…, true) is transaction-local, so a pooled connection never
// carries one tenant's scope into the next transaction). It is for paths
// that already hold a transaction: an inbox handler's, or one that works
// through several tenants in turn, setting each before touching its rows.
// It ends a platform scope Platform opened: what follows sees one tenant.
func Set(ctx context.Context, tx pgx.Tx, tenantID string) error {
	if _, err := tx.Exec(ctx, "SELECT set_config('"+setting+"', $1, true), set_config('"+wire.ScopeSetting+"', '', true)", tenantID); err != nil {
		return fmt.Errorf("set tenant %s: %w", tenantID, err)
	}
	return nil
}

// Platform opts the open transaction tx into platform scope, for the few
// statements that work across tenants by design: a sweep that finds due
// timers of every tenant (then Set scopes the work on each), the relay's
// claim, retention, operator counts. It lasts until Set or the end of tx.
//
// Row-level security guards against a query that forgot its tenant, not
// against code that asks for more: a service's own role can call this.
// That is why it is a named, greppable opt-in (docs/architecture.md lists
// who calls it) and never a default. The fabric's own cross-tenant work
// goes through internal/crosstenant, which sets the same scope.
func Platform(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, wire.PlatformScope); err != nil {
		return fmt.Errorf("platform scope: %w", err)
	}
	return nil
}

// Deferring wraps the transaction Tx hands fn for generated queries
// (sqlc): their Exec statements, whose result only an error could matter,
// are deferred to travel with the next statement or the COMMIT instead of
// costing a round trip each; on any other pgx.Tx they run at once. A
// deferred statement's error surfaces at the next statement or the commit.
type Deferring = pipetx.Deferring
