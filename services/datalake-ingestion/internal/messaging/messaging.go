// Package messaging moves validated events into the data lake: batches of
// events become one Parquet file per (tenant, domain, type, date), and a
// message is acked only after its file is written and its lineage
// committed.
package messaging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/batch"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

// The data lake's queues (pkg/fabric/catalog/catalog.yaml, services:):
// request events (docs/architecture.md) and every other tenant domain's
// events.
const (
	requestEventsQueue  = "datalake.request-events"
	platformEventsQueue = "datalake.platform-events"
)

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	Consume(queue string, h fabric.Handler, o fabric.ConsumerOptions) error
	Go(name string, run func(ctx context.Context) error)
}

// Lake is the object store the lake's files are written to and swept
// from; objstore.New's store is one.
type Lake interface {
	Objects
	Listing
}

// Store records and looks up the lineage of the lake's files;
// *postgres.Store is one.
type Store interface {
	Lineage
	Known
}

// Deps are the handlers' dependencies.
type Deps struct {
	Lake   Lake
	Bucket string // the lake's bucket
	Store  Store
	// A batch is flushed once BatchSize events wait or the oldest has
	// waited BatchAge; FlushTimeout bounds each flush.
	BatchSize              int
	BatchAge, FlushTimeout time.Duration
	// Files no committed lineage points at are removed once older than
	// OrphanGrace, looked for every OrphanSweep.
	OrphanGrace, OrphanSweep time.Duration
	// Restrictions seals or leaves out the restricted fields of an event
	// before it is batched, as the catalog says.
	Restrictions *lake.Restrictions
	Meter        metric.Meter // nil: no metric
	Log          *slog.Logger
}

// Attach registers the data lake's consumers on h, with the batcher their
// handlers wait on and the sweep of orphaned files.
func Attach(h Host, d Deps) error {
	sw, err := newSweeper(d.Lake, d.Bucket, d.Store, d.OrphanGrace, d.Meter, d.Log)
	if err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	h.Go("orphan-sweep", func(ctx context.Context) error { return sw.Run(ctx, d.OrphanSweep) })
	// The batcher stops with the consumers; a handler still finishing a
	// delivery after that has its event written alone (batch.Batcher.Add),
	// so no message fails because the service is stopping.
	batcher := batch.New(d.BatchSize, d.BatchAge, d.FlushTimeout, NewWriter(d.Lake, d.Bucket, d.Store, d.Restrictions, d.Log).Flush)
	h.Go("batcher", func(ctx context.Context) error {
		batcher.Run(ctx)
		return nil
	})
	// Every message of a batch is an unacked delivery whose handler waits:
	// prefetch and concurrency must hold a whole batch.
	opts := fabric.ConsumerOptions{Prefetch: d.BatchSize, Concurrency: d.BatchSize}
	for _, q := range []string{requestEventsQueue, platformEventsQueue} {
		if err := h.Consume(q, handler(batcher, d.Restrictions), opts); err != nil {
			return fmt.Errorf("messaging: %w", err)
		}
	}
	return nil
}

// ParquetContentType is the media type of lake files.
const ParquetContentType = "application/vnd.apache.parquet"

// Objects is where lake files go.
type Objects interface {
	Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) error
	Remove(ctx context.Context, bucket, key string) error
}

// Lineage records where events landed (postgres.Store.Ingest).
type Lineage interface {
	Ingest(ctx context.Context, batchID, bucket string, rows []postgres.Lineage, write func(fresh map[string]bool) ([]postgres.Lineage, error)) (int, error)
}

// Adder hands an envelope to the batcher and waits for its batch.
type Adder interface {
	Add(ctx context.Context, key string, env envelope.Envelope) error
}

// Writer writes batches.
type Writer struct {
	objects  Objects
	bucket   string
	lineage  Lineage
	restrict *lake.Restrictions
	log      *slog.Logger
}

// NewWriter returns a Writer of events whose restricted fields restrict
// has already protected (the handler's work).
func NewWriter(objects Objects, bucket string, lineage Lineage, restrict *lake.Restrictions, log *slog.Logger) *Writer {
	return &Writer{objects: objects, bucket: bucket, lineage: lineage, restrict: restrict, log: log}
}

// Flush writes envs as one batch, exactly once per event: the events are
// claimed in the lineage table first, then the ones this batch holds
// (not already in the lake, not held by another batch still in flight)
// are written as a Parquet object per partition, then their lineage is
// committed. On any failure it removes the objects it wrote (best effort)
// and returns the error, so every message of the batch is retried and no
// lineage points at a missing file. Events already in the lake are acked
// as done.
func (w *Writer) Flush(ctx context.Context, envs []envelope.Envelope) error {
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	batchID := id.String()
	rows := make([]lake.Row, len(envs))
	claims := make([]postgres.Lineage, len(envs))
	for i, e := range envs {
		rows[i] = w.restrict.Row(e)
		claims[i] = postgres.Lineage{EventID: e.ID, TenantID: e.TenantID, EventType: e.Type,
			Producer: e.Producer, CorrelationID: e.CorrelationID, OccurredAt: e.OccurredAt}
	}
	var written []string
	undo := func() {
		for _, k := range written {
			if err := w.objects.Remove(context.WithoutCancel(ctx), w.bucket, k); err != nil {
				w.log.Warn("could not remove the file of a failed batch; its rows have no lineage", "key", k, "err", err)
			}
		}
	}
	n, err := w.lineage.Ingest(ctx, batchID, w.bucket, claims, func(fresh map[string]bool) ([]postgres.Lineage, error) {
		var keep []lake.Row
		for _, r := range rows {
			if fresh[r.EventID] {
				keep = append(keep, r)
				delete(fresh, r.EventID) // an event twice in one batch is written once
			}
		}
		var placed []postgres.Lineage
		for _, g := range lake.GroupRows(keep) {
			data, err := lake.Encode(g.Rows)
			if err != nil {
				return nil, err
			}
			key := g.Partition.ObjectKey(batchID)
			if err := w.objects.Put(ctx, w.bucket, key, bytes.NewReader(data), int64(len(data)), ParquetContentType); err != nil {
				return nil, err
			}
			written = append(written, key)
			for off, r := range g.Rows {
				placed = append(placed, postgres.Lineage{EventID: r.EventID, TenantID: r.TenantID, ObjectKey: key, RowOffset: off})
			}
		}
		return placed, nil
	})
	if err != nil {
		undo()
		return err
	}
	w.log.Info("batch ingested", "batch", batchID, "events", len(envs), "files", len(written), "new", n)
	return nil
}

// handler returns the consumer handler: the event's restricted fields are
// sealed or left out first, so no batch, file or log of the lake ever holds
// them in clear; then every message waits for its batch, whose flush
// leaves out events already in the lake (their messages are acked as
// done). A failed flush is an outage of S3 or the database
// (fabric.ErrUnavailable): the consumer keeps the message and its place in
// the queue until they are back, however long that takes, instead of
// spending retry tiers and reaching the DLQ out of order.
func handler(batcher Adder, restrict *lake.Restrictions) fabric.Handler {
	return func(ctx context.Context, env envelope.Envelope) error {
		env, err := restrict.Protect(env)
		if err != nil { // the fabric checked the payload is an object: this one cannot be stored safely, ever
			return fabric.Permanent(err)
		}
		start := time.Now()
		if err := batcher.Add(ctx, env.ID, env); err != nil {
			return fmt.Errorf("%w: ingest %s (waited %s): %w", fabric.ErrUnavailable, env.ID, time.Since(start).Round(time.Millisecond), err)
		}
		return nil
	}
}
