-- +goose Up
-- Scheduled events (seed 004 §56-57; package internal/schedule). A tenant's
-- schedules, under row-level security like every tenant table here.
CREATE TABLE schedule (
    id           uuid        PRIMARY KEY,
    tenant_id    text        NOT NULL,
    name         text        NOT NULL,
    cron         text        NOT NULL,
    time_zone    text        NOT NULL,
    catch_up     text        NOT NULL CHECK (catch_up IN ('latest', 'all', 'none')),
    max_catch_up integer     NOT NULL CHECK (max_catch_up BETWEEN 1 AND 1000),
    payload      jsonb       NOT NULL DEFAULT '{}',
    enabled      boolean     NOT NULL DEFAULT true,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    disabled_at  timestamptz,
    UNIQUE (tenant_id, name)
);
ALTER TABLE schedule ENABLE ROW LEVEL SECURITY;
ALTER TABLE schedule FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON schedule USING (tenant_id = current_setting('app.tenant_id', true));

-- Every slot a sweep handled, fired or skipped by the catch-up policy: the
-- primary key is what makes a slot fire once across competing instances.
CREATE TABLE schedule_slot (
    schedule_id uuid        NOT NULL REFERENCES schedule (id),
    slot        timestamptz NOT NULL,
    tenant_id   text        NOT NULL,
    event_id    uuid        NOT NULL,
    fired_at    timestamptz NOT NULL,
    PRIMARY KEY (schedule_id, slot)
);
ALTER TABLE schedule_slot ENABLE ROW LEVEL SECURITY;
ALTER TABLE schedule_slot FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON schedule_slot USING (tenant_id = current_setting('app.tenant_id', true));

-- The next slot of each enabled schedule, read across tenants by the sweep
-- (ids and a time, no tenant data; as sla_timer).
CREATE TABLE schedule_timer (
    schedule_id uuid        PRIMARY KEY REFERENCES schedule (id),
    tenant_id   text        NOT NULL,
    due_at      timestamptz NOT NULL
);
CREATE INDEX schedule_timer_due ON schedule_timer (due_at);

-- +goose Down
DROP TABLE schedule_timer;
DROP TABLE schedule_slot;
DROP TABLE schedule;
