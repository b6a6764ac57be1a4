-- +goose Up
-- The generic debounce/aggregate windows (00010) had no user: the one
-- consolidation the platform permits (a request's citizen notices, seed 004
-- §51 "when permitted") is communication's held notices, which supersede a
-- notice rather than emit a summary event. One way to coalesce, not two.
DROP TABLE IF EXISTS coalesce_window;

-- +goose Down
CREATE TABLE coalesce_window (
    rule        text        NOT NULL,
    tenant_id   text        NOT NULL,
    key         text        NOT NULL,
    count       integer     NOT NULL,
    first_at    timestamptz NOT NULL,
    last_at     timestamptz NOT NULL,
    due_at      timestamptz NOT NULL,
    last_state  jsonb       NOT NULL,
    event_ids   uuid[]      NOT NULL,
    last_event  bytea       NOT NULL,
    PRIMARY KEY (rule, tenant_id, key)
);
CREATE INDEX coalesce_window_due ON coalesce_window (due_at);
ALTER TABLE coalesce_window ENABLE ROW LEVEL SECURITY;
ALTER TABLE coalesce_window FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON coalesce_window USING (
    tenant_id = current_setting('app.tenant_id', true)
    OR current_setting('app.scope', true) = 'platform');
