-- +goose Up
-- Approvals and reviews have a due date (the subscription's dueAfter, else
-- REVIEW_DUE_AFTER); one still open past it is reported once,
-- workflow.review-overdue.v1, and stamped overdue_at.
ALTER TABLE reaction_review ADD COLUMN due_at timestamptz, ADD COLUMN overdue_at timestamptz;

-- The due dates of open approvals and reviews, read across tenants by the
-- overdue sweep (ids only). A row exists until its review is resolved or
-- reported overdue: the sweep deletes it in the transaction that reports,
-- so the report goes out once however many instances sweep.
CREATE TABLE review_timer (
    review_id uuid        PRIMARY KEY REFERENCES reaction_review (id),
    tenant_id text        NOT NULL,
    due_at    timestamptz NOT NULL
);
CREATE INDEX review_timer_due ON review_timer (due_at);
ALTER TABLE review_timer ENABLE ROW LEVEL SECURITY;
ALTER TABLE review_timer FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON review_timer USING (
    tenant_id = current_setting('app.tenant_id', true)
    OR current_setting('app.scope', true) = 'platform');

-- +goose Down
DROP TABLE review_timer;
ALTER TABLE reaction_review DROP COLUMN overdue_at, DROP COLUMN due_at;
