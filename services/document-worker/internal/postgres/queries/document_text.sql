-- name: UpsertDocumentText :exec
-- A re-upload of the same document id replaces what was known about it.
INSERT INTO document_text (
    tenant_id, document_id, request_id, event_id, source_key, text_key, content_type, method,
    pages, characters, language, source_bytes, text_bytes, duration_ms, sha256, file_name
) VALUES (
    @tenant_id, @document_id, @request_id, @event_id, @source_key, @text_key, @content_type, @method,
    @pages, @characters, @language, @source_bytes, @text_bytes, @duration_ms, @sha256, @file_name
)
ON CONFLICT (tenant_id, document_id) DO UPDATE SET
    request_id = EXCLUDED.request_id, event_id = EXCLUDED.event_id, source_key = EXCLUDED.source_key,
    text_key = EXCLUDED.text_key, content_type = EXCLUDED.content_type, method = EXCLUDED.method,
    pages = EXCLUDED.pages, characters = EXCLUDED.characters, language = EXCLUDED.language,
    source_bytes = EXCLUDED.source_bytes, text_bytes = EXCLUDED.text_bytes,
    duration_ms = EXCLUDED.duration_ms, sha256 = EXCLUDED.sha256, file_name = EXCLUDED.file_name,
    processed_at = now();

-- name: GetDocumentText :one
SELECT * FROM document_text WHERE tenant_id = @tenant_id AND document_id = @document_id;
