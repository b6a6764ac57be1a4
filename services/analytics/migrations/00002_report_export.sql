-- +goose Up
-- A report export: asked for over REST, carried out by a worker of the
-- analytics.report-export queue (report.export.v1), which writes the file to
-- object storage and keeps the progress here so GET can show it.
CREATE TABLE report_export (
    tenant_id    text        NOT NULL,
    id           uuid        NOT NULL,
    requested_by text        NOT NULL,
    from_day     date        NOT NULL,
    to_day       date        NOT NULL,
    format       text        NOT NULL CHECK (format IN ('csv', 'parquet')),
    status       text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    -- attempt counts the workers that took the export; each one's writes
    -- are fenced by it, so a worker overtaken by a redelivery stops.
    attempt      integer     NOT NULL DEFAULT 0,
    rows_total   bigint      CHECK (rows_total >= 0),
    rows_written bigint      NOT NULL DEFAULT 0 CHECK (rows_written >= 0),
    object_key   text,
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    CHECK (from_day <= to_day)
);

ALTER TABLE report_export ENABLE ROW LEVEL SECURITY;
ALTER TABLE report_export FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON report_export USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE report_export;
