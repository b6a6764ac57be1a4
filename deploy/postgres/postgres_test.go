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

// TestRoleIsolation provisions every service's two roles in a throwaway
// database (roles suffixed per run: roles are global to the cluster) and
// checks that the owner can migrate its schema, that the service role can
// read and write the owner's tables under row-level security but cannot
// create, alter or drop anything (so it cannot switch RLS off), and that
// both get "permission denied" (SQLSTATE 42501) on every other schema and
// on public.
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
			for _, r := range []string{opts.Role(s), opts.Owner(s)} {
				if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
					t.Errorf("drop role %s: %v", r, err)
				}
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

	connect := func(role string) *pgx.Conn {
		c := cfg.Copy()
		c.Database, c.User, c.Password = dbName, role, postgres.DevPassword(role)
		conn, err := pgx.ConnectConfig(ctx, c)
		if err != nil {
			t.Fatalf("connect as %s: %v", role, err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	owners, services := map[string]*pgx.Conn{}, map[string]*pgx.Conn{}
	for _, s := range postgres.Schemas() {
		owners[s], services[s] = connect(opts.Owner(s)), connect(opts.Role(s))
	}
	exec := func(conn *pgx.Conn, sql string) error {
		_, err := conn.Exec(ctx, sql)
		return err
	}
	mustAll := func(who string, conn *pgx.Conn, steps ...string) {
		t.Helper()
		for _, q := range steps {
			if err := exec(conn, q); err != nil {
				t.Errorf("%s: %s: %v", who, q, err)
			}
		}
	}
	checks, denied := 0, 0
	deny := func(who string, conn *pgx.Conn, q string) {
		t.Helper()
		checks++
		if wantDenied(t, who, q, exec(conn, q)) {
			denied++
		}
	}

	for _, s := range postgres.Schemas() {
		// The owner migrates: tables, a sequence, RLS in force.
		steps := []string{
			"CREATE TABLE probe (tenant_id text NOT NULL, id bigserial PRIMARY KEY, note text)",
			"ALTER TABLE probe ENABLE ROW LEVEL SECURITY",
			"ALTER TABLE probe FORCE ROW LEVEL SECURITY",
			"CREATE POLICY tenant_isolation ON probe USING (tenant_id = current_setting('app.tenant_id', true))",
		}
		if s == "ai_builder" {
			steps = append(steps, "CREATE TABLE chunk (id int, embedding public.vector(3))")
		}
		mustAll(opts.Owner(s), owners[s], steps...)

		// The service reads and writes, as one tenant at a time.
		svc := services[s]
		mustAll(opts.Role(s), svc,
			"SELECT set_config('app.tenant_id', 'tenant-a', false)",
			"INSERT INTO probe (tenant_id, note) VALUES ('tenant-a', 'mine')",
			"UPDATE probe SET note = 'still mine'",
			"SELECT set_config('app.tenant_id', 'tenant-b', false)",
			"INSERT INTO probe (tenant_id, note) VALUES ('tenant-b', 'theirs')",
		)
		if s == "ai_builder" {
			mustAll(opts.Role(s), svc, "INSERT INTO chunk VALUES (1, '[1,0,0]')")
		}
		var seen int
		if err := svc.QueryRow(ctx, "SELECT count(*) FROM probe").Scan(&seen); err != nil || seen != 1 {
			t.Errorf("%s sees %d rows as tenant-b (err %v), want 1: row-level security is not in force", opts.Role(s), seen, err)
		}
		// …and can change nothing about the schema: RLS stays on.
		for _, q := range []string{
			"ALTER TABLE probe NO FORCE ROW LEVEL SECURITY",
			"ALTER TABLE probe DISABLE ROW LEVEL SECURITY",
			"DROP POLICY tenant_isolation ON probe",
			"DROP TABLE probe",
			"TRUNCATE probe",
			"CREATE TABLE intruder (id int)",
		} {
			deny(opts.Role(s), svc, q)
		}
	}
	// Everyone else's schema, and public: denied to both roles.
	for _, s := range postgres.Schemas() {
		for _, who := range []struct {
			role string
			conn *pgx.Conn
		}{{opts.Owner(s), owners[s]}, {opts.Role(s), services[s]}} {
			for _, other := range postgres.Schemas() {
				if other == s {
					continue
				}
				for _, q := range []string{
					fmt.Sprintf("SELECT * FROM %s.probe", other),
					fmt.Sprintf("INSERT INTO %s.probe (tenant_id) VALUES ('x')", other),
					fmt.Sprintf("UPDATE %s.probe SET note = 'x'", other),
					fmt.Sprintf("DELETE FROM %s.probe", other),
					fmt.Sprintf("CREATE TABLE %s.intruder (id int)", other),
					fmt.Sprintf("DROP TABLE %s.probe", other),
				} {
					deny(who.role, who.conn, q)
				}
			}
			deny(who.role, who.conn, "CREATE TABLE public.intruder (id int)")
			deny(who.role, who.conn, "CREATE SCHEMA intruder_"+s)
		}
	}

	// An upgrade from the one-role layout, where the service role owned its
	// tables: provisioning again hands them to the owner.
	if _, err := super.Exec(ctx, fmt.Sprintf("ALTER TABLE request.probe OWNER TO %s", pgx.Identifier{opts.Role("request")}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Provision(ctx, super, opts); err != nil {
		t.Fatalf("provision over the one-role layout: %v", err)
	}
	var owner string
	if err := super.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE schemaname = 'request' AND tablename = 'probe'").Scan(&owner); err != nil || owner != opts.Owner("request") {
		t.Errorf("request.probe owned by %q after reprovisioning (err %v), want %s", owner, err, opts.Owner("request"))
	}
	deny(opts.Role("request"), services["request"], "ALTER TABLE probe NO FORCE ROW LEVEL SECURITY")

	msg := fmt.Sprintf("Postgres roles: %d schemas × (owner, service); %d forbidden operations, %d denied with 42501; %s", len(services), checks, denied, time.Since(start).Round(time.Millisecond))
	t.Log(msg)
	if denied != checks {
		t.Errorf("%d of %d forbidden operations were not denied", checks-denied, checks)
	}
}

func wantDenied(t *testing.T, role, q string, err error) bool {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("%s: %s: err = %v, want permission denied (42501)", role, q, err)
		return false
	}
	if !strings.Contains(pgErr.Message, "permission denied") && !strings.HasPrefix(pgErr.Message, "must be owner") {
		t.Errorf("%s: %s: message %q", role, q, pgErr.Message)
	}
	return true
}
