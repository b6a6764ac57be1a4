-- +goose Up
-- The watchdog (seed 004 §58-59): an instance that waits on one step longer
-- than its definition's stuckAfter is reported stuck, once per step, by
-- workflow.stuck.v1. One timer per open task, armed when the task opens and
-- dropped when it completes or is cancelled; a sweep takes due timers with
-- FOR UPDATE SKIP LOCKED and deletes each in the transaction that enqueues
-- the event, so competing instances report a task once. Like sla_timer, it
-- holds ids and a due time, no tenant data, and is read across tenants.
-- Tasks opened before this migration have no timer and are not watched.
CREATE TABLE stuck_timer (
    task_id    uuid        PRIMARY KEY REFERENCES task (id),
    tenant_id  text        NOT NULL,
    process_id uuid        NOT NULL,
    due_at     timestamptz NOT NULL
);
CREATE INDEX stuck_timer_due ON stuck_timer (due_at);

-- +goose Down
DROP TABLE stuck_timer;
