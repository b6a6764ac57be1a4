-- +goose Up
-- Replays from history (package replay, seed 004 §40-41): an operator's
-- request to send a selection of a tenant's past events to one of the
-- service's queues, in one of three modes. The job row is the audit record
-- (who, why, what, how it went); its items are the events fetched from the
-- data lake when the job was created, each with the outcome it got, so a
-- replay reports progress and resumes after a crash where it stopped.
CREATE TABLE replay_job (
    id           uuid        PRIMARY KEY,
    tenant_id    text        NOT NULL,
    queue        text        NOT NULL,
    mode         text        NOT NULL CHECK (mode IN ('DRY_RUN', 'SIMULATION', 'PRODUCTION')),
    selection    jsonb       NOT NULL,
    reason       text        NOT NULL,
    requested_by text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('running', 'done', 'cancelled')),
    total        integer     NOT NULL,
    processed    integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX replay_job_tenant ON replay_job (tenant_id, created_at DESC);
CREATE INDEX replay_job_running ON replay_job (created_at) WHERE status = 'running';

CREATE TABLE replay_item (
    job_id   uuid    NOT NULL REFERENCES replay_job (id) ON DELETE CASCADE,
    seq      integer NOT NULL,
    event_id uuid    NOT NULL,
    type     text    NOT NULL,
    body     bytea   NOT NULL,  -- the envelope as the history returned it
    outcome  text,              -- NULL until the job reaches it
    detail   text,
    PRIMARY KEY (job_id, seq)
);
CREATE INDEX replay_item_pending ON replay_item (job_id, seq) WHERE outcome IS NULL;

-- +goose Down
DROP TABLE replay_item;
DROP TABLE replay_job;
