// Package messaging is the worker's inbound port: it turns a
// document.uploaded.v1 event or a document.process.v1 command into a
// processed document, records it and enqueues document.processed.v1, the
// verdict document.validated.v1 and the command ai.knowledge.index.v1 in
// the inbox transaction, and classifies failures for the fabric.
package messaging

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
	"github.com/agora-platform/agora/services/document-worker/internal/postgres/pgdb"
)

// Producer names this service in the envelopes it emits.
const Producer = "document-worker"

// Processor extracts and stores a document's text.
type Processor interface {
	Process(ctx context.Context, tenantID string, u document.Uploaded) (document.Result, error)
}

// Recorder writes the processed-document row inside tx, and reads back the
// upload a processed document came from.
type Recorder interface {
	SaveResult(ctx context.Context, tx pgdb.DBTX, r document.Result, eventID string) error
	Source(ctx context.Context, tx pgdb.DBTX, tenantID, documentID string) (document.Uploaded, error)
}

// Enqueuer stores outgoing envelopes in tx.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Handler handles document.uploaded.v1 and document.process.v1.
type Handler struct {
	proc Processor
	rec  Recorder
	out  Enqueuer
	log  *slog.Logger
}

// NewHandler returns the upload handler.
func NewHandler(proc Processor, rec Recorder, out Enqueuer, log *slog.Logger) *Handler {
	return &Handler{proc: proc, rec: rec, out: out, log: log}
}

// Uploaded is the inbox effect for one upload event (an fabric.TxHandler).
func (h *Handler) Uploaded(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, p, err := fabric.Decode[payload.DocumentUploaded](ctx, env)
	if err != nil {
		return err
	}
	res, err := h.proc.Process(ctx, tenantID, document.Uploaded{
		DocumentID: p.DocumentID, RequestID: p.RequestID, Bucket: p.Bucket, ObjectKey: p.ObjectKey,
		FileName: p.FileName, ContentType: p.ContentType, Size: p.Size, SHA256: p.SHA256,
	})
	if err != nil {
		return Classify(err)
	}
	return h.record(ctx, tx, env, tenantID, res)
}

// Reprocess is the inbox effect of a document.process.v1 command (an
// fabric.TxHandler): the document is read again from where its upload put
// it, checked against the checksum it was announced with, and its text
// stored, announced and indexed again as after the upload.
func (h *Handler) Reprocess(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, p, err := fabric.Decode[payload.ProcessDocument](ctx, env)
	if err != nil {
		return err
	}
	u, err := h.rec.Source(ctx, tx, tenantID, p.DocumentID)
	if err != nil {
		return Classify(err)
	}
	res, err := h.proc.Process(ctx, tenantID, u)
	if err != nil {
		return Classify(err)
	}
	return h.record(ctx, tx, env, tenantID, res)
}

// record saves res and enqueues document.processed.v1,
// document.validated.v1 and ai.knowledge.index.v1, all caused by env,
// inside tx.
func (h *Handler) record(ctx context.Context, tx pgx.Tx, env envelope.Envelope, tenantID string, res document.Result) error {
	if err := h.rec.SaveResult(ctx, tx, res, env.ID); err != nil {
		return fabric.Transient(err)
	}
	pp := payload.DocumentProcessed{
		DocumentID: res.DocumentID, RequestID: res.RequestID, TextObjectKey: res.TextObjectKey,
		Pages: res.Pages, Characters: res.Characters, Language: res.Language,
		Method: enum.Of(payload.ExtractionMethod(res.Method)), DurationMs: res.Duration.Milliseconds(),
	}
	processed, err := envelope.Derive(env, pp.MessageType(), Producer, pp)
	if err != nil {
		return fmt.Errorf("derive processed event of %s: %w", res.DocumentID, err)
	}
	vp := validatedPayload(res)
	validated, err := envelope.Derive(env, vp.MessageType(), Producer, vp)
	if err != nil {
		return fmt.Errorf("derive validated event of %s: %w", res.DocumentID, err)
	}
	ip := payload.KnowledgeIndex{
		DocumentID: res.DocumentID, RequestID: res.RequestID, TextObjectKey: res.TextObjectKey, Language: res.Language,
	}
	index, err := envelope.Derive(env, ip.MessageType(), Producer, ip)
	if err != nil {
		return fmt.Errorf("derive index command of %s: %w", res.DocumentID, err)
	}
	// Two aggregates: the relay holds back later rows of an aggregate while
	// an earlier one fails, and an event may be unroutable where no consumer
	// binds it, which must never hold back the indexing command. The two
	// events share the document's aggregate, so the relay publishes them in
	// order: processed, then validated.
	doc := outbox.Aggregate{Type: "document", ID: res.DocumentID}
	if err := h.out.Enqueue(ctx, tx,
		outbox.Item{Aggregate: doc, Envelope: processed},
		outbox.Item{Aggregate: doc, Envelope: validated},
		outbox.Item{Aggregate: outbox.Aggregate{Type: "document-index", ID: res.DocumentID}, Envelope: index}); err != nil {
		return fmt.Errorf("enqueue events of document %s: %w", res.DocumentID, err)
	}
	h.log.InfoContext(ctx, "document processed", "document", res.DocumentID, "tenant", tenantID,
		"method", res.Method, "pages", res.Pages, "characters", res.Characters, "language", res.Language,
		"ms", res.Duration.Milliseconds(), "valid", res.Verdict.Valid, "kind", res.Verdict.Kind)
	return nil
}

// validatedPayload is the document.validated.v1 payload of res's verdict.
func validatedPayload(res document.Result) payload.DocumentValidated {
	v := res.Verdict
	checks := make([]payload.DocumentCheck, 0, len(v.Checks))
	for _, c := range v.Checks {
		checks = append(checks, payload.DocumentCheck{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
	}
	return payload.DocumentValidated{
		DocumentID: res.DocumentID, RequestID: res.RequestID, Valid: v.Valid,
		Kind: enum.Of(payload.DocumentKind(cmp.Or(v.Kind, document.DocUnknown))), Checks: checks, Reason: v.Reason,
	}
}

// Classify maps the domain's failure kinds to the fabric's classes:
// unavailable dependencies are retried, bad input is dead-lettered at once.
func Classify(err error) error {
	switch {
	case errors.Is(err, document.ErrUnavailable):
		return fabric.Transient(err)
	case errors.Is(err, document.ErrForeignObject),
		errors.Is(err, document.ErrChecksum),
		errors.Is(err, document.ErrUnsupported),
		errors.Is(err, document.ErrCorrupt),
		errors.Is(err, document.ErrUnknownDocument),
		errors.Is(err, document.ErrNotReprocessable):
		return fabric.Permanent(err)
	}
	return err
}
