-- name: InsertState :execrows
INSERT INTO request_state (tenant_id, request_id, day, service_id, channel, status, changed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (tenant_id, request_id) DO NOTHING;

-- name: GetStateForUpdate :one
SELECT * FROM request_state WHERE tenant_id = $1 AND request_id = $2 FOR UPDATE;

-- name: UpdateState :exec
UPDATE request_state SET status = $3, changed_at = $4 WHERE tenant_id = $1 AND request_id = $2;

-- name: AppendDeltas :exec
-- The handler's counter changes, appended (Store.Apply); the tenant noted
-- for the fold (an existing row is left alone: no lock is taken on it).
WITH noted AS (
    INSERT INTO count_tenant (tenant_id) VALUES (sqlc.arg(tenant_id)) ON CONFLICT DO NOTHING
)
INSERT INTO request_count_delta (tenant_id, day, service_id, channel, status, n)
SELECT sqlc.arg(tenant_id), unnest(sqlc.arg(days)::date[]), unnest(sqlc.arg(service_ids)::text[]),
       unnest(sqlc.arg(channels)::text[]), unnest(sqlc.arg(statuses)::text[]), unnest(sqlc.arg(ns)::bigint[]);

-- name: ListCountTenants :many
SELECT tenant_id FROM count_tenant ORDER BY tenant_id;

-- name: FoldDeltas :one
-- Moves up to max_rows of the tenant's oldest deltas into request_count,
-- summed per cell, in one statement, and returns how many it moved
-- (Store.Fold; the caller holds the tenant's fold lock). A cell's decrement is never folded before its
-- increment: the handler that decrements read the state the increment's
-- transaction committed, so its deltas have later sequence numbers.
WITH moved AS (
    DELETE FROM request_count_delta d
    WHERE d.seq IN (SELECT x.seq FROM request_count_delta x WHERE x.tenant_id = sqlc.arg(tenant_id)
                    ORDER BY x.seq LIMIT sqlc.arg(max_rows))
    RETURNING d.tenant_id, d.day, d.service_id, d.channel, d.status, d.n
), sums AS (
    SELECT m.tenant_id, m.day, m.service_id, m.channel, m.status, sum(m.n)::bigint AS n
    FROM moved m GROUP BY m.tenant_id, m.day, m.service_id, m.channel, m.status
), updated AS (
    UPDATE request_count c SET count = c.count + s.n
    FROM sums s
    WHERE c.tenant_id = s.tenant_id AND c.day = s.day AND c.service_id = s.service_id
      AND c.channel = s.channel AND c.status = s.status
    RETURNING c.tenant_id, c.day, c.service_id, c.channel, c.status
), inserted AS (
    -- Not INSERT … ON CONFLICT: its CHECK (count >= 0) would judge a
    -- negative sum before the conflict made it an update. Only this
    -- tenant's folder writes request_count, so a cell not updated is new.
    INSERT INTO request_count (tenant_id, day, service_id, channel, status, count)
    SELECT s.tenant_id, s.day, s.service_id, s.channel, s.status, s.n FROM sums s
    WHERE NOT EXISTS (SELECT 1 FROM updated u WHERE u.tenant_id = s.tenant_id AND u.day = s.day
                      AND u.service_id = s.service_id AND u.channel = s.channel AND u.status = s.status)
)
SELECT count(*)::integer FROM moved;

-- name: ListCounts :many
-- Tenant filter on top of row-level security: superusers bypass RLS.
SELECT day, service_id, channel, status, count FROM request_count_now
WHERE tenant_id = $1 AND day BETWEEN sqlc.arg(from_day)::date AND sqlc.arg(to_day)::date AND count > 0
ORDER BY day, service_id, channel, status;
