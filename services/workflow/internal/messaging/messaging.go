// Package messaging holds the workflow service's message handlers.
package messaging

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// Starter starts a process inside the inbox transaction.
type Starter interface {
	StartProcess(ctx context.Context, tx pgx.Tx, tenantID string, sub process.Submitted, cause envelope.Envelope) error
}

// RequestSubmitted handles queue workflow.request-submitted: each
// request.submitted.v1 starts one process instance.
func RequestSubmitted(s Starter) inbox.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
		if env.Type != process.TypeRequestSubmitted {
			return fabric.Invalid(fmt.Errorf("unexpected %s %s on workflow.request-submitted", env.Type, env.ID))
		}
		tenantID, p, err := fabric.Decode[payload.RequestSubmitted](ctx, env)
		if err != nil {
			return err
		}
		if _, err := uuid.Parse(p.RequestID); err != nil {
			return fabric.Invalid(fmt.Errorf("%s %s: requestId %q: %w", env.Type, env.ID, p.RequestID, err))
		}
		return s.StartProcess(ctx, tx, tenantID, process.Submitted{RequestID: p.RequestID, ServiceID: p.ServiceID, CitizenID: p.CitizenID}, env)
	}
}

// Canceller stops a cancelled request's process inside the inbox transaction.
type Canceller interface {
	CancelProcess(ctx context.Context, tx pgx.Tx, tenantID string, c process.Cancelled, cause envelope.Envelope) error
}

// RequestCancelled handles queue workflow.request-cancelled: each
// request.cancelled.v1 stops its request's process (or, arriving first,
// keeps one from starting).
func RequestCancelled(s Canceller) inbox.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
		if env.Type != process.TypeRequestCancelled {
			return fabric.Invalid(fmt.Errorf("unexpected %s %s on workflow.request-cancelled", env.Type, env.ID))
		}
		tenantID, p, err := fabric.Decode[payload.RequestCancelled](ctx, env)
		if err != nil {
			return err
		}
		if _, err := uuid.Parse(p.RequestID); err != nil {
			return fabric.Invalid(fmt.Errorf("%s %s: requestId %q: %w", env.Type, env.ID, p.RequestID, err))
		}
		return s.CancelProcess(ctx, tx, tenantID, process.Cancelled{RequestID: p.RequestID, CitizenID: p.CancelledBy}, env)
	}
}
