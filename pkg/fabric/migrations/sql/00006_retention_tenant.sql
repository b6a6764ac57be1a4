-- +goose Up
-- Retention of tables under row-level security. A service's tenant tables
-- FORCE row-level security on app.tenant_id, and the service's role neither
-- owns them nor bypasses RLS: a DELETE without a tenant set removes
-- nothing, and so does SELECT DISTINCT tenant_id, and so would a SECURITY
-- DEFINER function (its owner is subject to FORCE too, and holds no
-- BYPASSRLS). Retention therefore visits such a table tenant by tenant,
-- with app.tenant_id set exactly as a request or message would, and learns
-- the tenants from this list, which the trigger function below keeps: a
-- service attaches it (AFTER INSERT ... FOR EACH ROW) to every RLS table
-- it registers for retention. It holds tenant ids only, no tenant data, so
-- it needs no policy of its own; no policy anywhere is widened.
CREATE TABLE retention_tenant (
    tenant_id  text        PRIMARY KEY,
    first_seen timestamptz NOT NULL DEFAULT now()
);

-- Runs as the inserting role (not SECURITY DEFINER: it needs nothing the
-- service lacks). ON CONFLICT DO NOTHING finds a known tenant in the
-- primary key without writing, so the cost per insert is one index probe.
-- The search_path is pinned to this schema so the trigger never resolves
-- retention_tenant through a caller's path.
-- +goose StatementBegin
CREATE FUNCTION retention_note_tenant() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF NEW.tenant_id IS NOT NULL THEN
        INSERT INTO retention_tenant (tenant_id) VALUES (NEW.tenant_id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION retention_note_tenant();
DROP TABLE retention_tenant;
