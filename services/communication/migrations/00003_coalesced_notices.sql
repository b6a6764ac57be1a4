-- +goose Up
-- Coalescing (NOTICE_COALESCE_WINDOW): a request's status notices are held
-- for a short window; a newer one for the same request and channel
-- supersedes the one still held, which becomes 'coalesced' and names the
-- notice that carries its news. It is kept, not deleted: the table is the
-- record of every notice the citizen was owed, and of why one never went.
ALTER TABLE notification DROP CONSTRAINT notification_status_check;
ALTER TABLE notification ADD CONSTRAINT notification_status_check
    CHECK (status IN ('pending', 'held', 'sent', 'failed', 'withheld', 'coalesced'));
ALTER TABLE notification ADD COLUMN coalesced_into uuid;

-- Every notice a request gets looks for the one of its request and channel
-- still held; held notices are few, so the index stays small.
CREATE INDEX notification_held_request ON notification (tenant_id, request_id, channel) WHERE status = 'held';

-- +goose Down
-- A coalesced notice was never sent, on purpose: the closest earlier status
-- is withheld, with the reason kept, rather than losing the row.
DROP INDEX notification_held_request;
UPDATE notification SET status = 'withheld', failure_reason = 'coalesced' WHERE status = 'coalesced';
ALTER TABLE notification DROP COLUMN coalesced_into;
ALTER TABLE notification DROP CONSTRAINT notification_status_check;
ALTER TABLE notification ADD CONSTRAINT notification_status_check
    CHECK (status IN ('pending', 'held', 'sent', 'failed', 'withheld'));
