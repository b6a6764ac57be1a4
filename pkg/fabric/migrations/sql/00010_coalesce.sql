-- +goose Up
-- Open coalescing windows (package coalesce, seed 004 §50-52): events of one
-- (rule, tenant, key) gathered in the consumer's transaction, flushed as one
-- platform.events-coalesced.v1 through the outbox when due. State in the
-- database, so a window survives a restart; the flush deletes the window in
-- the transaction that enqueues the summary, so it is emitted once.
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
    last_event  bytea       NOT NULL, -- the last envelope: the summary derives from it
    PRIMARY KEY (rule, tenant_id, key)
);
CREATE INDEX coalesce_window_due ON coalesce_window (due_at);

-- +goose Down
DROP TABLE coalesce_window;
