-- +goose Up
-- One row per ingested event: where it landed in the lake. The primary key
-- is the idempotency guard: an event already here is acked, not rewritten.
CREATE TABLE lineage (
    event_id       uuid        PRIMARY KEY,
    tenant_id      text        NOT NULL,
    event_type     text        NOT NULL,
    bucket         text        NOT NULL,
    object_key     text        NOT NULL,
    row_offset     integer     NOT NULL,
    batch_id       uuid        NOT NULL,
    producer       text        NOT NULL,
    correlation_id text        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    ingested_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX lineage_batch ON lineage (batch_id);

ALTER TABLE lineage ENABLE ROW LEVEL SECURITY;
ALTER TABLE lineage FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON lineage USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE lineage;
