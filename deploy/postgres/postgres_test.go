package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agora-platform/agora/deploy/postgres"
)

func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func TestCommittedRolesSQLMatchesGenerator(t *testing.T) {
	got, err := os.ReadFile("roles.sql")
	if err != nil {
		t.Fatalf("%v (generate it: go run ./deploy/cmd/gendeploy)", err)
	}
	if string(got) != postgres.PlatformSQL() {
		t.Errorf("deploy/postgres/roles.sql drifted from the generator: run `go run ./deploy/cmd/gendeploy` and commit")
	}
}

// TestRoleIsolation provisions every service role in a throwaway database
// (roles suffixed per run: roles are global to the cluster) and checks that
// each role can create, write and read in its own schema and gets
// "permission denied" (SQLSTATE 42501) on every other schema and on public.
func TestRoleIsolation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	admin, err := pgx.Connect(ctx, databaseURL())
	if err != nil {
		t.Fatalf("connect as superuser to %s (is PostgreSQL running? run `make infra`): %v", databaseURL(), err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) }) // after the cleanup below (LIFO)

	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b[:])
	dbName := "agora_roles_test_" + id
	opts := postgres.Options{RoleSuffix: "_t" + id, Vector: true}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbName}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", dbName, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", dbName, err)
		}
		for _, s := range postgres.Schemas() {
			if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{opts.Role(s)}.Sanitize()); err != nil {
				t.Errorf("drop role %s: %v", opts.Role(s), err)
			}
		}
	})

	cfg, err := pgx.ParseConfig(databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	superCfg := cfg.Copy()
	superCfg.Database = dbName
	super, err := pgx.ConnectConfig(ctx, superCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(context.Background())
	// Twice: provisioning is idempotent.
	for i := 0; i < 2; i++ {
		if err := postgres.Provision(ctx, super, opts); err != nil {
			t.Fatalf("provision (run %d): %v", i+1, err)
		}
	}

	conns := map[string]*pgx.Conn{}
	for _, s := range postgres.Schemas() {
		c := cfg.Copy()
		c.Database, c.User, c.Password = dbName, opts.Role(s), postgres.DevPassword(opts.Role(s))
		conn, err := pgx.ConnectConfig(ctx, c)
		if err != nil {
			t.Fatalf("connect as %s: %v", c.User, err)
		}
		defer conn.Close(context.Background())
		conns[s] = conn
	}

	exec := func(conn *pgx.Conn, sql string) error {
		_, err := conn.Exec(ctx, sql)
		return err
	}
	// Own schema: DDL and DML through the default search_path.
	for _, s := range postgres.Schemas() {
		steps := []string{
			"CREATE TABLE probe (id int PRIMARY KEY, note text)",
			"INSERT INTO probe VALUES (1, 'mine')",
			"UPDATE probe SET note = 'still mine' WHERE id = 1",
			"SELECT count(*) FROM " + s + ".probe",
			"CREATE TABLE scratch (id int)",
			"DELETE FROM scratch",
		}
		if s == "ai_builder" {
			steps = append(steps, "CREATE TABLE chunk (id int, embedding public.vector(3))",
				"INSERT INTO chunk VALUES (1, '[1,0,0]')")
		}
		for _, q := range steps {
			if err := exec(conns[s], q); err != nil {
				t.Errorf("%s in own schema: %s: %v", opts.Role(s), q, err)
			}
		}
	}
	// Everyone else's schema, and public: denied with 42501.
	checks, denied := 0, 0
	for _, s := range postgres.Schemas() {
		var targets []string
		for _, other := range postgres.Schemas() {
			if other != s {
				targets = append(targets, other)
			}
		}
		for _, other := range targets {
			for _, q := range []string{
				fmt.Sprintf("SELECT * FROM %s.probe", other),
				fmt.Sprintf("INSERT INTO %s.probe VALUES (2, 'theirs')", other),
				fmt.Sprintf("UPDATE %s.probe SET note = 'x'", other),
				fmt.Sprintf("DELETE FROM %s.probe", other),
				fmt.Sprintf("CREATE TABLE %s.intruder (id int)", other),
				fmt.Sprintf("DROP TABLE %s.probe", other),
			} {
				checks++
				if ok := wantDenied(t, opts.Role(s), q, exec(conns[s], q)); ok {
					denied++
				}
			}
		}
		for _, q := range []string{"CREATE TABLE public.intruder (id int)", "CREATE SCHEMA intruder_" + s} {
			checks++
			if ok := wantDenied(t, opts.Role(s), q, exec(conns[s], q)); ok {
				denied++
			}
		}
	}
	msg := fmt.Sprintf("Postgres role isolation: %d roles, %d cross-schema checks, %d denied with 42501; %s", len(conns), checks, denied, time.Since(start).Round(time.Millisecond))
	t.Log(msg)
	if denied != checks {
		t.Errorf("%d of %d cross-schema operations were not denied", checks-denied, checks)
	}
}

func wantDenied(t *testing.T, role, q string, err error) bool {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("%s: %s: err = %v, want permission denied (42501)", role, q, err)
		return false
	}
	if !strings.Contains(pgErr.Message, "permission denied") {
		t.Errorf("%s: %s: message %q", role, q, pgErr.Message)
	}
	return true
}
