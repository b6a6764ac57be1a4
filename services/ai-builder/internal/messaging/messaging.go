// Package messaging is the ai-builder's inbound port for the command
// ai.knowledge.index.v1: it prepares the document's chunks, replaces them
// in the tenant's partition and enqueues ai.knowledge-indexed.v1, all in
// the inbox transaction, and classifies failures for the fabric.
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
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
)

// Producer names this service in the envelopes it emits.
const Producer = "ai-builder"

// Preparer chunks and embeds a document.
type Preparer interface {
	Prepare(ctx context.Context, tenantID string, r knowledge.IndexRequest) (knowledge.Document, error)
}

// Writer replaces a document's chunks inside tx.
type Writer interface {
	Replace(ctx context.Context, tx pgx.Tx, doc knowledge.Document, eventID string) error
}

// Enqueuer stores outgoing envelopes in tx.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Handler handles ai.knowledge.index.v1.
type Handler struct {
	prep Preparer
	w    Writer
	out  Enqueuer
	log  *slog.Logger
}

// NewHandler returns the index-command handler.
func NewHandler(prep Preparer, w Writer, out Enqueuer, log *slog.Logger) *Handler {
	return &Handler{prep: prep, w: w, out: out, log: log}
}

// Index is the inbox effect for one index command (an fabric.TxHandler).
// The tenant written is always the envelope's (from ctx), never anything
// the payload says.
func (h *Handler) Index(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, p, err := fabric.Decode[payload.KnowledgeIndex](ctx, env)
	if err != nil {
		return err
	}
	doc, err := h.prep.Prepare(ctx, tenantID, knowledge.IndexRequest{DocumentID: p.DocumentID, RequestID: p.RequestID, TextObjectKey: p.TextObjectKey})
	if err != nil {
		return Classify(err)
	}
	if err := h.w.Replace(ctx, tx, doc, env.ID); err != nil {
		return fabric.Transient(err)
	}
	ip := payload.KnowledgeIndexed{
		DocumentID: doc.DocumentID, RequestID: doc.RequestID, Chunks: len(doc.Chunks), Embedder: doc.Embedder, Dimensions: doc.Dimensions,
	}
	indexed, err := envelope.Derive(env, ip.MessageType(), Producer, ip)
	if err != nil {
		return fmt.Errorf("derive indexed event of %s: %w", doc.DocumentID, err)
	}
	if err := h.out.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "knowledge-document", ID: doc.DocumentID}, Envelope: indexed}); err != nil {
		return fmt.Errorf("enqueue indexed event of %s: %w", doc.DocumentID, err)
	}
	h.log.InfoContext(ctx, "document indexed", "document", doc.DocumentID, "tenant", tenantID, "chunks", len(doc.Chunks), "embedder", doc.Embedder)
	return nil
}

// Classify maps the domain's own failure kinds to the fabric's classes;
// ErrNotFound and ErrInvalid are of the fabric's kinds, which carry theirs.
func Classify(err error) error {
	switch {
	case errors.Is(err, knowledge.ErrUnavailable):
		return fabric.Transient(err)
	case errors.Is(err, knowledge.ErrForeignObject):
		return fabric.Permanent(err)
	}
	return err
}
