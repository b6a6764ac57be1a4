// Package postgres records processed documents in the worker's schema.
// Every call runs inside the caller's transaction, whose app.tenant_id is
// the envelope's tenant (row-level security); queries filter by tenant too
// because superusers bypass RLS.
package postgres

import (
	"context"
	"fmt"

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
	})
	if err != nil {
		return fmt.Errorf("upsert document %s: %w", r.DocumentID, err)
	}
	return nil
}
