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
