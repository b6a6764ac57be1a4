// Package crosstenant runs the fabric's own work that spans tenants by
// design (the relay's bookkeeping, retention, the inbox's security record,
// platform-wide DLQ audit) in a transaction in platform scope: the
// row-level security policies of the fabric's tables (fabric migration
// 00013) admit every tenant's rows there and nowhere else. Services opt a
// transaction in with tenant.Platform; this is the fabric's shorthand.
package crosstenant

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Tx runs fn in a transaction in platform scope and commits it when fn
// returns nil; any error rolls it back.
func Tx(ctx context.Context, db beginner, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("platform tx: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	if _, err := tx.Exec(ctx, wire.PlatformScope); err != nil {
		return fmt.Errorf("platform scope: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("platform tx: commit: %w", err)
	}
	return nil
}
