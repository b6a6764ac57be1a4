-- +goose Up
-- One row per processed document: where its text is and how it was read.
CREATE TABLE document_text (
    tenant_id     text        NOT NULL,
    document_id   uuid        NOT NULL,
    request_id    uuid        NOT NULL,
    event_id      uuid        NOT NULL,
    source_key    text        NOT NULL,
    text_key      text        NOT NULL,
    content_type  text        NOT NULL,
    method        text        NOT NULL,
    pages         integer     NOT NULL,
    characters    integer     NOT NULL,
    language      text        NOT NULL,
    source_bytes  bigint      NOT NULL,
    text_bytes    bigint      NOT NULL,
    duration_ms   bigint      NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id)
);

ALTER TABLE document_text ENABLE ROW LEVEL SECURITY;
ALTER TABLE document_text FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON document_text
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE document_text;
