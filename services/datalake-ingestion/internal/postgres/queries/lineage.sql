-- name: ClaimLineage :many
-- Claims a batch's events for one tenant before their file is written:
-- an event another batch holds (committed, or still writing: the insert
-- waits for it) is not returned and stays out of this batch's file.
-- Callers sort event ids, so concurrent batches lock in one order.
INSERT INTO lineage (event_id, tenant_id, event_type, bucket, object_key, row_offset, batch_id, producer, correlation_id, occurred_at)
SELECT unnest(sqlc.arg(event_ids)::uuid[]), sqlc.arg(tenant_id)::text, unnest(sqlc.arg(event_types)::text[]),
       sqlc.arg(bucket)::text, '', -1,
       sqlc.arg(batch_id)::uuid, unnest(sqlc.arg(producers)::text[]), unnest(sqlc.arg(correlation_ids)::text[]),
       unnest(sqlc.arg(occurred_ats)::timestamptz[])
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id::text;

-- name: PlaceLineage :execrows
-- Points claimed events at the file and row they were written to.
UPDATE lineage l SET object_key = p.object_key, row_offset = p.row_offset
FROM (SELECT unnest(sqlc.arg(event_ids)::uuid[]) AS event_id, unnest(sqlc.arg(object_keys)::text[]) AS object_key,
             unnest(sqlc.arg(row_offsets)::integer[]) AS row_offset) p
WHERE l.event_id = p.event_id AND l.tenant_id = sqlc.arg(tenant_id)::text AND l.batch_id = sqlc.arg(batch_id)::uuid;

-- name: GetLineage :one
-- Tenant filter on top of row-level security: superusers bypass RLS.
SELECT * FROM lineage WHERE tenant_id = $1 AND event_id = $2;

-- name: ObjectHasLineage :one
-- Whether committed lineage points at a lake file (the orphan sweep). The
-- batch id (indexed) narrows it; the tenant filter is on top of RLS.
SELECT EXISTS (
    SELECT 1 FROM lineage
    WHERE tenant_id = sqlc.arg(tenant_id)::text AND batch_id = sqlc.arg(batch_id)::uuid AND object_key = sqlc.arg(object_key)::text
);

-- name: ListHistory :many
-- One page of a tenant's stored events in (occurred_at, event_id) order,
-- from after the cursor's position: keyset pagination on lineage_history.
-- Bounds are never NULL (callers pass the widest range when a parameter
-- is absent), so a generic plan still bounds the index scan. Claims of a
-- batch still writing (no object key yet, row_offset -1) are left out,
-- though only committed ones are visible anyway. The tenant filter is on
-- top of RLS.
SELECT event_id::text AS event_id, event_type, bucket, object_key, row_offset, correlation_id, occurred_at
FROM lineage
WHERE tenant_id = sqlc.arg(tenant_id)::text
  AND occurred_at >= sqlc.arg(from_time)::timestamptz
  AND occurred_at < sqlc.arg(to_time)::timestamptz
  AND (occurred_at, event_id) > (sqlc.arg(after_time)::timestamptz, sqlc.arg(after_id)::uuid)
  AND (cardinality(sqlc.arg(event_types)::text[]) = 0 OR event_type = ANY (sqlc.arg(event_types)::text[]))
  AND (sqlc.arg(correlation_id)::text = '' OR correlation_id = sqlc.arg(correlation_id)::text)
  AND object_key <> '' AND row_offset >= 0
ORDER BY lineage.occurred_at, lineage.event_id
LIMIT sqlc.arg(max_rows)::integer;
