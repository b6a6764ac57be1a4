// Package messaging holds the request service's message handlers.
package messaging

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/request/internal/request"
)

// The request service's queues (pkg/fabric/catalog/catalog.yaml,
// services:): workflow events, and their priority lane, where SLA breaches
// and stuck processes go ahead of any backlog of ordinary progress.
const (
	workflowEventsQueue = "request.workflow-events"
	workflowAlertsQueue = workflowEventsQueue + ".priority"
)

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	ConsumeTx(queue string, h fabric.TxHandler, o fabric.ConsumerOptions) error
}

// Deps are the handlers' dependencies.
type Deps struct {
	Store Applier
}

// Attach registers the request service's consumers on h.
func Attach(h Host, d Deps) error {
	// Rows and outbox events only: a replay from history may simulate it.
	if err := h.ConsumeTx(workflowEventsQueue, WorkflowEvents(d.Store),
		fabric.ConsumerOptions{Simulatable: true}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	// The lane's own handlers (its weight): an alert never waits for
	// handlers busy with the backlog.
	if err := h.ConsumeTx(workflowAlertsQueue, WorkflowEvents(d.Store),
		fabric.ConsumerOptions{Prefetch: 8, Concurrency: 2, Simulatable: true}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	return nil
}

// Applier applies a workflow change inside the inbox transaction.
type Applier interface {
	ApplyWorkflowChange(ctx context.Context, tx pgx.Tx, tenantID string, c request.WorkflowChange, cause envelope.Envelope) error
}

// WorkflowEvents handles queue request.workflow-events: process started →
// in_progress, process completed → completed or rejected, SLA breached →
// flagged, task completed → the timeline only. Other workflow and task
// events are acknowledged and ignored.
// An event about a request the tenant does not have is a permanent failure
// (dead-lettered, never retried).
func WorkflowEvents(a Applier) fabric.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
		tenantID, err := tenant.From(ctx)
		if err != nil {
			return fabric.Invalid(err)
		}
		c, ok, err := request.ChangeFromWorkflow(env)
		if err != nil {
			return fabric.Invalid(err)
		}
		if !ok {
			return nil
		}
		if _, err := uuid.Parse(c.RequestID); err != nil {
			return fabric.Invalid(fmt.Errorf("%s %s: requestId %q: %w", env.Type, env.ID, c.RequestID, err))
		}
		// request.ErrNotFound is of the fabric's kind: a permanent failure.
		return a.ApplyWorkflowChange(ctx, tx, tenantID, c, env)
	}
}
