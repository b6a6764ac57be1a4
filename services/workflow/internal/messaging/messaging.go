// Package messaging holds the workflow service's message handlers.
package messaging

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// The workflow service's queues (pkg/fabric/catalog/catalog.yaml,
// services:).
const (
	requestSubmittedQueue = "workflow.request-submitted"
	// requestCancelledQueue stops the processes of cancelled requests.
	requestCancelledQueue = "workflow.request-cancelled"
	// startCommandsQueue starts processes integrations ask for.
	startCommandsQueue = "workflow.start-commands"
	// seiRegisterQueue registers approved requests in SEI.
	seiRegisterQueue = "workflow.sei-register"
	// reactionsQueue brings the events subscriptions may react to.
	reactionsQueue = "workflow.reactions"
)

// Host is what Attach needs of the service host (host.New's value).
type Host interface {
	Consume(queue string, h fabric.Handler, o fabric.ConsumerOptions) error
	ConsumeTx(queue string, h fabric.TxHandler, o fabric.ConsumerOptions) error
}

// Store is what the handlers need of the service's store.
type Store interface {
	Starter
	Canceller
	SEIRecords
}

// Deps are the handlers' dependencies. SEI nil turns registration off.
type Deps struct {
	Store     Store
	Reactions Reactor
	SEI       SEI
	Log       *slog.Logger
}

// Attach registers the workflow service's consumers on h.
func Attach(h Host, d Deps) error {
	// Every transactional handler here writes only rows and outbox
	// events: a replay from history may simulate it (Simulatable).
	tx := fabric.ConsumerOptions{Simulatable: true}
	for _, c := range []struct {
		queue   string
		handler fabric.TxHandler
	}{
		{requestSubmittedQueue, RequestSubmitted(d.Store)},
		{requestCancelledQueue, RequestCancelled(d.Store)},
		{startCommandsQueue, StartCommand(d.Store)},
		{reactionsQueue, Reactions(d.Reactions)},
	} {
		if err := h.ConsumeTx(c.queue, c.handler, tx); err != nil {
			return fmt.Errorf("messaging: %w", err)
		}
	}
	if d.SEI == nil {
		// Off rather than a refusal to start: nothing is lost. The queue is
		// declared all the same, so approvals still record a pending
		// registration and enqueue its command, which waits there until an
		// instance with SEI_URL drains it.
		d.Log.Warn("SEI registration is off (SEI_URL is unset): approved requests wait, pending, in queue " + seiRegisterQueue)
		return nil
	}
	// One message per handler, outside any transaction: each waits on SEI
	// for up to SEI_TIMEOUT.
	if err := h.Consume(seiRegisterQueue, RegisterInSEI(d.Store, d.SEI, d.Log), fabric.ConsumerOptions{}); err != nil {
		return fmt.Errorf("messaging: %w", err)
	}
	return nil
}

// Reactable returns the keys the catalog binds to the reactions queue:
// the only types a subscription may name.
func Reactable(reg *registry.Registry) ([]string, error) {
	for _, svc := range reg.Services() {
		for _, q := range svc.Consumes {
			if q.Queue == reactionsQueue {
				return q.Keys, nil
			}
		}
	}
	return nil, fmt.Errorf("messaging: the catalog declares no queue %s", reactionsQueue)
}

// Starter starts a process inside the inbox transaction.
type Starter interface {
	StartProcess(ctx context.Context, tx pgx.Tx, tenantID string, sub process.Submitted, cause envelope.Envelope) error
}

// RequestSubmitted handles queue workflow.request-submitted: each
// request.submitted.v1 starts one process instance.
func RequestSubmitted(s Starter) fabric.TxHandler {
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

// StartCommand handles queue workflow.start-commands: a workflow.start.v1
// command (an integration asking for a process for one of its requests)
// starts the process exactly as request.submitted.v1 does, through the same
// StartProcess: one process per tenant and request, so a repeated command,
// or one for a request whose submission already started its process,
// starts nothing, and a cancelled request's tombstone keeps it from
// starting. A serviceId no definition lists takes the default definition,
// as for a submission. Without a citizenId no citizen sees the process.
func StartCommand(s Starter) fabric.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
		if env.Type != process.TypeStart {
			return fabric.Invalid(fmt.Errorf("unexpected %s %s on workflow.start-commands", env.Type, env.ID))
		}
		tenantID, p, err := fabric.Decode[process.Start](ctx, env)
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
func RequestCancelled(s Canceller) fabric.TxHandler {
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

// Reactor evaluates the tenants' subscriptions on an event inside the
// inbox transaction (postgres.Subscriptions).
type Reactor interface {
	React(ctx context.Context, tx pgx.Tx, env envelope.Envelope) (int, error)
}

// Reactions handles queue workflow.reactions: every event the reactive
// fabric receives is evaluated against the tenant's active subscriptions,
// each decision recorded in the transaction that claims the event, so an
// event is decided once.
func Reactions(r Reactor) fabric.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
		if env.TenantID == "" {
			return fabric.Invalid(fmt.Errorf("%s %s: a reaction needs the event's tenant", env.Type, env.ID))
		}
		_, err := r.React(ctx, tx, env)
		return err
	}
}
