-- name: SetTenant :exec
SELECT set_config('app.tenant_id', sqlc.arg(tenant_id)::text, true);

-- name: InsertLineage :execrows
-- One statement per tenant of a batch; ON CONFLICT keeps a racing
-- duplicate from failing the whole batch.
INSERT INTO lineage (event_id, tenant_id, event_type, bucket, object_key, row_offset, batch_id, producer, correlation_id, occurred_at)
SELECT unnest(sqlc.arg(event_ids)::uuid[]), sqlc.arg(tenant_id)::text, unnest(sqlc.arg(event_types)::text[]),
       sqlc.arg(bucket)::text, unnest(sqlc.arg(object_keys)::text[]), unnest(sqlc.arg(row_offsets)::integer[]),
       sqlc.arg(batch_id)::uuid, unnest(sqlc.arg(producers)::text[]), unnest(sqlc.arg(correlation_ids)::text[]),
       unnest(sqlc.arg(occurred_ats)::timestamptz[])
ON CONFLICT (event_id) DO NOTHING;

-- name: GetLineage :one
-- Tenant filter on top of row-level security: superusers bypass RLS.
SELECT * FROM lineage WHERE tenant_id = $1 AND event_id = $2;
