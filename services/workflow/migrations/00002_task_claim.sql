-- +goose Up
-- The attendants' worklist: a task may be claimed by one person (the token
-- subject) before it is completed. Runs as the schema owner (workflow_owner),
-- which owns task; the service role's table-level DML grant covers the new
-- columns, so nothing is granted here. Both columns are nullable without a
-- default: adding them rewrites nothing.
ALTER TABLE task ADD COLUMN assignee   text;
ALTER TABLE task ADD COLUMN claimed_at timestamptz;
-- A claim is a subject and a time, or neither.
ALTER TABLE task ADD CONSTRAINT task_claim_whole CHECK ((assignee IS NULL) = (claimed_at IS NULL));

-- GET /v1/tasks: a tenant's tasks by due date, ties by id (keyset pages).
CREATE INDEX task_tenant_due ON task (tenant_id, due_at, id);

-- +goose Down
DROP INDEX task_tenant_due;
ALTER TABLE task DROP CONSTRAINT task_claim_whole;
ALTER TABLE task DROP COLUMN claimed_at;
ALTER TABLE task DROP COLUMN assignee;
