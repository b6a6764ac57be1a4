-- +goose Up
-- Process instances and tasks are tenant-owned: row-level security keeps a
-- transaction to the tenant it set in app.tenant_id. FORCE applies the
-- policy to the owner role too; superusers bypass RLS, so the queries
-- filter by tenant_id as well.

CREATE TABLE process_instance (
    id             uuid        PRIMARY KEY,
    tenant_id      text        NOT NULL,
    request_id     uuid        NOT NULL,
    citizen_id     text        NOT NULL,
    service_id     text        NOT NULL,
    definition_id  text        NOT NULL,
    status         text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed')),
    outcome        text        CHECK (outcome IN ('approved', 'rejected', 'completed')),
    current_step   integer     NOT NULL DEFAULT 0,
    -- Correlation of the request.submitted.v1 that started the process:
    -- events emitted later (task completion, SLA breach) join it.
    correlation_id uuid        NOT NULL,
    started_at     timestamptz NOT NULL,
    completed_at   timestamptz,
    -- One process per request, whatever the inbox lets through.
    UNIQUE (tenant_id, request_id)
);

CREATE TABLE task (
    id            uuid        PRIMARY KEY,
    tenant_id     text        NOT NULL,
    process_id    uuid        NOT NULL REFERENCES process_instance (id),
    step_index    integer     NOT NULL,
    step          text        NOT NULL,
    assignee_role text        NOT NULL,
    status        text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'completed')),
    outcome       text,
    due_at        timestamptz NOT NULL,
    breached_at   timestamptz,
    created_at    timestamptz NOT NULL,
    completed_at  timestamptz,
    completed_by  text,
    UNIQUE (process_id, step_index)
);
CREATE INDEX task_tenant_process ON task (tenant_id, process_id);

-- SLA timers hold ids and deadlines only (no tenant data), so they have no
-- RLS: the watcher finds due timers of every tenant here, then reads and
-- updates each task under that timer's tenant. A row exists while its task
-- is open and not yet breached.
CREATE TABLE sla_timer (
    task_id   uuid        PRIMARY KEY REFERENCES task (id),
    tenant_id text        NOT NULL,
    due_at    timestamptz NOT NULL
);
CREATE INDEX sla_timer_due ON sla_timer (due_at);

ALTER TABLE process_instance ENABLE ROW LEVEL SECURITY;
ALTER TABLE process_instance FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON process_instance USING (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE task ENABLE ROW LEVEL SECURITY;
ALTER TABLE task FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON task USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE sla_timer;
DROP TABLE task;
DROP TABLE process_instance;
