package deploytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// platformTables have no row-level security on purpose: they hold no
// tenant's data and are read across tenants by design. The fabric's are
// named in its migration 00013; a service names its own to CheckRowSecurity.
var platformTables = map[string]string{
	"fabric_migrations":  "the fabric's migration ledger",
	"service_migrations": "the service's migration ledger",
	"retention_tenant":   "tenant ids for retention to visit, no tenant data",
	"rate_bucket":        "token counts per limit key, no tenant data",
}

// CheckRowSecurity checks every table of the stack's schema, the fabric's
// and the service's, after a test has stored some of tenantID's rows:
// each table not named in platform (table → why it has no policy) has
// row-level security enabled and forced; and, as a role that row-level
// security binds (the Stack's pool is a superuser, which bypasses it), a
// session set to another tenant, or to none, sees, updates and deletes
// none of tenantID's rows, while a session of tenantID sees and updates
// all of them.
// At least one table must hold tenantID's rows, or the check proves
// nothing and fails.
func (s *Stack) CheckRowSecurity(t testing.TB, tenantID string, platform map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role := Unique("rls_probe_")
	schema := pgx.Identifier{s.Schema}.Sanitize()
	for _, stmt := range []string{
		"CREATE ROLE " + role + " NOLOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
	} {
		if _, err := s.Pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	defer func() {
		for _, stmt := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := s.Pool.Exec(context.Background(), stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	}()
	type table struct {
		name            string
		secured, forced bool
		hasTenant       bool
	}
	rows, err := s.Pool.Query(ctx, `SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
			EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
		FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY c.relname`, s.Schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var tb table
		err := r.Scan(&tb.name, &tb.secured, &tb.forced, &tb.hasTenant)
		return tb, err
	})
	if err != nil {
		t.Fatal(err)
	}
	populated := 0
	for _, tb := range tables {
		if _, ok := platformTables[tb.name]; ok {
			continue
		}
		if _, ok := platform[tb.name]; ok {
			continue
		}
		if !tb.secured || !tb.forced {
			t.Errorf("table %s: row-level security enabled %v, forced %v; want both (or name it a platform table, saying why)",
				tb.name, tb.secured, tb.forced)
			continue
		}
		if !tb.hasTenant {
			continue // its policy follows a parent's tenant (replay_item): the catalog check above is what applies
		}
		ident := pgx.Identifier{tb.name}.Sanitize()
		var stored int64
		if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM "+ident+" WHERE tenant_id = $1", tenantID).Scan(&stored); err != nil {
			t.Fatalf("%s: %v", tb.name, err)
		}
		if stored > 0 {
			populated++
		}
		for _, sess := range []struct {
			tenant string
			sees   int64
		}{{tenantID, stored}, {tenantID + "-other", 0}, {"", 0}} {
			// Deleting its own rows would trip foreign keys: a session of
			// the rows' tenant only reads and updates them.
			own := sess.tenant == tenantID
			seen, updated, deleted, err := s.probe(ctx, role, sess.tenant, ident, tenantID, !own)
			if err != nil {
				t.Errorf("%s as tenant %q: %v", tb.name, sess.tenant, err)
				continue
			}
			want := [3]int64{sess.sees, sess.sees, 0}
			if got := [3]int64{seen, updated, deleted}; got != want {
				t.Errorf("%s as tenant %q: saw, updated, deleted %v of %s's %d rows; want %v",
					tb.name, sess.tenant, got, tenantID, stored, want)
			}
		}
	}
	if populated == 0 {
		t.Errorf("no table holds rows of %s: drive the service first, or the check proves nothing", tenantID)
	}
}

// probe counts, updates and (with del) deletes tenantID's rows of table as
// role with app.tenant_id set to sessionTenant, and rolls everything back.
func (s *Stack) probe(ctx context.Context, role, sessionTenant, table, tenantID string, del bool) (seen, updated, deleted int64, err error) {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+role); err != nil {
		return 0, 0, 0, err
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", sessionTenant); err != nil {
		return 0, 0, 0, err
	}
	// No tenant filter but the row's own: only the policy stands between.
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE tenant_id = $1", tenantID).Scan(&seen); err != nil {
		return 0, 0, 0, fmt.Errorf("select: %w", err)
	}
	tag, err := tx.Exec(ctx, "UPDATE "+table+" SET tenant_id = tenant_id WHERE tenant_id = $1", tenantID)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("update: %w", err)
	}
	updated = tag.RowsAffected()
	if !del {
		return seen, updated, 0, nil
	}
	tag, err = tx.Exec(ctx, "DELETE FROM "+table+" WHERE tenant_id = $1", tenantID)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("delete: %w", err)
	}
	return seen, updated, tag.RowsAffected(), nil
}
