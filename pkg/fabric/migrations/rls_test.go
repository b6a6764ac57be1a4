package migrations_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// tenantTables are the fabric's tenant-scoped tables, each with a row of
// tenant org-a to probe. replay_item follows its job's tenant.
var tenantTables = []struct {
	name   string
	insert string // one org-a row
	touch  string // an UPDATE of every row
}{
	{"outbox_event", `INSERT INTO outbox_event (id, tenant_id, aggregate_type, aggregate_id, event_type, event_version,
		payload, body, exchange, routing_key, occurred_at) VALUES (gen_random_uuid(), 'org-a', 'request', 'r1',
		'request.submitted.v1', 'v1', '{}', '\x7b7d', 'platform.events', 'request.submitted.v1', now())`,
		`UPDATE outbox_event SET publication_attempts = publication_attempts + 1`},
	{"inbox_message", `INSERT INTO inbox_message (consumer, event_id, tenant_id, event_type, payload_hash)
		VALUES ('q', gen_random_uuid(), 'org-a', 'request.submitted.v1', '\x00')`,
		`UPDATE inbox_message SET received_at = now()`},
	{"inbox_security_event", `INSERT INTO inbox_security_event (consumer, event_id, event_type, tenant_id, payload_hash,
		first_hash, reason) VALUES ('q', gen_random_uuid(), 'request.submitted.v1', 'org-a', '\x00', '\x01', 'tenant differs')`,
		`UPDATE inbox_security_event SET reason = reason`},
	{"dlq_audit", `INSERT INTO dlq_audit (operator, reason, action, queue, filter, message_ids, succeeded, failed, result, tenant_id)
		VALUES ('op', 'why', 'purge', 'q', '', '{}', 0, 0, 'ok', 'org-a')`,
		`UPDATE dlq_audit SET result = result`},
	{"gateway_received", `INSERT INTO gateway_received (source_id, event_id, tenant_id, envelope_id, event_type)
		VALUES ('src', 'e1', 'org-a', gen_random_uuid(), 'external.thing.v1')`,
		`UPDATE gateway_received SET received_at = now()`},
	{"replay_job", `INSERT INTO replay_job (id, tenant_id, queue, mode, selection, reason, requested_by, status, total,
		created_at, updated_at) VALUES ('00000000-0000-0000-0000-00000000000a', 'org-a', 'q', 'DRY_RUN', '{}', 'why', 'op',
		'running', 1, now(), now())`,
		`UPDATE replay_job SET processed = processed`},
	{"replay_item", `INSERT INTO replay_item (job_id, seq, event_id, type, body)
		VALUES ('00000000-0000-0000-0000-00000000000a', 1, gen_random_uuid(), 'request.submitted.v1', '\x00')`,
		`UPDATE replay_item SET detail = detail`},
}

// platformTables hold no tenant's data and are read across tenants by
// design (migration 00013 says why); every other table is in tenantTables.
var platformTables = map[string]bool{
	"retention_tenant": true, "rate_bucket": true,
	"fabric_migrations": true, // the migration ledger
}

// TestRowLevelSecurityKeepsEachFabricTableToItsTenant probes every
// tenant table of the fabric as a role that row-level security binds
// (the test's own connection is a superuser, which bypasses it): another
// tenant's session, or one that set no tenant, sees, updates and deletes
// none of org-a's rows and cannot write one; org-a's session and the
// platform scope see it. A table the schema gains without being listed
// here fails the test.
func TestRowLevelSecurityKeepsEachFabricTableToItsTenant(t *testing.T) {
	s := fabrictest.NewSchema(t, fabrictest.EnvFrom(os.Getenv))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	role := pgx.Identifier{s.Name + "_svc"}.Sanitize()
	schema := pgx.Identifier{s.Name}.Sanitize()
	for _, q := range []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role,
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

	listed := map[string]bool{}
	for _, tt := range tenantTables {
		listed[tt.name] = true
		if _, err := s.Pool.Exec(ctx, tt.insert); err != nil {
			t.Fatalf("%s: seed org-a's row: %v", tt.name, err)
		}
	}
	rows, err := s.Pool.Query(ctx, `SELECT relname FROM pg_class
		WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p')`, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range all {
		if !listed[name] && !platformTables[name] {
			t.Errorf("table %s is neither probed for row-level security here nor a platform table: add it to one list", name)
		}
	}

	// as runs fn in a transaction as role, with settings applied first.
	as := func(settings []string, fn func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
				return err
			}
			for _, set := range settings {
				if _, err := tx.Exec(ctx, set); err != nil {
					return err
				}
			}
			return fn(tx)
		})
	}
	const (
		orgA     = `SELECT set_config('app.tenant_id', 'org-a', true)`
		orgB     = `SELECT set_config('app.tenant_id', 'org-b', true)`
		platform = `SELECT set_config('app.scope', 'platform', true)`
	)
	sessions := []struct {
		name     string
		settings []string
		sees     bool
	}{
		{"another tenant", []string{orgB}, false},
		{"no tenant", nil, false},
		{"another tenant after the platform scope ended", []string{platform, orgB,
			`SELECT set_config('app.scope', '', true)`}, false},
		{"the row's tenant", []string{orgA}, true},
		{"the platform scope", []string{platform}, true},
	}
	for _, tt := range tenantTables {
		for _, sess := range sessions {
			t.Run(tt.name+"/"+sess.name, func(t *testing.T) {
				want := int64(0)
				if sess.sees {
					want = 1
				}
				var seen, updated int64
				err := as(sess.settings, func(tx pgx.Tx) error {
					if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+tt.name).Scan(&seen); err != nil {
						return err
					}
					tag, err := tx.Exec(ctx, tt.touch)
					updated = tag.RowsAffected()
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if seen != want || updated != want {
					t.Errorf("saw %d rows and updated %d, want %d", seen, updated, want)
				}
				if sess.sees {
					return
				}
				var deleted int64
				err = as(sess.settings, func(tx pgx.Tx) error {
					tag, err := tx.Exec(ctx, `DELETE FROM `+tt.name)
					deleted = tag.RowsAffected()
					return err
				})
				if err != nil || deleted != 0 {
					t.Errorf("delete: %d rows, err %v; want none", deleted, err)
				}
				err = as(sess.settings, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, tt.insert)
					return err
				})
				var pgErr *pgconn.PgError
				if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
					t.Errorf("writing org-a's row: %v, want a row-level security violation (42501)", err)
				}
			})
		}
	}
}
