// Package messaging holds the analytics service's message handlers: the
// projection of request events into the counts, inside the inbox
// transaction the fabric hands it, and the report export jobs.
package messaging

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/sweep"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/analytics/internal/export"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// The analytics service's queues (pkg/fabric/catalog/catalog.yaml,
// services:): request events for the projection, and the export jobs,
// which every instance takes its share of.
const (
	requestEventsQueue = "analytics.request-events"
	exportQueue        = "analytics.report-export"
)

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	ConsumeTx(queue string, h fabric.TxHandler, o fabric.ConsumerOptions) error
	Consume(queue string, h fabric.Handler, o fabric.ConsumerOptions) error
	Attempts(queue string) (int, error)
	Go(name string, run func(ctx context.Context) error)
}

// Store is what the handlers need of the store (*postgres.Store): the
// projection, its fold, and the exports.
type Store interface {
	Projection
	// Fold moves up to limit appended counter deltas into the counters and
	// returns how many it moved (a sweep.Func).
	Fold(ctx context.Context, limit int) (int, error)
	export.Store
}

// Deps are the handlers' dependencies.
type Deps struct {
	Store   Store
	Objects export.Objects // where export files go
	Bucket  string         // in this bucket
	// FoldInterval is how often counter deltas are folded.
	FoldInterval time.Duration
	// ExportPageRows is how many rows an export reads at a time (its
	// progress is recorded after each page); ExportWorkers how many
	// exports one instance runs at once.
	ExportPageRows, ExportWorkers int
	Log                           *slog.Logger
}

// Attach registers the analytics service's consumers on h, and the fold
// of what the projection appends.
func Attach(h Host, d Deps) error {
	// Handlers append counter deltas (no row another message writes), so
	// messages are taken in batches like every other consumer's; one
	// writer per tenant folds the deltas into the counters.
	if err := h.ConsumeTx(requestEventsQueue, (&projector{store: d.Store}).handle, fabric.ConsumerOptions{Simulatable: true}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	// The fold runs every FoldInterval while it finds deltas; while it finds
	// none its wait stretches up to ten intervals (10 s by default), since
	// a round costs a transaction per tenant: after a quiet spell the first
	// deltas are folded at most that late.
	h.Go("fold", func(ctx context.Context) error {
		sweep.RunIdle(ctx, d.FoldInterval, 10*d.FoldInterval, nil, 5000, d.Store.Fold, func(err error) { d.Log.Error("counter fold failed", "err", err) }, nil)
		return nil
	})
	// A job that keeps failing is delivered once plus once per retry tier:
	// the last attempt marks the export failed.
	attempts, err := h.Attempts(exportQueue)
	if err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	runner := export.NewRunner(d.Store, d.Objects, d.Bucket, d.ExportPageRows, attempts, d.Log)
	if err := h.Consume(exportQueue, exportJobs(runner),
		fabric.ConsumerOptions{Prefetch: d.ExportWorkers, Concurrency: d.ExportWorkers}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	return nil
}

// Projection persists the projection inside the caller's transaction.
type Projection interface {
	InsertState(ctx context.Context, tx pgx.Tx, tenantID string, s projection.State) (bool, error)
	LockState(ctx context.Context, tx pgx.Tx, tenantID, requestID string) (projection.State, error)
	UpdateState(ctx context.Context, tx pgx.Tx, tenantID string, s projection.State) error
	Apply(ctx context.Context, tx pgx.Tx, tenantID string, deltas []projection.Delta) error
}

// projector handles request.# events.
type projector struct {
	store Projection
}

// handle is a fabric.TxHandler. Unknown request event types are acked
// without effect: the queue takes request.#, and new types must not jam it.
func (p *projector) handle(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
	tenantID, err := tenant.From(ctx)
	if err != nil {
		return fabric.Invalid(fmt.Errorf("event %s: %w", env.ID, err))
	}
	switch env.Type {
	case "request.submitted.v1":
		var e payload.RequestSubmitted
		if err := json.Unmarshal(env.Payload, &e); err != nil {
			return fabric.Invalid(fmt.Errorf("decode %s: %w", env.ID, err))
		}
		channel, known := e.Channel.Value()
		if !known {
			// A channel added after this build. The counts are keyed by
			// channel name, not by a fixed list, so it is counted under
			// its own name: a new intake channel shows up in the report
			// the day it opens instead of vanishing into "other".
			channel = payload.Channel(e.Channel.Raw())
		}
		st, deltas := projection.Submitted(e.RequestID, e.ServiceID, string(channel), e.SubmittedAt)
		first, err := p.store.InsertState(ctx, tx, tenantID, st)
		if err != nil {
			return fabric.Transient(err)
		}
		if !first {
			return nil // the same request submitted twice under another event id
		}
		if err := p.store.Apply(ctx, tx, tenantID, deltas); err != nil {
			return fabric.Transient(err)
		}
		return nil
	case "request.status-changed.v1":
		var e payload.RequestStatusChanged
		if err := json.Unmarshal(env.Payload, &e); err != nil {
			return fabric.Invalid(fmt.Errorf("decode %s: %w", env.ID, err))
		}
		st, err := p.store.LockState(ctx, tx, tenantID, e.RequestID)
		if err != nil {
			// Not projected yet (postgres.ErrNoState): its submission is
			// still in flight (concurrent handlers, or a retry tier), so
			// try again later rather than lose the change. Any other
			// error is the database's, retried too.
			return fabric.Transient(err)
		}
		next, deltas, ok := projection.Change(st, e.Status, e.ChangedAt)
		if !ok {
			return nil
		}
		if err := p.store.UpdateState(ctx, tx, tenantID, next); err != nil {
			return fabric.Transient(err)
		}
		if err := p.store.Apply(ctx, tx, tenantID, deltas); err != nil {
			return fabric.Transient(err)
		}
		return nil
	}
	return nil
}
