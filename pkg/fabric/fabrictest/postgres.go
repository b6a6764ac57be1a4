package fabrictest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/migrations"
)

// Schema is a throwaway Postgres schema with the fabric's tables.
type Schema struct {
	Pool *pgxpool.Pool
	Name string
}

// NewSchema creates a uniquely named schema, applies the fabric migrations
// to it and drops it (with everything in it) when the test ends. The pool's
// search_path is the schema.
func NewSchema(t testing.TB, env Env) *Schema {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(env.DatabaseURL)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = name
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("postgres (is it running? run `make infra`): %v", err)
	}
	if err := migrations.CreateSchema(ctx, pool, name); err != nil {
		pool.Close()
		t.Fatalf("postgres (is it running at %s? run `make infra`): %v", env.DatabaseURL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		pool.Close()
	})
	if err := migrations.Apply(ctx, pool, name); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	return &Schema{Pool: pool, Name: name}
}
