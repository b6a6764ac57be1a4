-- +goose Up
-- Resume (seed 004 §20, §87): an event a waiting step is for, received
-- before the process reached that step, is kept here; when the step opens
-- it is resumed at once, so an early event is not lost. One row per
-- (tenant, request, type): the first event counts.
CREATE TABLE early_event (
    tenant_id   text        NOT NULL,
    request_id  uuid        NOT NULL,
    event_type  text        NOT NULL,
    event_id    uuid        NOT NULL,
    event       bytea       NOT NULL, -- the envelope: what the resume derives from
    received_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, request_id, event_type)
);
ALTER TABLE early_event ENABLE ROW LEVEL SECURITY;
ALTER TABLE early_event FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON early_event USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE early_event;
