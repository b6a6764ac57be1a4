// Package migrations ships the fabric's tables (outbox, inbox, DLQ audit)
// and applies them into a service's own schema with goose.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// fabricFiles returns the fabric's migration files.
func fabricFiles() fs.FS {
	sub, _ := fs.Sub(files, "sql")
	return sub
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Apply migrates schema (which must exist) to the latest version of the
// fabric's tables. Versions are tracked in <schema>.fabric_migrations, apart
// from the service's own migrations. Concurrent callers serialise on a
// session lock, so several instances may start at once.
func Apply(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return ApplyFS(ctx, pool, schema, "fabric_migrations", fabricFiles())
}

// ApplyFS applies the goose migrations in fsys to schema, tracking versions
// in table. Services use it for their own migrations.
func ApplyFS(ctx context.Context, pool *pgxpool.Pool, schema, table string, fsys fs.FS) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("migrations: schema %q is not a plain lowercase identifier", schema)
	}
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID(schema + "." + table)))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(table), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrations %s: %w", schema, err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations %s: %w", schema, err)
	}
	return nil
}

// lockID derives a stable advisory-lock id per schema and table.
func lockID(s string) int64 {
	var h int64 = 1469598103934665603
	for i := 0; i < len(s); i++ {
		h ^= int64(s[i])
		h *= 1099511628211
	}
	return h
}

// CreateSchema creates schema if missing (for tests and local setups; in
// production the schema is provisioned with its owner role).
func CreateSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("migrations: schema %q is not a plain lowercase identifier", schema)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}
