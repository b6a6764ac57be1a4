-- +goose Up
-- Mass reactions behind a blast-radius gate (seed 004 §69-71, §88): a
-- reaction that touches many requests runs as a job, in batches, each batch
-- in its own transaction with its progress, so a crash resumes where the
-- last committed batch ended.
CREATE TABLE reaction_job (
    id              uuid        PRIMARY KEY,
    tenant_id       text        NOT NULL,
    decision_id     uuid        NOT NULL REFERENCES reaction_decision (id),
    service_id      text        NOT NULL,
    role            text        NOT NULL,
    total           integer     NOT NULL,
    done            integer     NOT NULL DEFAULT 0,
    last_request_id uuid,
    status          text        NOT NULL CHECK (status IN ('awaiting-approval', 'running', 'done', 'cancelled')),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (decision_id)
);
ALTER TABLE reaction_job ENABLE ROW LEVEL SECURITY;
ALTER TABLE reaction_job FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON reaction_job USING (tenant_id = current_setting('app.tenant_id', true));

-- The running jobs, read across tenants by the job sweep (ids only).
CREATE TABLE reaction_job_timer (
    job_id    uuid PRIMARY KEY REFERENCES reaction_job (id),
    tenant_id text NOT NULL
);

-- A review per affected request, once per decision.
ALTER TABLE reaction_review ADD COLUMN request_id uuid, ADD COLUMN note text;
CREATE UNIQUE INDEX reaction_review_request ON reaction_review (decision_id, request_id) WHERE request_id IS NOT NULL;

-- +goose Down
DROP INDEX reaction_review_request;
ALTER TABLE reaction_review DROP COLUMN note, DROP COLUMN request_id;
DROP TABLE reaction_job_timer;
DROP TABLE reaction_job;
