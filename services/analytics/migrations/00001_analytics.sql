-- +goose Up
-- The projection: how many requests of a tenant, submitted on a day, for a
-- service and channel, are in each status now.
CREATE TABLE request_count (
    tenant_id  text   NOT NULL,
    day        date   NOT NULL,
    service_id text   NOT NULL,
    channel    text   NOT NULL,
    status     text   NOT NULL,
    count      bigint NOT NULL DEFAULT 0 CHECK (count >= 0),
    PRIMARY KEY (tenant_id, day, service_id, channel, status)
);

-- Where each request is counted, so a status change (which need not carry
-- the service, channel or day) knows which cell to decrement.
CREATE TABLE request_state (
    tenant_id  text        NOT NULL,
    request_id uuid        NOT NULL,
    day        date        NOT NULL,
    service_id text        NOT NULL,
    channel    text        NOT NULL,
    status     text        NOT NULL,
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, request_id)
);

ALTER TABLE request_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE request_count FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON request_count USING (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE request_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE request_state FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON request_state USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE request_state;
DROP TABLE request_count;
