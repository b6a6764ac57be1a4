-- +goose Up
-- pgvector lives in schema public, once per database (production
-- provisions it; locally the superuser creates it here). Two services
-- migrating at once may race to create it: the loser carries on.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS vector SCHEMA public;
EXCEPTION WHEN unique_violation OR duplicate_object THEN
    NULL;
END
$$;
-- +goose StatementEnd

-- Chunks live in one partition per tenant (created on first use by the
-- service, each with its own HNSW index), so a search touches only the
-- caller's tenant and one tenant's growth never slows another's index.
CREATE TABLE chunk (
    tenant_id   text              NOT NULL,
    chunk_id    uuid              NOT NULL,
    document_id uuid              NOT NULL,
    ordinal     integer           NOT NULL,
    content     text              NOT NULL,
    embedding   public.vector(384) NOT NULL,
    embedder    text              NOT NULL,
    created_at  timestamptz       NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chunk_id)
) PARTITION BY LIST (tenant_id);

CREATE INDEX chunk_document ON chunk (tenant_id, document_id);

ALTER TABLE chunk ENABLE ROW LEVEL SECURITY;
ALTER TABLE chunk FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON chunk
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

-- What was indexed, per document.
CREATE TABLE indexed_document (
    tenant_id   text        NOT NULL,
    document_id uuid        NOT NULL,
    request_id  uuid,
    text_key    text        NOT NULL,
    chunks      integer     NOT NULL,
    embedder    text        NOT NULL,
    dimensions  integer     NOT NULL,
    event_id    uuid        NOT NULL,
    indexed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, document_id)
);

ALTER TABLE indexed_document ENABLE ROW LEVEL SECURITY;
ALTER TABLE indexed_document FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON indexed_document
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

-- +goose Down
DROP TABLE indexed_document;
DROP TABLE chunk;
