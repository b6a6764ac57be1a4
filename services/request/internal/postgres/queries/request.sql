-- name: ReserveProtocolNumbers :one
-- Reserves @count numbers; the block is (last_value - count, last_value].
INSERT INTO protocol_counter (tenant_id, year, last_value)
VALUES (@tenant_id, @year, @count::bigint)
ON CONFLICT (tenant_id, year) DO UPDATE SET last_value = protocol_counter.last_value + @count::bigint
RETURNING last_value;

-- name: InsertRequest :exec
INSERT INTO request (id, tenant_id, protocol, citizen_id, service_id, form_id, form_version,
                     channel, fields, status, correlation_id, submitted_at, updated_at)
VALUES (@id, @tenant_id, @protocol, @citizen_id, @service_id, @form_id, @form_version,
        @channel, @fields, 'submitted', @correlation_id, @submitted_at, @submitted_at);

-- name: GetRequest :one
SELECT * FROM request WHERE tenant_id = @tenant_id AND id = @id;

-- name: GetRequestForUpdate :one
SELECT * FROM request WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: UpdateStatus :exec
UPDATE request SET status = @status, status_reason = @status_reason, updated_at = @updated_at
WHERE tenant_id = @tenant_id AND id = @id;

-- name: MarkSLABreached :execrows
UPDATE request SET sla_breached_at = @breached_at, updated_at = @breached_at
WHERE tenant_id = @tenant_id AND id = @id AND sla_breached_at IS NULL;

-- name: ClaimIdempotencyKey :execrows
-- Inserts the key with its response; a concurrent holder of the same key
-- makes this wait until it commits, then affect no row.
INSERT INTO idempotency_key (tenant_id, citizen_id, key, body_hash, request_id, status_code, response)
VALUES (@tenant_id, @citizen_id, @key, @body_hash, @request_id, @status_code, @response)
ON CONFLICT (tenant_id, citizen_id, key) DO NOTHING;

-- name: GetIdempotencyKey :one
SELECT body_hash, status_code, response FROM idempotency_key
WHERE tenant_id = @tenant_id AND citizen_id = @citizen_id AND key = @key;

-- name: InsertDocument :exec
INSERT INTO document (id, tenant_id, request_id, bucket, object_key, file_name, content_type,
                      size_bytes, sha256, uploaded_by, uploaded_at)
VALUES (@id, @tenant_id, @request_id, @bucket, @object_key, @file_name, @content_type,
        @size_bytes, @sha256, @uploaded_by, @uploaded_at);

-- name: ListDocuments :many
SELECT * FROM document WHERE tenant_id = @tenant_id AND request_id = @request_id
ORDER BY uploaded_at, id;

-- name: ListRequests :many
-- Newest first, one page after a keyset position (submitted_at, id);
-- citizen_id narrows to one citizen's own requests. The tenant filter is
-- on top of row-level security.
SELECT * FROM request
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(citizen_id)::text IS NULL OR citizen_id = sqlc.narg(citizen_id)::text)
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(after_at)::timestamptz IS NULL
       OR (submitted_at, id) < (sqlc.narg(after_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY submitted_at DESC, id DESC
LIMIT @max_rows;

-- name: AppendTimeline :exec
-- A redelivered event adds nothing: its id is already there.
INSERT INTO timeline_entry (tenant_id, event_id, request_id, type, occurred_at, status, summary, citizen_visible)
VALUES (@tenant_id, @event_id, @request_id, @type, @occurred_at, @status, @summary, @citizen_visible)
ON CONFLICT (tenant_id, event_id) DO NOTHING;

-- name: ListTimeline :many
SELECT event_id, type, occurred_at, status, summary, citizen_visible FROM timeline_entry
WHERE tenant_id = @tenant_id AND request_id = @request_id
ORDER BY occurred_at, seq
LIMIT 1000;

-- name: GetDocument :one
SELECT * FROM document WHERE tenant_id = @tenant_id AND request_id = @request_id AND id = @id;
