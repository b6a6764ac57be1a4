-- +goose Up
-- Row-level security on every tenant-scoped table of the fabric, forced so
-- the service's role is bound even where it owns the table. A transaction
-- sees a row when it set the row's tenant (app.tenant_id, tenant.Tx and
-- tenant.Set) or opted into platform scope (app.scope = 'platform',
-- tenant.Platform): the relay's claim, retention, operator counts, the
-- inbox's duplicate check, which must see a reused event id whatever its
-- tenant. Rows without a tenant (platform events, platform-wide audit)
-- are visible in platform scope only. A query that forgot both sees and
-- changes nothing.
--
-- Not here, on purpose: retention_tenant and rate_bucket hold tenant ids
-- and token counts, no tenant data, and are read across tenants by design.

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['outbox_event', 'inbox_message', 'inbox_security_event', 'dlq_audit',
                             'gateway_received', 'coalesce_window', 'replay_job'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format($p$CREATE POLICY tenant_isolation ON %I USING (
            tenant_id = current_setting('app.tenant_id', true)
            OR current_setting('app.scope', true) = 'platform')$p$, t);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- A replay item belongs to its job's tenant: visible when its job is.
ALTER TABLE replay_item ENABLE ROW LEVEL SECURITY;
ALTER TABLE replay_item FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON replay_item USING (
    EXISTS (SELECT 1 FROM replay_job j WHERE j.id = job_id));

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['outbox_event', 'inbox_message', 'inbox_security_event', 'dlq_audit',
                             'gateway_received', 'coalesce_window', 'replay_job', 'replay_item'] LOOP
        EXECUTE format('DROP POLICY tenant_isolation ON %I', t);
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
