-- Every query filters by tenant on top of row-level security: superusers
-- (tests, local runs) bypass RLS.

-- name: InsertExport :exec
INSERT INTO report_export (tenant_id, id, requested_by, from_day, to_day, format)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: GetExport :one
SELECT * FROM report_export WHERE tenant_id = $1 AND id = $2;

-- name: ClaimExport :one
-- A worker takes the export: a queued one, or a running one whose worker
-- died (a redelivery), which starts over from nothing under a new attempt.
UPDATE report_export
SET status = 'running', attempt = attempt + 1, rows_total = NULL, rows_written = 0, object_key = NULL,
    error = NULL, started_at = now(), updated_at = now(), finished_at = NULL
WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'running')
RETURNING *;

-- name: UpdateExportProgress :execrows
-- Fenced by attempt: no rows when another worker has taken the export over.
UPDATE report_export SET rows_total = sqlc.arg(rows_total)::bigint, rows_written = sqlc.arg(rows_written)::bigint, updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'running';

-- name: FinishExport :execrows
UPDATE report_export
SET status = 'done', rows_total = sqlc.arg(rows)::bigint, rows_written = sqlc.arg(rows)::bigint, object_key = sqlc.arg(object_key)::text,
    error = NULL, updated_at = now(), finished_at = now()
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'running';

-- name: ReleaseExport :execrows
-- The attempt failed: back to queued to wait for a retry, or failed for good.
UPDATE report_export
SET status = sqlc.arg(status)::text, error = sqlc.arg(error)::text, updated_at = now(),
    finished_at = CASE WHEN sqlc.arg(status)::text = 'failed' THEN now() END
WHERE tenant_id = $1 AND id = $2 AND attempt = $3 AND status = 'running';

-- name: FailExport :execrows
-- A job that cannot be carried out at all (a malformed payload).
UPDATE report_export SET status = 'failed', error = sqlc.arg(error)::text, updated_at = now(), finished_at = now()
WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'running');

-- name: CountExportRows :one
SELECT count(*) FROM request_count_now
WHERE tenant_id = $1 AND day BETWEEN sqlc.arg(from_day)::date AND sqlc.arg(to_day)::date AND count > 0;

-- name: ListExportRows :many
-- One page of the export, after the last row of the previous page (keyset
-- on the primary key, so every page is an index range scan).
SELECT day, service_id, channel, status, count FROM request_count_now
WHERE tenant_id = $1 AND day BETWEEN sqlc.arg(from_day)::date AND sqlc.arg(to_day)::date AND count > 0
  AND (day, service_id, channel, status) > (sqlc.arg(after_day)::date, sqlc.arg(after_service)::text,
                                            sqlc.arg(after_channel)::text, sqlc.arg(after_status)::text)
ORDER BY day, service_id, channel, status
LIMIT sqlc.arg(page_size);
