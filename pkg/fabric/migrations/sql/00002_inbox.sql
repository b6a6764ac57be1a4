-- +goose Up
-- Inbox: one row per (consumer, event) whose effect was committed.
CREATE TABLE inbox_message (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    tenant_id    text,
    event_type   text        NOT NULL,
    payload_hash bytea       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
CREATE INDEX inbox_message_received_at ON inbox_message (received_at);

-- An event id seen again with another payload or tenant: forged or corrupted.
CREATE TABLE inbox_security_event (
    id              bigserial PRIMARY KEY,
    consumer        text        NOT NULL,
    event_id        uuid        NOT NULL,
    event_type      text        NOT NULL,
    tenant_id       text,
    first_tenant_id text,
    payload_hash    bytea       NOT NULL,
    first_hash      bytea       NOT NULL,
    reason          text        NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE inbox_security_event;
DROP TABLE inbox_message;
