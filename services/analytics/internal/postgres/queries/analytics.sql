-- name: InsertState :execrows
INSERT INTO request_state (tenant_id, request_id, day, service_id, channel, status, changed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, request_id) DO NOTHING;

-- name: GetStateForUpdate :one
SELECT * FROM request_state WHERE tenant_id = $1 AND request_id = $2 FOR UPDATE;

-- name: UpdateState :exec
UPDATE request_state SET status = $3, changed_at = $4 WHERE tenant_id = $1 AND request_id = $2;

-- name: AddCount :exec
INSERT INTO request_count (tenant_id, day, service_id, channel, status, count)
VALUES ($1, $2, $3, $4, $5, sqlc.arg(delta)::bigint)
ON CONFLICT (tenant_id, day, service_id, channel, status)
DO UPDATE SET count = request_count.count + EXCLUDED.count;

-- name: SubtractCount :execrows
-- Separate from AddCount: an INSERT of a negative count would trip the
-- CHECK before ON CONFLICT turns it into an update.
UPDATE request_count SET count = count - sqlc.arg(n)::bigint
WHERE tenant_id = $1 AND day = $2 AND service_id = $3 AND channel = $4 AND status = $5;

-- name: ListCounts :many
-- Tenant filter on top of row-level security: superusers bypass RLS.
SELECT day, service_id, channel, status, count FROM request_count
WHERE tenant_id = $1 AND day BETWEEN sqlc.arg(from_day)::date AND sqlc.arg(to_day)::date AND count > 0
ORDER BY day, service_id, channel, status;
