// Package postgres records processed documents in the worker's schema.
// Every call runs inside the caller's transaction, whose app.tenant_id is
// the envelope's tenant (row-level security); queries filter by tenant too
// because superusers bypass RLS.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/services/document-worker/internal/document"
	"github.com/agora-platform/agora/services/document-worker/internal/postgres/pgdb"
)

// Store writes document rows.
type Store struct{}

// NewStore returns a Store.
func NewStore() *Store { return &Store{} }

// SaveResult upserts the row of r inside tx; eventID is the upload event
// that caused it.
func (s *Store) SaveResult(ctx context.Context, tx pgdb.DBTX, r document.Result, eventID string) error {
	err := pgdb.New(tx).UpsertDocumentText(ctx, pgdb.UpsertDocumentTextParams{
		TenantID: r.TenantID, DocumentID: r.DocumentID, RequestID: r.RequestID, EventID: eventID,
		SourceKey: r.ObjectKey, TextKey: r.TextObjectKey, ContentType: r.ContentType, Method: string(r.Method),
		Pages: int32(r.Pages), Characters: int32(r.Characters), Language: r.Language,
		SourceBytes: r.SourceSize, TextBytes: r.TextSize, DurationMs: r.Duration.Milliseconds(),
		Sha256: r.SHA256, FileName: r.FileName,
	})
	if err != nil {
		return fmt.Errorf("upsert document %s: %w", r.DocumentID, err)
	}
	return nil
}

// Source returns the upload that documentID of tenantID was processed
// from, inside tx: document.ErrUnknownDocument when the worker never
// processed it, document.ErrNotReprocessable when it was processed before
// checksums were kept.
func (s *Store) Source(ctx context.Context, tx pgdb.DBTX, tenantID, documentID string) (document.Uploaded, error) {
	row, err := pgdb.New(tx).GetDocumentText(ctx, pgdb.GetDocumentTextParams{TenantID: tenantID, DocumentID: documentID})
	if errors.Is(err, pgx.ErrNoRows) {
		return document.Uploaded{}, fmt.Errorf("document %s of %s: %w", documentID, tenantID, document.ErrUnknownDocument)
	}
	if err != nil {
		return document.Uploaded{}, fmt.Errorf("document %s: %w", documentID, err)
	}
	if row.Sha256 == "" {
		return document.Uploaded{}, fmt.Errorf("document %s: processed before checksums were kept; replay its upload event: %w",
			documentID, document.ErrNotReprocessable)
	}
	return document.Uploaded{DocumentID: row.DocumentID, RequestID: row.RequestID, ObjectKey: row.SourceKey,
		FileName: row.FileName, ContentType: row.ContentType, Size: row.SourceBytes, SHA256: row.Sha256}, nil
}
