-- +goose Up
-- The external-event gateway's replay protection (pkg/fabric/gateway): one
-- row per (source, CloudEvents id) it accepted, written in the transaction
-- that enqueues the event, so an event is accepted once however often it
-- is sent. Like the inbox, a ledger of ids, without row-level security.
CREATE TABLE gateway_received (
    source_id   text        NOT NULL,
    event_id    text        NOT NULL,
    tenant_id   text        NOT NULL,
    envelope_id uuid        NOT NULL,
    event_type  text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, event_id)
);
CREATE INDEX gateway_received_received_at ON gateway_received (received_at);

-- +goose Down
DROP TABLE gateway_received;
