-- name: DeleteDocumentChunks :execrows
DELETE FROM chunk WHERE tenant_id = @tenant_id AND document_id = @document_id;

-- name: UpsertIndexedDocument :exec
INSERT INTO indexed_document (tenant_id, document_id, request_id, text_key, chunks, embedder, dimensions, event_id)
VALUES (@tenant_id, @document_id, @request_id, @text_key, @chunks, @embedder, @dimensions, @event_id)
ON CONFLICT (tenant_id, document_id) DO UPDATE SET
    request_id = EXCLUDED.request_id, text_key = EXCLUDED.text_key, chunks = EXCLUDED.chunks,
    embedder = EXCLUDED.embedder, dimensions = EXCLUDED.dimensions, event_id = EXCLUDED.event_id,
    indexed_at = now();

-- name: CountDocumentChunks :one
SELECT count(*) FROM chunk WHERE tenant_id = @tenant_id AND document_id = @document_id;
