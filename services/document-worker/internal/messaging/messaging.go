// Package messaging is the worker's inbound port: it turns a
// document.uploaded.v1 event or a document.process.v1 command into a
// processed document and has the store record it and enqueue
// document.processed.v1, the verdict document.validated.v1 and the command
// ai.knowledge.index.v1 in the inbox transaction, and classifies failures
// for the fabric.
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
	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

// The worker's queues (pkg/fabric/catalog/catalog.yaml, services:): the
// uploads, and operators' document.process.v1 commands.
const (
	processingQueue = "document.processing"
	reprocessQueue  = "document.process-commands"
)

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	ConsumeTx(queue string, h fabric.TxHandler, o fabric.ConsumerOptions) error
}

// Processor extracts and stores a document's text.
type Processor interface {
	Process(ctx context.Context, tenantID string, u document.Uploaded) (document.Result, error)
}

// Recorder records a processed document and enqueues its events inside
// tx, and reads back the upload a processed document came from;
// *postgres.Store is one.
type Recorder interface {
	Record(ctx context.Context, tx pgx.Tx, r document.Result, cause envelope.Envelope) error
	Source(ctx context.Context, tx pgx.Tx, tenantID, documentID string) (document.Uploaded, error)
}

// Deps are the handlers' dependencies.
type Deps struct {
	Processor Processor
	Store     Recorder
	// Concurrency is how many uploads are processed at once.
	Concurrency int
	Log         *slog.Logger
}

// Attach registers the worker's consumers on h.
func Attach(h Host, d Deps) error {
	hd := &handler{proc: d.Processor, rec: d.Store, log: d.Log}
	// An inbox transaction per message (MaxBatch 1): a failed batch runs
	// its handlers again one by one, and extracting a document (OCR) is
	// too costly to do twice.
	if err := h.ConsumeTx(processingQueue, hd.uploaded, fabric.ConsumerOptions{
		Concurrency: d.Concurrency, Prefetch: d.Concurrency, MaxBatch: 1,
	}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	if err := h.ConsumeTx(reprocessQueue, hd.reprocess, fabric.ConsumerOptions{MaxBatch: 1}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	return nil
}

// handler handles document.uploaded.v1 and document.process.v1.
type handler struct {
	proc Processor
	rec  Recorder
	log  *slog.Logger
}

// uploaded is the inbox effect for one upload event (a fabric.TxHandler).
func (h *handler) uploaded(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, p, err := fabric.Decode[payload.DocumentUploaded](ctx, env)
	if err != nil {
		return err
	}
	res, err := h.proc.Process(ctx, tenantID, document.Uploaded{
		DocumentID: p.DocumentID, RequestID: p.RequestID, Bucket: p.Bucket, ObjectKey: p.ObjectKey,
		FileName: p.FileName, ContentType: p.ContentType, Size: p.Size, SHA256: p.SHA256,
	})
	if err != nil {
		return classify(err)
	}
	return h.record(ctx, tx, env, tenantID, res)
}

// reprocess is the inbox effect of a document.process.v1 command (a
// fabric.TxHandler): the document is read again from where its upload put
// it, checked against the checksum it was announced with, and its text
// stored, announced and indexed again as after the upload.
func (h *handler) reprocess(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, p, err := fabric.Decode[payload.ProcessDocument](ctx, env)
	if err != nil {
		return err
	}
	u, err := h.rec.Source(ctx, tx, tenantID, p.DocumentID)
	if err != nil {
		return classify(err)
	}
	res, err := h.proc.Process(ctx, tenantID, u)
	if err != nil {
		return classify(err)
	}
	return h.record(ctx, tx, env, tenantID, res)
}

// record has the store save res and enqueue its events, all caused by
// env, inside tx.
func (h *handler) record(ctx context.Context, tx pgx.Tx, env envelope.Envelope, tenantID string, res document.Result) error {
	if err := h.rec.Record(ctx, tx, res, env); err != nil {
		return fabric.Transient(err)
	}
	h.log.InfoContext(ctx, "document processed", "document", res.DocumentID, "tenant", tenantID,
		"method", res.Method, "pages", res.Pages, "characters", res.Characters, "language", res.Language,
		"ms", res.Duration.Milliseconds(), "valid", res.Verdict.Valid, "kind", res.Verdict.Kind)
	return nil
}

// classify maps the domain's failure kinds to the fabric's classes:
// unavailable dependencies are retried, bad input is dead-lettered at once.
func classify(err error) error {
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
