// Package retentiontest gives tests a schema provisioned the way
// deploy/postgres provisions a service's: an owner role that owns and
// migrates it, and a service role that only has DML on its tables; both
// log in, neither is a superuser nor bypasses row-level security. Tests
// use it to prove that retention works as the service's role, where
// FORCE ROW LEVEL SECURITY applies.
package retentiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schema is a throwaway schema with its two roles.
type schema struct {
	Name    string
	Admin   *pgxpool.Pool // the test's superuser (DATABASE_URL); sees every row
	Owner   *pgxpool.Pool // the schema owner: runs migrations
	Service *pgxpool.Pool // the service's role: DML only, subject to RLS
	// OwnerRole and ServiceRole are the roles' names.
	OwnerRole, ServiceRole string
}

// NewSchema creates the roles and the schema, runs migrate as the owner,
// and drops all of it when the test ends. databaseURL must connect as a
// superuser on a server that lets the new roles in without a password
// (the local trust setup of `make infra`).
func NewSchema(t testing.TB, databaseURL string, migrate func(ctx context.Context, owner *pgxpool.Pool, schema string) error) *schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	s := &schema{Name: "rt_" + suffix, OwnerRole: "rt_" + suffix + "_owner", ServiceRole: "rt_" + suffix + "_svc"}
	s.Admin = connect(t, ctx, databaseURL, "", s.Name)
	schema, owner, svc := pgx.Identifier{s.Name}.Sanitize(), pgx.Identifier{s.OwnerRole}.Sanitize(), pgx.Identifier{s.ServiceRole}.Sanitize()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range []*pgxpool.Pool{s.Owner, s.Service} {
			if p != nil {
				p.Close()
			}
		}
		for _, q := range []string{"DROP SCHEMA IF EXISTS " + schema + " CASCADE",
			"DROP OWNED BY " + owner + ", " + svc, "DROP ROLE IF EXISTS " + svc, "DROP ROLE IF EXISTS " + owner} {
			if _, err := s.Admin.Exec(ctx, q); err != nil {
				t.Logf("cleanup %q: %v", q, err)
			}
		}
		s.Admin.Close()
	})
	var db string
	if err := s.Admin.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatalf("postgres (is it running? run `make infra`): %v", err)
	}
	for _, q := range []string{
		"CREATE ROLE " + owner + " LOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT NOCREATEDB NOCREATEROLE",
		"CREATE ROLE " + svc + " LOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT NOCREATEDB NOCREATEROLE",
		fmt.Sprintf("GRANT CONNECT, TEMPORARY ON DATABASE %s TO %s, %s", pgx.Identifier{db}.Sanitize(), owner, svc),
		"CREATE SCHEMA " + schema + " AUTHORIZATION " + owner,
		"GRANT USAGE ON SCHEMA " + schema + " TO " + svc,
		// As deploy/postgres does: whatever the owner creates, the service may use.
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + owner + " IN SCHEMA " + schema + " GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO " + svc,
		"ALTER DEFAULT PRIVILEGES FOR ROLE " + owner + " IN SCHEMA " + schema + " GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO " + svc,
	} {
		if _, err := s.Admin.Exec(ctx, q); err != nil {
			t.Fatalf("provision %s: %q: %v", s.Name, q, err)
		}
	}
	s.Owner = connect(t, ctx, databaseURL, s.OwnerRole, s.Name)
	if err := migrate(ctx, s.Owner, s.Name); err != nil {
		t.Fatalf("migrate %s as %s: %v", s.Name, s.OwnerRole, err)
	}
	s.Service = connect(t, ctx, databaseURL, s.ServiceRole, s.Name)
	return s
}

func connect(t testing.TB, ctx context.Context, databaseURL, user, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	if user != "" {
		cfg.ConnConfig.User, cfg.ConnConfig.Password = user, ""
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("postgres as %q (is it running, trusting local connections? run `make infra`): %v", user, err)
	}
	return pool
}
