// Package messaging is the ai-builder's inbound port for the command
// ai.knowledge.index.v1: it prepares the document's chunks and has the
// store replace them in the tenant's partition and enqueue
// ai.knowledge-indexed.v1, all in the inbox transaction, and classifies
// failures for the fabric.
package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
)

// knowledgeBuilderQueue carries the index commands
// (pkg/fabric/catalog/catalog.yaml, services:).
const knowledgeBuilderQueue = "ai.knowledge-builder"

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	ConsumeTx(queue string, h fabric.TxHandler, o fabric.ConsumerOptions) error
}

// Preparer chunks and embeds a document.
type Preparer interface {
	Prepare(ctx context.Context, tenantID string, r knowledge.IndexRequest) (knowledge.Document, error)
}

// Store replaces a document's chunks and enqueues its indexed event
// inside tx; *postgres.Store is one.
type Store interface {
	Index(ctx context.Context, tx pgx.Tx, doc knowledge.Document, cause envelope.Envelope) error
}

// Deps are the handler's dependencies.
type Deps struct {
	Preparer Preparer
	Store    Store
	// Concurrency is how many documents are indexed at once.
	Concurrency int
	Log         *slog.Logger
}

// Attach registers the ai-builder's consumer on h.
func Attach(h Host, d Deps) error {
	ix := indexer{prep: d.Preparer, store: d.Store, log: d.Log}
	// An inbox transaction per message (MaxBatch 1): a failed batch runs
	// its handlers again one by one, and reading and embedding a document
	// is too costly to do twice.
	if err := h.ConsumeTx(knowledgeBuilderQueue, ix.index, fabric.ConsumerOptions{
		Concurrency: d.Concurrency, Prefetch: d.Concurrency * 2, MaxBatch: 1,
	}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	return nil
}

// indexer handles ai.knowledge.index.v1.
type indexer struct {
	prep  Preparer
	store Store
	log   *slog.Logger
}

// index is the inbox effect for one index command (a fabric.TxHandler).
// The tenant written is always the envelope's (from ctx), never anything
// the payload says.
func (ix indexer) index(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, p, err := fabric.Decode[payload.KnowledgeIndex](ctx, env)
	if err != nil {
		return err
	}
	doc, err := ix.prep.Prepare(ctx, tenantID, knowledge.IndexRequest{DocumentID: p.DocumentID, RequestID: p.RequestID, TextObjectKey: p.TextObjectKey})
	if err != nil {
		return classify(err)
	}
	if err := ix.store.Index(ctx, tx, doc, env); err != nil {
		return fabric.Transient(err)
	}
	ix.log.InfoContext(ctx, "document indexed", "document", doc.DocumentID, "tenant", tenantID, "chunks", len(doc.Chunks), "embedder", doc.Embedder)
	return nil
}

// classify maps the domain's own failure kinds to the fabric's classes;
// ErrNotFound and ErrInvalid are of the fabric's kinds, which carry theirs.
func classify(err error) error {
	switch {
	case errors.Is(err, knowledge.ErrUnavailable):
		return fabric.Transient(err)
	case errors.Is(err, knowledge.ErrForeignObject):
		return fabric.Permanent(err)
	}
	return err
}
