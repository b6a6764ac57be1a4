package messaging

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
)

// Listing walks the lake's files and removes one.
type Listing interface {
	Walk(ctx context.Context, bucket string, before time.Time, fn func(key string) error) error
	Remove(ctx context.Context, bucket, key string) error
}

// Known tells whether committed lineage points at a file.
type Known interface {
	ObjectHasLineage(ctx context.Context, tenantID, batchID, key string) (bool, error)
}

// sweeper removes lake files that no committed lineage points at. Flush
// writes a batch's files before it commits their lineage; a process killed
// in between leaves files whose events are redelivered and written again,
// so a reader of the partition would count them twice. Files younger than
// the grace period are left alone: their flush may still be committing.
type sweeper struct {
	objects Listing
	bucket  string
	lineage Known
	grace   time.Duration
	log     *slog.Logger
	removed metric.Int64Counter
}

// newSweeper returns a sweeper; meter may be nil (no metric).
func newSweeper(objects Listing, bucket string, lineage Known, grace time.Duration, meter metric.Meter, log *slog.Logger) (*sweeper, error) {
	if meter == nil {
		meter = noop.NewMeterProvider().Meter("")
	}
	removed, err := meter.Int64Counter("datalake.orphans_removed",
		metric.WithDescription("lake files removed because no committed lineage points at them"))
	if err != nil {
		return nil, fmt.Errorf("orphan sweep metric: %w", err)
	}
	return &sweeper{objects: objects, bucket: bucket, lineage: lineage, grace: grace, log: log, removed: removed}, nil
}

// Sweep makes one pass over the files older than the grace period and
// returns how many it removed. Keys the lake does not write are left
// alone: the bucket may hold other things.
func (s *sweeper) Sweep(ctx context.Context) (int, error) {
	removed := 0
	err := s.objects.Walk(ctx, s.bucket, time.Now().Add(-s.grace), func(key string) error {
		tenantID, batchID, ok := lake.ParseObjectKey(key)
		if !ok {
			return nil
		}
		known, err := s.lineage.ObjectHasLineage(ctx, tenantID, batchID, key)
		if err != nil || known {
			return err
		}
		if err := s.objects.Remove(ctx, s.bucket, key); err != nil {
			return err
		}
		removed++
		s.removed.Add(ctx, 1)
		s.log.Warn("removed a lake file no lineage points at (its flush never committed; its events were written again)", "key", key)
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("orphan sweep: %w", err)
	}
	return removed, nil
}

// Run sweeps every interval until ctx ends. A failed pass is logged and
// tried again at the next tick: S3 or the database may be down for a while.
func (s *sweeper) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := s.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("orphan sweep failed", "removed", n, "err", err)
		case err == nil:
			s.log.Debug("orphan sweep done", "removed", n)
		}
	}
}
