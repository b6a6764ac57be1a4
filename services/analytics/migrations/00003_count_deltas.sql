-- +goose Up
-- Counter changes no longer update request_count in the consumer's
-- transaction: every submission of a tenant and day would update the same
-- cell, and concurrent handlers queued on its row lock (analytics was the
-- first consumer to fall behind under load). A handler appends its deltas
-- here instead, touching no row another message touches; one writer per
-- tenant folds them into request_count (Store.Fold). Readers see
-- request_count_now: the counters plus the deltas not folded yet, so a
-- count is exact the moment the handler commits.
CREATE TABLE request_count_delta (
    seq        bigserial PRIMARY KEY,
    tenant_id  text   NOT NULL,
    day        date   NOT NULL,
    service_id text   NOT NULL,
    channel    text   NOT NULL,
    status     text   NOT NULL,
    n          bigint NOT NULL
);
CREATE INDEX request_count_delta_tenant ON request_count_delta (tenant_id, seq);
ALTER TABLE request_count_delta ENABLE ROW LEVEL SECURITY;
ALTER TABLE request_count_delta FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON request_count_delta USING (tenant_id = current_setting('app.tenant_id', true));

-- The tenants whose deltas the fold visits: tenant ids only, no tenant
-- data, so no row-level security (the fold reads it across tenants, then
-- works under each tenant).
CREATE TABLE count_tenant (
    tenant_id text PRIMARY KEY
);

-- security_invoker: the caller's row-level security applies through the view.
CREATE VIEW request_count_now WITH (security_invoker = true) AS
SELECT tenant_id, day, service_id, channel, status, sum(count)::bigint AS count
FROM (
    SELECT tenant_id, day, service_id, channel, status, count FROM request_count
    UNION ALL
    SELECT tenant_id, day, service_id, channel, status, n FROM request_count_delta
) c
GROUP BY tenant_id, day, service_id, channel, status;

-- +goose Down
DROP VIEW request_count_now;
DROP TABLE count_tenant;
DROP TABLE request_count_delta;
