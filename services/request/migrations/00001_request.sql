-- +goose Up
-- Every table here is tenant-owned: row-level security keeps a transaction
-- to the tenant it set in app.tenant_id (set_config(..., true) per request
-- or message). FORCE applies the policy to the owner role too. Superusers
-- bypass RLS, so the queries filter by tenant_id as well.

CREATE TABLE request (
    id             uuid        PRIMARY KEY,
    tenant_id      text        NOT NULL,
    protocol       text        NOT NULL,
    citizen_id     text        NOT NULL,
    service_id     text        NOT NULL,
    form_id        text        NOT NULL,
    form_version   integer     NOT NULL CHECK (form_version >= 1),
    channel        text        NOT NULL,
    fields         jsonb       NOT NULL,
    status         text        NOT NULL DEFAULT 'submitted'
                   CHECK (status IN ('submitted', 'in_progress', 'completed', 'rejected', 'cancelled')),
    status_reason  text,
    sla_breached_at timestamptz,
    -- The correlation id of request.submitted.v1: later events about this
    -- request (documents, status changes) join the same conversation.
    correlation_id uuid        NOT NULL,
    submitted_at   timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    UNIQUE (tenant_id, protocol)
);
CREATE INDEX request_citizen ON request (tenant_id, citizen_id, submitted_at DESC);

-- One counter row per tenant and year makes protocol numbers dense,
-- human-readable and unique per tenant (AGR-2026-000123).
CREATE TABLE protocol_counter (
    tenant_id  text    NOT NULL,
    year       integer NOT NULL,
    last_value bigint  NOT NULL,
    PRIMARY KEY (tenant_id, year)
);

-- Idempotency-Key records: the first request with a key inserts the row
-- (a concurrent second one waits on the primary key until the first
-- commits), and the stored response is replayed for the same body.
CREATE TABLE idempotency_key (
    tenant_id     text        NOT NULL,
    citizen_id    text        NOT NULL,
    key           text        NOT NULL,
    body_hash     text        NOT NULL,
    request_id    uuid        NOT NULL,
    status_code   integer     NOT NULL,
    response      jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, citizen_id, key)
);

CREATE TABLE document (
    id           uuid        PRIMARY KEY,
    tenant_id    text        NOT NULL,
    request_id   uuid        NOT NULL REFERENCES request (id),
    bucket       text        NOT NULL,
    object_key   text        NOT NULL,
    file_name    text        NOT NULL,
    content_type text        NOT NULL,
    size_bytes   bigint      NOT NULL,
    sha256       text        NOT NULL,
    uploaded_by  text        NOT NULL,
    uploaded_at  timestamptz NOT NULL
);
CREATE INDEX document_request ON document (tenant_id, request_id, uploaded_at);

ALTER TABLE request ENABLE ROW LEVEL SECURITY;
ALTER TABLE request FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON request USING (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE protocol_counter ENABLE ROW LEVEL SECURITY;
ALTER TABLE protocol_counter FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON protocol_counter USING (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE idempotency_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency_key FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON idempotency_key USING (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE document ENABLE ROW LEVEL SECURITY;
ALTER TABLE document FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON document USING (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE document;
DROP TABLE idempotency_key;
DROP TABLE protocol_counter;
DROP TABLE request;
