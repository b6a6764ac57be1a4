package migrations_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	fabricmigrations "github.com/agora-platform/agora/pkg/fabric/migrations"
	"github.com/agora-platform/agora/pkg/fabric/retention"
	"github.com/agora-platform/agora/pkg/fabric/retention/retentiontest"
	"github.com/agora-platform/agora/services/request/migrations"
)

// TestIdempotencyKeysExpireUnderTheServiceRole migrates a schema as its
// owner role, stores idempotency keys of two tenants as the service's role
// (not the owner, no BYPASSRLS, FORCE ROW LEVEL SECURITY on the table), and
// runs the retention the service registers, as that role: each tenant's
// expired keys go, in bounded batches, and fresh keys stay.
func TestIdempotencyKeysExpireUnderTheServiceRole(t *testing.T) {
	env := fabrictest.EnvFrom(os.Getenv)
	s := retentiontest.NewSchema(t, env.DatabaseURL, func(ctx context.Context, owner *pgxpool.Pool, schema string) error {
		if err := fabricmigrations.Apply(ctx, owner, schema); err != nil {
			return err
		}
		return fabricmigrations.ApplyFS(ctx, owner, schema, "service_migrations", migrations.FS())
	})
	ctx := context.Background()
	for _, tenant := range []string{"org-a", "org-b"} {
		err := pgx.BeginFunc(ctx, s.Service, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", tenant); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO idempotency_key (tenant_id, citizen_id, key, body_hash, request_id, status_code, response, created_at)
				SELECT $1, 'c-1', 'k-' || i, 'h', gen_random_uuid(), 201, '{}',
				       CASE WHEN i <= 3 THEN now() - interval '3 days' ELSE now() - interval '1 hour' END
				FROM generate_series(1, 4) i`, tenant)
			return err
		})
		if err != nil {
			t.Fatalf("store keys of %s as the service role: %v", tenant, err)
		}
	}
	r, err := retention.New(s.Service, s.Name, []retention.Table{
		{Name: "idempotency_key", Column: "created_at", Age: 48 * time.Hour, TenantScoped: true}}, retention.Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	results, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatalf("retention as %s: %v", s.ServiceRole, err)
	}
	if res := results[0]; res.Deleted != 6 || res.LargestBatch > 2 {
		t.Errorf("retention = %+v; want 6 keys deleted in batches of at most 2", res)
	}
	var left, fresh int
	if err := s.Admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE created_at > now() - interval '2 days') FROM idempotency_key`).Scan(&left, &fresh); err != nil {
		t.Fatal(err)
	}
	if left != 2 || fresh != 2 {
		t.Errorf("%d keys left (%d fresh), want the 2 fresh ones", left, fresh)
	}
}
