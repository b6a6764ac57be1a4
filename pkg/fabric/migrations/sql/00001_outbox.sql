-- +goose Up
-- The transactional outbox (seed chapter 13): rows are inserted in the
-- caller's transaction and published by the relay after commit.
CREATE TABLE outbox_event (
    seq                  bigserial PRIMARY KEY,   -- publication order
    id                   uuid        NOT NULL UNIQUE,
    tenant_id            text,
    aggregate_type       text        NOT NULL,
    aggregate_id         text        NOT NULL,
    event_type           text        NOT NULL,
    event_version        text        NOT NULL,
    payload              jsonb       NOT NULL,
    body                 bytea       NOT NULL,    -- the exact envelope published
    exchange             text        NOT NULL,
    routing_key          text        NOT NULL,
    headers              jsonb       NOT NULL DEFAULT '{}',
    occurred_at          timestamptz NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    published_at         timestamptz,
    publication_attempts integer     NOT NULL DEFAULT 0,
    last_error           text,
    next_attempt_at      timestamptz
);
-- The relay only ever scans pending rows: a partial index keeps its cost
-- independent of how many published rows the table holds.
CREATE INDEX outbox_event_pending ON outbox_event (seq) WHERE published_at IS NULL;
CREATE INDEX outbox_event_pending_aggregate ON outbox_event (aggregate_type, aggregate_id, seq) WHERE published_at IS NULL;
CREATE INDEX outbox_event_published_at ON outbox_event (published_at) WHERE published_at IS NOT NULL;

-- +goose Down
DROP TABLE outbox_event;
