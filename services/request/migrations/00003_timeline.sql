-- +goose Up
-- A request's timeline: one row per event about it, the ones this service
-- emits (written in the transaction that enqueues them) and the workflow
-- events it consumes. citizen_visible marks what the citizen is shown; staff
-- see every entry. Requests older than this table get their submission
-- entry synthesised from the request row when read: a backfill here would
-- see no rows, because the migrating owner role is bound by FORCE RLS.
CREATE TABLE timeline_entry (
    tenant_id       text        NOT NULL,
    event_id        uuid        NOT NULL,
    request_id      uuid        NOT NULL REFERENCES request (id) ON DELETE CASCADE,
    seq             bigint      GENERATED ALWAYS AS IDENTITY,
    type            text        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    status          text,
    summary         text        NOT NULL,
    citizen_visible boolean     NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX timeline_entry_request ON timeline_entry (tenant_id, request_id, occurred_at, seq);

ALTER TABLE timeline_entry ENABLE ROW LEVEL SECURITY;
ALTER TABLE timeline_entry FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON timeline_entry USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE timeline_entry;
