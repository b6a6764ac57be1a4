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

// WaitOutboxPublished waits (20 s) until the broker has confirmed every
// outbox row of event type typ in pool's schema (its search_path), or with
// before set, every such row enqueued before the event with id before.
// A confirmed event is in every queue bound to it, so an observer that
// drains afterwards sees all of them. Filter by type: events nobody binds
// in a test's vhost stay pending, unroutable.
func WaitOutboxPublished(t testing.TB, pool *pgxpool.Pool, typ, before string) {
	t.Helper()
	what := "every " + typ + " out of the outbox"
	query := "SELECT count(*) FROM outbox_event WHERE published_at IS NULL AND event_type = $1"
	args := []any{typ}
	if before != "" {
		what = "every " + typ + " enqueued before " + before + " out of the outbox"
		query += " AND seq < (SELECT seq FROM outbox_event WHERE id = $2)"
		args = append(args, before)
	}
	Eventually(t, 20*time.Second, what, func() bool {
		var n int
		if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
			t.Fatalf("outbox pending: %v", err)
		}
		return n == 0
	})
}
