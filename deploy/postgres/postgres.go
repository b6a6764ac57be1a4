// Package postgres provisions the platform's database roles. Each service has
// one schema (named like the service, `-` → `_`) and two login roles that can
// touch nothing else:
//
//   - <schema>_owner owns the schema and everything in it; migrations run as
//     it (the services' DATABASE_MIGRATE_URL);
//   - <schema>, the service itself (DATABASE_URL), owns nothing: it may read
//     and write the owner's tables and use its sequences, but not alter or
//     drop them, so it cannot switch row-level security off.
//
// The same statements are committed as deploy/postgres/roles.sql for psql
// (make up, the compose roles job).
package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// Schemas are the schemas of the services the catalog declares
// (services: in pkg/fabric/catalog/catalog.yaml), in its order.
func Schemas() []string {
	reg, err := registry.Default()
	if err != nil {
		// The catalog is compiled in and checked by the registry's tests:
		// one that does not load is a broken build.
		panic(fmt.Sprintf("postgres: the embedded catalog does not load: %v", err))
	}
	var out []string
	for _, s := range reg.Services() {
		out = append(out, SchemaOf(s.Name))
	}
	return out
}

// SchemaOf maps a service name to its schema: "document-worker" → "document_worker".
func SchemaOf(service string) string { return strings.ReplaceAll(service, "-", "_") }

// DevPassword is the LOCAL-DEVELOPMENT-ONLY password of a role.
func DevPassword(role string) string { return "local-dev-only-" + role }

// Options shape the provisioning statements.
type Options struct {
	// Schemas defaults to Schemas().
	Schemas []string
	// RoleSuffix is appended to every role name (roles are global to the
	// cluster; tests keep concurrent runs apart with it). Schemas keep their
	// names.
	RoleSuffix string
	// Password returns a role's password; it defaults to DevPassword.
	Password func(role string) string
	// Vector creates the pgvector extension (in schema public, usable by
	// every role through the default USAGE on public).
	Vector bool
	// SharedDatabase leaves the database-wide statements out (PUBLIC's
	// CONNECT and CREATE on public, the roles' CONNECT, which PUBLIC keeps
	// there): for tests that provision a throwaway schema in a database
	// other tests use too. Concurrent GRANTs on one database fail with
	// "tuple concurrently updated".
	SharedDatabase bool
}

// Role returns the service's (runtime) role for schema under o.
func (o Options) Role(schema string) string { return schema + o.RoleSuffix }

// Owner returns the role that owns schema and runs its migrations under o.
func (o Options) Owner(schema string) string { return schema + "_owner" + o.RoleSuffix }

// SQL returns the idempotent provisioning script for the current database,
// to run as a superuser. Per schema it creates (or resets) a login role with
// no special attributes, the schema owned by it, and a search_path; per
// database it stops PUBLIC from connecting or creating in public, so only
// the service roles (and superusers) get in.
func SQL(o Options) string {
	if o.Schemas == nil {
		o.Schemas = Schemas()
	}
	if o.Password == nil {
		o.Password = DevPassword
	}
	var b strings.Builder
	if o.Vector {
		// Two provisionings at once (tests) may both try to create it.
		b.WriteString("DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS vector; EXCEPTION WHEN unique_violation OR duplicate_object THEN NULL; END $$;\n")
	}
	if !o.SharedDatabase {
		// PostgreSQL 15 already revokes CREATE on public; older servers do not.
		b.WriteString("REVOKE CREATE ON SCHEMA public FROM PUBLIC;\n")
		b.WriteString("DO $$ BEGIN EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database()); END $$;\n")
	}
	for _, s := range o.Schemas {
		owner, role := o.Owner(s), o.Role(s)
		ow, r, sc := ident(owner), ident(role), ident(s)
		fmt.Fprintf(&b, "\n-- %s: %s owns it and migrates it, %s runs the service\n", s, owner, role)
		// One line per statement: Provision splits the script at ";\n".
		for _, login := range []string{owner, role} {
			fmt.Fprintf(&b, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s) THEN CREATE ROLE %s; END IF; END $$;\n", literal(login), ident(login))
			fmt.Fprintf(&b, "ALTER ROLE %s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD %s;\n", ident(login), literal(o.Password(login)))
			fmt.Fprintf(&b, "ALTER ROLE %s SET search_path = %s, public;\n", ident(login), sc)
			if !o.SharedDatabase {
				fmt.Fprintf(&b, "DO $$ BEGIN EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %%I TO %%I', current_database(), %s); END $$;\n", literal(login))
			}
		}
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s AUTHORIZATION %s;\n", sc, ow)
		fmt.Fprintf(&b, "ALTER SCHEMA %s OWNER TO %s;\n", sc, ow)
		// Earlier versions let the service role own its schema and tables:
		// whatever it still owns in this database moves to the owner.
		fmt.Fprintf(&b, "REASSIGN OWNED BY %s TO %s;\n", r, ow)
		fmt.Fprintf(&b, "REVOKE ALL ON SCHEMA %s FROM PUBLIC;\n", sc)
		fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", sc, r)
		// Existing objects now, and everything the owner creates later.
		fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s TO %s;\n", sc, r)
		fmt.Fprintf(&b, "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %s TO %s;\n", sc, r)
		fmt.Fprintf(&b, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %s;\n", ow, sc, r)
		fmt.Fprintf(&b, "ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO %s;\n", ow, sc, r)
	}
	return b.String()
}

// Execer runs a statement: *pgx.Conn, *pgxpool.Pool and pgx.Tx satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Provision runs SQL(o) on db, which must be connected as a superuser to the
// target database. It is idempotent. Errors name the failing step.
func Provision(ctx context.Context, db Execer, o Options) error {
	// The simple protocol accepts the whole multi-statement script at once,
	// but one statement at a time gives a precise error.
	for _, stmt := range statements(SQL(o)) {
		if _, err := db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("postgres: provision roles: %s: %w", firstLine(stmt), err)
		}
	}
	return nil
}

// statements splits the script produced by SQL at the ";\n" that ends each
// statement; SQL never puts one inside a statement.
func statements(script string) []string {
	var out []string
	for _, part := range strings.SplitAfter(script, ";\n") {
		var keep []string
		for _, line := range strings.Split(part, "\n") {
			if !strings.HasPrefix(line, "--") {
				keep = append(keep, line)
			}
		}
		if s := strings.TrimSpace(strings.Join(keep, "\n")); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func ident(s string) string   { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func literal(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// PlatformSQL is the committed deploy/postgres/roles.sql: every service's
// role and schema with LOCAL-DEVELOPMENT-ONLY passwords, and pgvector.
func PlatformSQL() string {
	return "-- GENERATED by `go run ./deploy/cmd/gendeploy` from deploy/postgres; do not edit.\n" +
		"-- Run as a superuser in the platform database: psql -v ON_ERROR_STOP=1 -d agora -f deploy/postgres/roles.sql\n" +
		"-- Passwords are LOCAL-DEVELOPMENT-ONLY (local-dev-only-<role>). Idempotent.\n" +
		SQL(Options{Vector: true})
}
