// Package ingest moves validated events into the data lake: batches of
// events become one Parquet file per (tenant, domain, type, date), and a
// message is acked only after its file is written and its lineage
// committed.
package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

// ParquetContentType is the media type of lake files.
const ParquetContentType = "application/vnd.apache.parquet"

// Objects is where lake files go.
type Objects interface {
	Bucket() string
	Put(ctx context.Context, key string, data []byte, contentType string) error
	Remove(ctx context.Context, key string) error
}

// Lineage records and answers where events landed.
type Lineage interface {
	Ingested(ctx context.Context, tenantID, eventID string) (bool, error)
	Record(ctx context.Context, batchID, bucket string, rows []postgres.Lineage) (int64, error)
}

// Adder hands an envelope to the batcher and waits for its batch.
type Adder interface {
	Add(ctx context.Context, key string, env envelope.Envelope) error
}

// Writer writes batches.
type Writer struct {
	objects Objects
	lineage Lineage
	log     *slog.Logger
}

// NewWriter returns a Writer.
func NewWriter(objects Objects, lineage Lineage, log *slog.Logger) *Writer {
	return &Writer{objects: objects, lineage: lineage, log: log}
}

// Flush writes envs as one batch: a Parquet object per partition, then the
// lineage of every event in one transaction. On any failure it removes the
// objects it wrote (best effort) and returns the error, so every message of
// the batch is retried and no lineage points at a missing file.
func (w *Writer) Flush(ctx context.Context, envs []envelope.Envelope) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	batchID := id.String()
	rows := make([]lake.Row, len(envs))
	for i, e := range envs {
		rows[i] = lake.RowOf(e)
	}
	var written []string
	var lineage []postgres.Lineage
	undo := func() {
		for _, k := range written {
			if err := w.objects.Remove(context.WithoutCancel(ctx), k); err != nil {
				w.log.Warn("could not remove the file of a failed batch; its rows have no lineage", "key", k, "err", err)
			}
		}
	}
	for _, g := range lake.GroupRows(rows) {
		data, err := lake.Encode(g.Rows)
		if err != nil {
			undo()
			return err
		}
		key := g.Partition.ObjectKey(batchID)
		if err := w.objects.Put(ctx, key, data, ParquetContentType); err != nil {
			undo()
			return err
		}
		written = append(written, key)
		for off, r := range g.Rows {
			lineage = append(lineage, postgres.Lineage{EventID: r.EventID, TenantID: r.TenantID, EventType: r.Type,
				ObjectKey: key, RowOffset: off, Producer: r.Producer, CorrelationID: r.CorrelationID, OccurredAt: r.OccurredAt})
		}
	}
	n, err := w.lineage.Record(ctx, batchID, w.objects.Bucket(), lineage)
	if err != nil {
		undo()
		return err
	}
	w.log.Info("batch ingested", "batch", batchID, "events", len(envs), "files", len(written), "newLineage", n)
	return nil
}

// Handler returns the consumer handler: a duplicate (lineage exists) is
// acked at once; anything else waits for its batch. Failures are transient:
// the message goes to a retry tier and nothing is lost while S3 or the
// database is down.
func Handler(lineage Lineage, batcher Adder) fabric.Handler {
	return func(ctx context.Context, env envelope.Envelope) error {
		done, err := lineage.Ingested(ctx, env.TenantID, env.ID)
		if err != nil {
			return fabric.Transient(fmt.Errorf("check lineage of %s: %w", env.ID, err))
		}
		if done {
			return nil
		}
		start := time.Now()
		if err := batcher.Add(ctx, env.ID, env); err != nil {
			return fabric.Transient(fmt.Errorf("ingest %s (waited %s): %w", env.ID, time.Since(start).Round(time.Millisecond), err))
		}
		return nil
	}
}
