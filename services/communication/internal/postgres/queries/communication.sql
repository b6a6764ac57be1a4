-- name: UpsertContact :one
INSERT INTO contact (tenant_id, citizen_id, email, phone, preferred_channel, updated_by,
                     progress_notices, quiet_start, quiet_end, quiet_time_zone)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (tenant_id, citizen_id) DO UPDATE
SET email = EXCLUDED.email, phone = EXCLUDED.phone, preferred_channel = EXCLUDED.preferred_channel,
    updated_by = EXCLUDED.updated_by, updated_at = now(), progress_notices = EXCLUDED.progress_notices,
    quiet_start = EXCLUDED.quiet_start, quiet_end = EXCLUDED.quiet_end, quiet_time_zone = EXCLUDED.quiet_time_zone
RETURNING *;

-- name: GetContact :one
SELECT * FROM contact WHERE tenant_id = $1 AND citizen_id = $2;

-- name: EnsureNotification :one
-- Creates the notification of a source event, or returns the one a failed
-- earlier attempt left (see RecordAttemptFailure), together with the
-- citizen's contact (NULL columns when there is none): one round trip where
-- a lookup and an insert took two. A NULL channel is the contact's
-- preferred one, e-mail without a contact.
WITH c AS (
    SELECT * FROM contact
    WHERE contact.tenant_id = sqlc.arg(tenant_id) AND contact.citizen_id = sqlc.arg(citizen_id)
), n AS (
    INSERT INTO notification (id, tenant_id, source_event_id, request_id, citizen_id, channel, template, status)
    VALUES (sqlc.arg(id), sqlc.arg(tenant_id), sqlc.arg(source_event_id), sqlc.narg(request_id), sqlc.arg(citizen_id),
            coalesce(sqlc.narg(channel)::text, (SELECT c.preferred_channel FROM c), 'email'), sqlc.arg(template), 'pending')
    ON CONFLICT (tenant_id, source_event_id) DO UPDATE SET updated_at = now()
    RETURNING *
)
SELECT n.id, n.tenant_id, n.source_event_id, n.request_id, n.citizen_id, n.channel, n.template, n.status,
       n.attempts, n.last_error, n.failure_reason, n.created_at, n.updated_at, n.sent_at,
       c.citizen_id AS contact_citizen_id, c.email AS contact_email, c.phone AS contact_phone,
       c.preferred_channel AS contact_preferred_channel, c.updated_at AS contact_updated_at,
       c.progress_notices AS contact_progress_notices, c.quiet_start AS contact_quiet_start,
       c.quiet_end AS contact_quiet_end, c.quiet_time_zone AS contact_quiet_time_zone
FROM n LEFT JOIN c ON true;

-- name: RecordAttemptFailure :exec
-- Runs after the delivery transaction rolled back, so the row may not
-- exist yet: the attempt is what must survive.
INSERT INTO notification (id, tenant_id, source_event_id, request_id, citizen_id, channel, template, status, attempts, last_error)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8)
ON CONFLICT (tenant_id, source_event_id) DO UPDATE
SET attempts = notification.attempts + 1, last_error = EXCLUDED.last_error, updated_at = now();

-- name: MarkSent :exec
UPDATE notification SET status = 'sent', attempts = attempts + 1, last_error = NULL, sent_at = now(), updated_at = now()
WHERE tenant_id = $1 AND id = $2;

-- name: MarkFailed :exec
UPDATE notification SET status = 'failed', attempts = attempts + sqlc.arg(attempted)::integer, last_error = $3,
    failure_reason = $4, updated_at = now()
WHERE tenant_id = $1 AND id = $2;

-- name: ListNotifications :many
-- Tenant filter on top of row-level security: superusers bypass RLS.
SELECT * FROM notification
WHERE tenant_id = $1 AND request_id = $2
  AND (sqlc.narg(citizen_id)::text IS NULL OR citizen_id = sqlc.narg(citizen_id))
ORDER BY created_at, id;

-- name: MarkWithheld :exec
UPDATE notification SET status = 'withheld', failure_reason = $3, updated_at = now()
WHERE tenant_id = $1 AND id = $2;

-- name: MarkHeld :exec
-- Holds the notification and indexes its hold, in one statement (it runs
-- for every coalesced notice). The template changes when the notice took
-- over a held one (coalescing).
WITH held AS (
    UPDATE notification SET status = 'held', template = sqlc.arg(template), not_before = sqlc.arg(not_before),
        params = sqlc.arg(params), cause = sqlc.arg(cause), updated_at = now()
    WHERE notification.tenant_id = sqlc.arg(tenant_id) AND notification.id = sqlc.arg(id)
    RETURNING notification.id AS held_id, notification.tenant_id AS held_tenant
)
INSERT INTO notification_hold (notification_id, tenant_id, not_before)
SELECT held_id, held_tenant, sqlc.arg(not_before) FROM held
ON CONFLICT (notification_id) DO UPDATE SET not_before = EXCLUDED.not_before;

-- name: PutHold :exec
INSERT INTO notification_hold (notification_id, tenant_id, not_before) VALUES ($1, $2, $3)
ON CONFLICT (notification_id) DO UPDATE SET not_before = EXCLUDED.not_before;

-- name: DueHolds :many
-- SKIP LOCKED: instances dispatching at once take different notifications.
SELECT * FROM notification_hold WHERE not_before <= sqlc.arg(now)
ORDER BY not_before LIMIT sqlc.arg(max_rows)
FOR UPDATE SKIP LOCKED;

-- name: DeleteHolds :exec
-- Releases, at once, the holds a dispatch took (in platform scope).
DELETE FROM notification_hold WHERE notification_id = ANY(sqlc.arg(ids)::uuid[]);

-- name: HeldNotifications :many
-- One tenant's notifications of a dispatch, in one statement.
SELECT * FROM notification WHERE tenant_id = sqlc.arg(tenant_id) AND id = ANY(sqlc.arg(ids)::uuid[]);

-- name: PostponeHeld :exec
-- A failed attempt to send a held notification: it waits again.
UPDATE notification SET attempts = attempts + 1, last_error = $3, not_before = $4, updated_at = now()
WHERE tenant_id = $1 AND id = $2;

-- name: LockRequestNotices :exec
-- Serializes the notices of one request and channel until the transaction
-- ends: without it two handlers (the submission's and a status change's
-- queue run apart) could each hold a notice of the key, neither seeing the
-- other's uncommitted one, and the citizen would get both. The two-key form
-- has a key space of its own, apart from single-key advisory locks; the
-- first key names this use ('comm').
SELECT pg_advisory_xact_lock(1668246893,
    hashtext(sqlc.arg(tenant_id)::text || '/' || sqlc.arg(request_id)::text || '/' || sqlc.arg(channel)::text));

-- name: SupersedeHeld :many
-- Takes over the held notices of a request and channel (of the given
-- templates) for notification id: releases their holds, marks them
-- coalesced into id and returns them, oldest first. Deleting the hold
-- first is what keeps the dispatcher out: it locks a hold before it sends
-- (FOR UPDATE SKIP LOCKED), so a hold it is sending makes this wait and
-- then find it gone, and one deleted here is skipped by the dispatcher.
WITH released AS (
    DELETE FROM notification_hold h
    USING notification n
    WHERE n.tenant_id = sqlc.arg(tenant_id) AND n.request_id = sqlc.arg(request_id) AND n.channel = sqlc.arg(channel)
      AND n.status = 'held' AND n.template = ANY(sqlc.arg(templates)::text[]) AND n.id <> sqlc.arg(id)
      AND h.tenant_id = sqlc.arg(tenant_id) AND h.notification_id = n.id
    RETURNING h.notification_id, h.not_before
), superseded AS (
    UPDATE notification SET status = 'coalesced', coalesced_into = sqlc.arg(id), updated_at = now()
    FROM released
    WHERE notification.tenant_id = sqlc.arg(tenant_id) AND notification.id = released.notification_id
      AND notification.status = 'held'
    RETURNING notification.id, notification.template, notification.params, released.not_before, notification.created_at
)
SELECT id, template, params, not_before FROM superseded ORDER BY created_at, id;
