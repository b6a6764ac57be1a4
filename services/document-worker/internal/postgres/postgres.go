// Package postgres records processed documents in the worker's schema and
// enqueues their events in the same transaction. Every call runs inside
// the caller's transaction, whose app.tenant_id is the envelope's tenant
// (row-level security); queries filter by tenant too because superusers
// bypass RLS.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
	"github.com/agora-platform/agora/services/document-worker/internal/postgres/pgdb"
)

// Enqueuer stores envelopes in the caller's transaction (outbox.Outbox).
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Store writes document rows and their events.
type Store struct {
	outbox Enqueuer
}

// New returns a Store enqueuing its events in ob.
func New(ob Enqueuer) *Store { return &Store{outbox: ob} }

// Record upserts the row of r and enqueues document.processed.v1,
// document.validated.v1 and ai.knowledge.index.v1, all inside tx; cause is
// the message that had the document processed.
func (s *Store) Record(ctx context.Context, tx pgx.Tx, r document.Result, cause envelope.Envelope) error {
	err := pgdb.New(tx).UpsertDocumentText(ctx, pgdb.UpsertDocumentTextParams{
		TenantID: r.TenantID, DocumentID: r.DocumentID, RequestID: r.RequestID, EventID: cause.ID,
		SourceKey: r.ObjectKey, TextKey: r.TextObjectKey, ContentType: r.ContentType, Method: string(r.Method),
		Pages: int32(r.Pages), Characters: int32(r.Characters), Language: r.Language,
		SourceBytes: r.SourceSize, TextBytes: r.TextSize, DurationMs: r.Duration.Milliseconds(),
		Sha256: r.SHA256, FileName: r.FileName,
	})
	if err != nil {
		return fmt.Errorf("upsert document %s: %w", r.DocumentID, err)
	}
	processed, err := document.ProcessedEvent(cause, r)
	if err != nil {
		return fmt.Errorf("derive processed event of %s: %w", r.DocumentID, err)
	}
	validated, err := document.ValidatedEvent(cause, r)
	if err != nil {
		return fmt.Errorf("derive validated event of %s: %w", r.DocumentID, err)
	}
	index, err := document.IndexCommand(cause, r)
	if err != nil {
		return fmt.Errorf("derive index command of %s: %w", r.DocumentID, err)
	}
	// Two aggregates: the relay holds back later rows of an aggregate while
	// an earlier one fails, and an event may be unroutable where no consumer
	// binds it, which must never hold back the indexing command. The two
	// events share the document's aggregate, so the relay publishes them in
	// order: processed, then validated.
	doc := outbox.Aggregate{Type: "document", ID: r.DocumentID}
	if err := s.outbox.Enqueue(ctx, tx,
		outbox.Item{Aggregate: doc, Envelope: processed},
		outbox.Item{Aggregate: doc, Envelope: validated},
		outbox.Item{Aggregate: outbox.Aggregate{Type: "document-index", ID: r.DocumentID}, Envelope: index}); err != nil {
		return fmt.Errorf("enqueue events of document %s: %w", r.DocumentID, err)
	}
	return nil
}

// Source returns the upload that documentID of tenantID was processed
// from, inside tx: document.ErrUnknownDocument when the worker never
// processed it, document.ErrNotReprocessable when it was processed before
// checksums were kept.
func (s *Store) Source(ctx context.Context, tx pgx.Tx, tenantID, documentID string) (document.Uploaded, error) {
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
