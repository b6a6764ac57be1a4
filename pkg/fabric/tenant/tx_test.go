package tenant_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

// rig is a schema with one tenant table under the same policy every
// service uses, and a role that is subject to it: the test's own
// connection is a superuser, and superusers bypass row-level security.
type rig struct {
	pool *pgxpool.Pool
	role string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	s := fabrictest.NewSchema(t, fabrictest.EnvFrom(os.Getenv))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := pgx.Identifier{s.Name + "_reader"}.Sanitize()
	schema := pgx.Identifier{s.Name}.Sanitize()
	for _, q := range []string{
		`CREATE TABLE item (tenant_id text NOT NULL, name text NOT NULL)`,
		`ALTER TABLE item ENABLE ROW LEVEL SECURITY`,
		`CREATE POLICY tenant_isolation ON item USING (tenant_id = current_setting('app.tenant_id', true))`,
		`INSERT INTO item VALUES ('org-a', 'a1'), ('org-b', 'b1'), ('org-b', 'b2')`,
		`CREATE ROLE ` + role + ` NOLOGIN`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := s.Pool.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range []string{
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT ON item TO ` + role,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return &rig{pool: s.Pool, role: role}
}

// visible returns the names tx's row-level security lets the reader role
// see, sorted.
func (r *rig) visible(ctx context.Context, t *testing.T, tx pgx.Tx) []string {
	t.Helper()
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+r.role); err != nil {
		t.Fatalf("set role: %v", err)
	}
	rows, err := tx.Query(ctx, `SELECT name FROM item ORDER BY name`)
	if err != nil {
		t.Fatalf("select as reader: %v", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("select as reader: %v", err)
	}
	if _, err := tx.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatalf("reset role: %v", err)
	}
	return names
}

// sessionSetting is app.tenant_id outside any transaction on conn.
func sessionSetting(ctx context.Context, t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(ctx, `SELECT coalesce(current_setting('app.tenant_id', true), '')`).Scan(&v); err != nil {
		t.Fatalf("session setting: %v", err)
	}
	return v
}

func TestTxScopesRowLevelSecurityToTheTransaction(t *testing.T) {
	r := newRig(t)
	tests := []struct {
		tenant string
		want   []string
	}{
		{"org-a", []string{"a1"}},
		{"org-b", []string{"b1", "b2"}},
		{"org-c", nil},
		{"", nil},
		// BEGIN and the setting travel as one simple-protocol string with
		// the tenant quoted in it: hostile ids must arrive intact and
		// inert (the next case still sees org-b's rows).
		{`o'rg\b\\'`, nil},
		{`x'); DROP TABLE item; --`, nil},
		{`\'; SELECT set_config('app.tenant_id', 'org-b', true); --`, nil},
		{"órgão-ç", nil},
		{"org-b", []string{"b1", "b2"}},
	}
	ctx := context.Background()
	c, err := r.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	// One connection for every case: a setting that leaked out of its
	// transaction would show in the session, or scope the next case.
	conn := c.Conn()
	for _, tt := range tests {
		t.Run("tenant="+tt.tenant, func(t *testing.T) {
			var seen []string
			var inside string
			err := tenant.Tx(ctx, conn, tt.tenant, func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, `SELECT current_setting('app.tenant_id', true)`).Scan(&inside); err != nil {
					return err
				}
				seen = r.visible(ctx, t, tx)
				return nil
			})
			if err != nil {
				t.Fatalf("Tx: %v", err)
			}
			if inside != tt.tenant {
				t.Errorf("app.tenant_id inside the transaction = %q, want %q", inside, tt.tenant)
			}
			if !slices.Equal(seen, tt.want) {
				t.Errorf("row-level security let the reader see %q, want %q", seen, tt.want)
			}
			if got := sessionSetting(ctx, t, conn); got != "" {
				t.Errorf("app.tenant_id after the transaction = %q, want it gone with the transaction", got)
			}
		})
	}
}

func TestSetRescopesAnOpenTransaction(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	steps := []struct {
		tenant string
		want   []string
	}{
		{"org-b", []string{"b1", "b2"}},
		{"org-a", []string{"a1"}},
		{"org-c", nil},
	}
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if got := r.visible(ctx, t, tx); len(got) != 0 {
			t.Errorf("before Set the reader sees %q, want nothing", got)
		}
		for _, s := range steps {
			if err := tenant.Set(ctx, tx, s.tenant); err != nil {
				return err
			}
			if got := r.visible(ctx, t, tx); !slices.Equal(got, s.want) {
				t.Errorf("after Set(%q) the reader sees %q, want %q", s.tenant, got, s.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTxRollsBackOnError(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := tenant.Tx(ctx, r.pool, "org-a", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO item VALUES ('org-a', 'a2')`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx = %v, want fn's error", err)
	}
	var n int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM item WHERE name = 'a2'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows of the failed transaction were kept, want 0", n)
	}
}

func TestTxWritesAreCheckedByThePolicy(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	// The policy has no WITH CHECK clause, so USING checks new rows too: a
	// transaction scoped to org-a cannot write org-b's rows.
	err := tenant.Tx(ctx, r.pool, "org-a", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+r.role); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO item VALUES ('org-b', 'b3')`)
		return err
	})
	if err == nil {
		t.Fatal("a transaction scoped to org-a inserted a row of org-b")
	}
}
