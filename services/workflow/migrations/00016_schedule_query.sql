-- +goose Up
-- Temporal rules with a query (seed 004 §56-57): a schedule may name one of
-- the service's declared queries (internal/schedule, never SQL from the
-- tenant) with its parameters; each slot then fires one event per selected
-- entity. The tables keep their row-level security (00006).
ALTER TABLE schedule ADD COLUMN query jsonb; -- {name, params}; NULL: one event per slot

-- A query's slot has no single event: it records how many entities it
-- selected, and whether the bound (schedule.MaxSelected) cut the selection.
ALTER TABLE schedule_slot
    ALTER COLUMN event_id DROP NOT NULL,
    ADD COLUMN selected  integer,
    ADD COLUMN truncated boolean NOT NULL DEFAULT false;

-- The declared queries read a tenant's open tasks by due time and by age.
CREATE INDEX task_open_due ON task (tenant_id, due_at) WHERE status = 'open';
CREATE INDEX task_open_created ON task (tenant_id, created_at) WHERE status = 'open';

-- +goose Down
DROP INDEX task_open_created;
DROP INDEX task_open_due;
DELETE FROM schedule_slot WHERE event_id IS NULL;
ALTER TABLE schedule_slot DROP COLUMN truncated, DROP COLUMN selected, ALTER COLUMN event_id SET NOT NULL;
ALTER TABLE schedule DROP COLUMN query;
