-- +goose Up
-- The tenant an audited DLQ operation was confined to: the operator's
-- tenant for the HTTP API (which shows an operator only their tenant's
-- rows), the --tenant filter for fabricctl, NULL for a platform-wide
-- operation (seen by platform operators through fabricctl only).
ALTER TABLE dlq_audit ADD COLUMN tenant_id text;
CREATE INDEX dlq_audit_tenant ON dlq_audit (tenant_id, id);
-- Retention deletes by age.
CREATE INDEX dlq_audit_at ON dlq_audit (at);

-- +goose Down
DROP INDEX dlq_audit_at;
DROP INDEX dlq_audit_tenant;
ALTER TABLE dlq_audit DROP COLUMN tenant_id;
