package retention_test

import (
	"context"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/migrations"
	"github.com/agora-platform/agora/pkg/fabric/retention"
	"github.com/agora-platform/agora/pkg/fabric/retention/retentiontest"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

var env = fabrictest.EnvFrom(os.Getenv)

func TestConfigFrom(t *testing.T) {
	defaults := retention.Config{Interval: time.Hour, Inbox: 720 * time.Hour, Outbox: 168 * time.Hour,
		DLQAudit: 8760 * time.Hour, DLQ: 720 * time.Hour, Batch: 1000}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    retention.Config
		wantErr string
	}{
		{name: "defaults", want: defaults},
		{name: "set", env: map[string]string{"RETENTION_INTERVAL": "10m", "RETENTION_INBOX": "48h",
			"RETENTION_OUTBOX": "24h", "RETENTION_DLQ_AUDIT": "2160h", "RETENTION_DLQ": "336h", "RETENTION_BATCH": "500"},
			want: retention.Config{Interval: 10 * time.Minute, Inbox: 48 * time.Hour, Outbox: 24 * time.Hour, DLQAudit: 2160 * time.Hour,
				DLQ: 336 * time.Hour, Batch: 500}},
		{name: "off", env: map[string]string{"RETENTION_INTERVAL": "off", "RETENTION_DLQ_AUDIT": "OFF", "RETENTION_DLQ": "off"},
			want: retention.Config{Inbox: 720 * time.Hour, Outbox: 168 * time.Hour, Batch: 1000}},
		{name: "zero interval is off", env: map[string]string{"RETENTION_INTERVAL": "0"},
			want: retention.Config{Inbox: 720 * time.Hour, Outbox: 168 * time.Hour, DLQAudit: 8760 * time.Hour, DLQ: 720 * time.Hour, Batch: 1000}},
		{name: "days are not a Go duration", env: map[string]string{"RETENTION_INBOX": "30d"}, wantErr: `RETENTION_INBOX: "30d"`},
		{name: "negative", env: map[string]string{"RETENTION_OUTBOX": "-1h"}, wantErr: "RETENTION_OUTBOX"},
		{name: "garbage interval", env: map[string]string{"RETENTION_INTERVAL": "hourly"}, wantErr: "RETENTION_INTERVAL"},
		{name: "batch not a number", env: map[string]string{"RETENTION_BATCH": "lots"}, wantErr: "RETENTION_BATCH"},
		{name: "batch zero", env: map[string]string{"RETENTION_BATCH": "0"}, wantErr: "RETENTION_BATCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := retention.ConfigFrom(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ConfigFrom = %+v, %v; want an error naming %s", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ConfigFrom = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestNewRefusesBadTables(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		tables []retention.Table
	}{
		{"schema", "Bad-Schema", nil},
		{"table name", "s", []retention.Table{{Name: "x; DROP TABLE y", Column: "at", Age: time.Hour}}},
		{"column name", "s", []retention.Table{{Name: "x", Column: `"at"`, Age: time.Hour}}},
		{"negative age", "s", []retention.Table{{Name: "x", Column: "at", Age: -time.Hour}}},
		{"twice", "s", []retention.Table{{Name: "x", Column: "at", Age: time.Hour}, {Name: "x", Column: "at", Age: 2 * time.Hour}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := retention.New(nil, tc.schema, tc.tables, retention.Options{}); err == nil {
				t.Fatal("New = nil error")
			}
		})
	}
}

// exec runs statements on pool, failing the test on the first error.
func exec(t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := pool.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func count(t *testing.T, pool *pgxpool.Pool, query string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// outboxRows inserts n outbox rows created 30 days ago with published_at
// set to the SQL expression published (NULL: not published yet).
func outboxRows(n int, published string) string {
	return `INSERT INTO outbox_event (id, tenant_id, aggregate_type, aggregate_id, event_type, event_version,
		payload, body, exchange, routing_key, occurred_at, created_at, published_at, publication_attempts)
		SELECT gen_random_uuid(), 'org-a', 'request', 'r-' || i, 'request.submitted.v1', '1', '{}', '\x00',
		'platform.events', 'request.submitted.v1', now(), now() - interval '30 days', ` + published + `,
		CASE WHEN ` + published + ` IS NULL THEN 3 ELSE 1 END
		FROM generate_series(1, ` + strconv.Itoa(n) + `) i`
}

func inboxRows(n int, consumer, age string) string {
	return `INSERT INTO inbox_message (consumer, event_id, tenant_id, event_type, payload_hash, received_at)
		SELECT '` + consumer + `', gen_random_uuid(), 'org-a', 'request.submitted.v1', '\x00', now() - interval '` + age + `'
		FROM generate_series(1, ` + strconv.Itoa(n) + `)`
}

func auditRows(n int, age string) string {
	return `INSERT INTO dlq_audit (at, operator, reason, action, queue, filter, message_ids, succeeded, failed, result)
		SELECT now() - interval '` + age + `', 'ana', 'fixed', 'replay', 'q', '{}', '{}', 1, 0, 'ok'
		FROM generate_series(1, ` + strconv.Itoa(n) + `)`
}

// TestRunOnceDeletesExpiredRowsInBatches: with a batch of 3, every
// table loses exactly its rows older than its age, in statements of at
// most 3 rows; young rows stay, and so does every unpublished outbox row
// however old; a table whose age is 0 keeps everything; the metric grows
// by exactly the rows removed, and a second run removes (and counts)
// nothing.
func TestRunOnceDeletesExpiredRowsInBatches(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	exec(t, s.Pool,
		inboxRows(6, "svc.a", "31 days"), inboxRows(4, "svc.b", "31 days"), inboxRows(2, "svc.a", "29 days"),
		outboxRows(7, "now() - interval '8 days'"), outboxRows(2, "now() - interval '1 day'"),
		outboxRows(3, "NULL"), // pending for 30 days (the broker refused them): never deleted
		auditRows(4, "400 days"), auditRows(1, "100 days"),
		`CREATE TABLE session_token (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL)`,
		`INSERT INTO session_token (created_at) SELECT now() - interval '3 days' FROM generate_series(1, 5)`,
		`INSERT INTO session_token (created_at) VALUES (now() - interval '1 hour')`,
		`CREATE TABLE kept_forever (at timestamptz NOT NULL)`,
		`INSERT INTO kept_forever VALUES (now() - interval '10 years')`,
	)
	mp, metricsH, err := telemetry.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(metricsH)
	defer srv.Close()
	tables := append(fabricTables(),
		retention.Table{Name: "session_token", Column: "created_at", Age: 48 * time.Hour},
		retention.Table{Name: "kept_forever", Column: "at", Age: 0})
	r, err := retention.New(s.Pool, s.Name, tables, retention.Options{Batch: 3, Meter: mp.Meter("test")})
	if err != nil {
		t.Fatal(err)
	}
	results, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// RunOnce's results, by table (their type is unexported: a caller
	// reads their fields, it never names them).
	got := map[string]struct {
		Table        string
		Deleted      int64
		Batches      int
		LargestBatch int64
	}{}
	for _, res := range results {
		got[res.Table] = res
	}
	for _, tc := range []struct {
		table            string
		deleted, batches int
		left             string // a query that must count 0
		kept             int
		keptQuery        string
	}{
		{"inbox_message", 10, 4, "SELECT count(*) FROM inbox_message WHERE received_at < now() - interval '30 days'",
			2, "SELECT count(*) FROM inbox_message"},
		{"outbox_event", 7, 3, "SELECT count(*) FROM outbox_event WHERE published_at < now() - interval '7 days'",
			5, "SELECT count(*) FROM outbox_event"},
		{"dlq_audit", 4, 2, "SELECT count(*) FROM dlq_audit WHERE at < now() - interval '365 days'",
			1, "SELECT count(*) FROM dlq_audit"},
		{"session_token", 5, 2, "SELECT count(*) FROM session_token WHERE created_at < now() - interval '2 days'",
			1, "SELECT count(*) FROM session_token"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			res := got[tc.table]
			if res.Deleted != int64(tc.deleted) || res.Batches != tc.batches || res.LargestBatch != 3 {
				t.Errorf("result = %+v; want %d deleted in %d batches of at most 3", res, tc.deleted, tc.batches)
			}
			if n := count(t, s.Pool, tc.left); n != 0 {
				t.Errorf("%d expired rows left", n)
			}
			if n := count(t, s.Pool, tc.keptQuery); n != tc.kept {
				t.Errorf("%d rows left, want %d young (or unpublished) ones", n, tc.kept)
			}
			if m := fabrictest.Counter(t, srv.URL, "fabric_retention_rows_deleted_total", map[string]string{"table": tc.table}); m != float64(tc.deleted) {
				t.Errorf("fabric_retention_rows_deleted_total{table=%q} = %g, want %d", tc.table, m, tc.deleted)
			}
		})
	}
	if n := count(t, s.Pool, "SELECT count(*) FROM outbox_event WHERE published_at IS NULL"); n != 3 {
		t.Errorf("%d unpublished outbox rows left, want all 3", n)
	}
	if _, ok := got["kept_forever"]; ok || count(t, s.Pool, "SELECT count(*) FROM kept_forever") != 1 {
		t.Errorf("a table with age 0 was cleaned: %+v", got["kept_forever"])
	}

	again, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range again {
		if res.Deleted != 0 {
			t.Errorf("second run deleted %+v", res)
		}
	}
	if m := fabrictest.Counter(t, srv.URL, "fabric_retention_rows_deleted_total", nil); m != 26 {
		t.Errorf("fabric_retention_rows_deleted_total = %g after two runs, want 26", m)
	}
}

// TestTenantScopedTableAsNonOwnerUnderForcedRLS provisions the schema as
// production does (an owner role migrates; the service's role has DML
// only; neither is a superuser nor bypasses RLS) with a table like the
// request service's idempotency_key (FORCE ROW LEVEL SECURITY on
// app.tenant_id, the retention_note_tenant trigger), and runs retention as
// the service's role. Without tenant scoping nothing can be deleted there;
// with it, each tenant's expired rows go and the young ones stay.
func TestTenantScopedTableAsNonOwnerUnderForcedRLS(t *testing.T) {
	s := retentiontest.NewSchema(t, env.DatabaseURL, func(ctx context.Context, owner *pgxpool.Pool, schema string) error {
		if err := migrations.Apply(ctx, owner, schema); err != nil {
			return err
		}
		_, err := owner.Exec(ctx, `
			CREATE TABLE idem (tenant_id text NOT NULL, key text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
				PRIMARY KEY (tenant_id, key));
			ALTER TABLE idem ENABLE ROW LEVEL SECURITY;
			ALTER TABLE idem FORCE ROW LEVEL SECURITY;
			CREATE POLICY tenant_isolation ON idem USING (tenant_id = current_setting('app.tenant_id', true));
			CREATE TRIGGER idem_retention AFTER INSERT ON idem FOR EACH ROW EXECUTE FUNCTION retention_note_tenant();`)
		return err
	})
	ctx := context.Background()
	var super, bypass bool
	var owner string
	if err := s.Service.QueryRow(ctx, `SELECT r.rolsuper, r.rolbypassrls, pg_get_userbyid(c.relowner)
		FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'idem'::regclass`).Scan(&super, &bypass, &owner); err != nil {
		t.Fatal(err)
	}
	if super || bypass || owner == s.ServiceRole {
		t.Fatalf("the service role must be a plain non-owner: super=%v bypassrls=%v table owner=%s", super, bypass, owner)
	}
	// The service writes its rows as it does in production: one tenant
	// per transaction. The trigger records each tenant.
	for _, tenant := range []string{"org-a", "org-b"} {
		err := pgx.BeginFunc(ctx, s.Service, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT set_config('app.tenant_id', $1, true);`, tenant)
			if err == nil {
				_, err = tx.Exec(ctx, `INSERT INTO idem (tenant_id, key, created_at)
					SELECT $1, 'old-' || i, now() - interval '3 days' FROM generate_series(1, 4) i
					UNION ALL SELECT $1, 'young', now() - interval '1 hour'`, tenant)
			}
			return err
		})
		if err != nil {
			t.Fatalf("insert as the service role for %s: %v", tenant, err)
		}
	}
	if n := count(t, s.Admin, "SELECT count(*) FROM retention_tenant"); n != 2 {
		t.Fatalf("retention_tenant holds %d tenants, want 2 (the trigger)", n)
	}
	exec(t, s.Admin, inboxRows(2, "svc.a", "31 days")) // a fabric table without RLS, cleaned by the same role

	idem := retention.Table{Name: "idem", Column: "created_at", Age: 48 * time.Hour}
	tables := append(fabricTables(), idem)
	for _, tc := range []struct {
		name         string
		tenantScoped bool
		wantIdem     int64
		wantLeft     int
	}{
		// What a plain DELETE (or a SECURITY DEFINER function owned by the
		// owner role, which FORCE binds as well) does: nothing.
		{"without tenant scope, RLS hides every row", false, 0, 10},
		{"tenant by tenant", true, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tables[len(tables)-1].TenantScoped = tc.tenantScoped
			r, err := retention.New(s.Service, s.Name, tables, retention.Options{Batch: 3})
			if err != nil {
				t.Fatal(err)
			}
			results, err := r.RunOnce(ctx)
			if err != nil {
				t.Fatalf("RunOnce as %s: %v", s.ServiceRole, err)
			}
			for _, res := range results {
				if res.Table == "idem" && (res.Deleted != tc.wantIdem || res.LargestBatch > 3) {
					t.Errorf("idem: %+v; want %d deleted, batches of at most 3", res, tc.wantIdem)
				}
			}
			if n := count(t, s.Admin, "SELECT count(*) FROM idem"); n != tc.wantLeft {
				t.Errorf("%d idem rows left, want %d", n, tc.wantLeft)
			}
		})
	}
	if n := count(t, s.Admin, "SELECT count(*) FROM idem WHERE key = 'young'"); n != 2 {
		t.Errorf("%d young rows left, want one per tenant", n)
	}
	if n := count(t, s.Admin, "SELECT count(*) FROM inbox_message"); n != 0 {
		t.Errorf("%d expired inbox rows left after running as the service role", n)
	}
}

// TestRunStopsWithItsContext: Run cleans on its interval and returns nil
// once its context ends, so the host can join it at shutdown.
func TestRunStopsWithItsContext(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	exec(t, s.Pool, inboxRows(3, "svc.a", "31 days"))
	r, err := retention.New(s.Pool, s.Name, []retention.Table{{Name: "inbox_message", Column: "received_at", Age: 720 * time.Hour}},
		retention.Options{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	fabrictest.Eventually(t, 10*time.Second, "expired inbox rows deleted by Run", func() bool {
		return count(t, s.Pool, "SELECT count(*) FROM inbox_message") == 0
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// fabricTables are the fabric's tables as the host registers them, with
// the default ages (an unpublished outbox row has no published_at).
func fabricTables() []retention.Table {
	return []retention.Table{
		{Name: "inbox_message", Column: "received_at", Age: 720 * time.Hour},
		{Name: "outbox_event", Column: "published_at", Age: 168 * time.Hour},
		{Name: "dlq_audit", Column: "at", Age: 8760 * time.Hour},
		{Name: "replay_job", Column: "updated_at", Age: 8760 * time.Hour},
	}
}
