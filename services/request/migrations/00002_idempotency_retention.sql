-- +goose Up
-- Idempotency keys expire (RETENTION_IDEMPOTENCY, default 48 h): the host's
-- retention deletes them tenant by tenant, because idempotency_key forces
-- row-level security and the service's role neither owns it nor bypasses
-- RLS (fabric migration 00006). The trigger keeps retention_tenant, the
-- list of tenants to visit, complete from now on.
CREATE TRIGGER idempotency_key_retention AFTER INSERT ON idempotency_key
    FOR EACH ROW EXECUTE FUNCTION retention_note_tenant();

-- Tenants of the keys already stored. A role that bypasses RLS (a local
-- superuser) sees them in idempotency_key itself; the owner role, bound by
-- FORCE, sees none there, so the tenants of recent events (tables without
-- RLS) are added too. A key whose tenant appears in neither stays until a
-- superuser runs: INSERT INTO retention_tenant (tenant_id) SELECT DISTINCT
-- tenant_id FROM idempotency_key ON CONFLICT DO NOTHING.
INSERT INTO retention_tenant (tenant_id)
SELECT tenant_id FROM idempotency_key
UNION SELECT tenant_id FROM outbox_event WHERE tenant_id IS NOT NULL
UNION SELECT tenant_id FROM inbox_message WHERE tenant_id IS NOT NULL
ON CONFLICT DO NOTHING;

-- +goose Down
DROP TRIGGER idempotency_key_retention ON idempotency_key;
