// Package messaging projects request events into the analytics counts,
// inside the inbox transaction the fabric hands it.
package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/analytics/internal/postgres"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// Store persists the projection inside the caller's transaction.
type Store interface {
	InsertState(ctx context.Context, tx pgx.Tx, tenantID string, s projection.State) (bool, error)
	LockState(ctx context.Context, tx pgx.Tx, tenantID, requestID string) (projection.State, error)
	UpdateState(ctx context.Context, tx pgx.Tx, tenantID string, s projection.State) error
	Apply(ctx context.Context, tx pgx.Tx, tenantID string, deltas []projection.Delta) error
}

// Projector handles request.# events.
type Projector struct {
	store Store
}

// New returns a Projector writing to store.
func New(store Store) *Projector { return &Projector{store: store} }

// Handle is an fabric.TxHandler. Unknown request event types are acked
// without effect: the queue takes request.#, and new types must not jam it.
func (p *Projector) Handle(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
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
		if errors.Is(err, postgres.ErrNoState) {
			// Its submission is still in flight (concurrent handlers, or
			// a retry tier): try again later rather than lose the change.
			return fabric.Transient(err)
		}
		if err != nil {
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
