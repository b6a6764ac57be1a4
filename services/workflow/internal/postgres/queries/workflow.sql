-- name: InsertProcess :execrows
INSERT INTO process_instance (id, tenant_id, request_id, citizen_id, service_id, definition_id,
                              correlation_id, started_at)
VALUES (@id, @tenant_id, @request_id, @citizen_id, @service_id, @definition_id, @correlation_id, @started_at)
ON CONFLICT (tenant_id, request_id) DO NOTHING;

-- name: InsertTask :exec
INSERT INTO task (id, tenant_id, process_id, step_index, step, assignee_role, due_at, created_at)
VALUES (@id, @tenant_id, @process_id, @step_index, @step, @assignee_role, @due_at, @created_at);

-- name: InsertTimer :exec
INSERT INTO sla_timer (task_id, tenant_id, due_at) VALUES (@task_id, @tenant_id, @due_at);

-- name: DeleteTimer :exec
DELETE FROM sla_timer WHERE task_id = @task_id;

-- name: GetTaskForUpdate :one
SELECT * FROM task WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: GetProcessForUpdate :one
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: GetProcess :one
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND id = @id;

-- name: CompleteTask :exec
UPDATE task SET status = 'completed', outcome = @outcome, completed_at = @completed_at, completed_by = @completed_by
WHERE tenant_id = @tenant_id AND id = @id;

-- name: AdvanceProcess :exec
UPDATE process_instance SET current_step = @current_step WHERE tenant_id = @tenant_id AND id = @id;

-- name: CompleteProcess :exec
UPDATE process_instance SET status = 'completed', outcome = @outcome, completed_at = @completed_at
WHERE tenant_id = @tenant_id AND id = @id;

-- name: DueTimers :many
-- Several instances sweep at once: each locks the timers it takes and
-- skips the others', so a breach is reported once.
SELECT task_id, tenant_id, due_at FROM sla_timer
WHERE due_at <= @now
ORDER BY due_at
LIMIT @max_timers
FOR UPDATE SKIP LOCKED;

-- name: MarkBreached :one
UPDATE task SET breached_at = @breached_at
WHERE tenant_id = @tenant_id AND id = @id AND status = 'open' AND breached_at IS NULL
RETURNING *;

-- name: ListProcessesByRequest :many
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND request_id = @request_id ORDER BY started_at;

-- name: ListTasks :many
SELECT * FROM task WHERE tenant_id = @tenant_id AND process_id = ANY(@process_ids::uuid[]) ORDER BY process_id, step_index;
