package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// startTarget is what a start-workflow reaction's process is about: the
// event's entity, and the request the process belongs to (processes,
// their tasks and events are a request's).
type startTarget struct {
	entity    envelope.Ref
	requestID string
}

// targetOf finds env's start target: its envelope entity, the entity's
// own id when it is a request, else the payload's requestId; without an
// entity, the payload's request is the entity. It returns why there is
// none when there is none.
func targetOf(env envelope.Envelope) (startTarget, string) {
	var p struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(env.Payload, &p) // a payload without one is handled below
	t := startTarget{requestID: p.RequestID}
	switch {
	case env.Entity != nil && env.Entity.Type == "request":
		t.entity, t.requestID = *env.Entity, env.Entity.ID
	case env.Entity != nil:
		t.entity = *env.Entity
	case p.RequestID != "":
		t.entity = envelope.Ref{Type: "request", ID: p.RequestID}
	default:
		return t, "the event names no entity (envelope entity) and no request (payload.requestId): nothing to start a process for"
	}
	if t.requestID == "" {
		return t, fmt.Sprintf("the event's entity %s %s belongs to no request (no payload.requestId): a process is a request's", t.entity.Type, t.entity.ID)
	}
	id, ok := canonicalID(t.requestID)
	if !ok {
		return t, fmt.Sprintf("the event's request %q is not a UUID", t.requestID)
	}
	t.requestID = id
	return t, ""
}

// startWorkflow decides an allowed (or approval-bound) start-workflow
// reaction of v on env inside the reactions consumer's transaction: the
// process starts at once unless the policy or the blast radius (the
// processes the subscription started that still run, against its
// maxAffected) wants an operator, whose approval then starts it
// (startApproved). d records the target, for that approval.
func (s *Subscriptions) startWorkflow(ctx context.Context, tx pgx.Tx, v subscription.Version, outcome subscription.Outcome,
	env envelope.Envelope, d *pgdb.InsertDecisionParams) (string, string, *pgdb.InsertReviewParams, error) {
	t, why := targetOf(env)
	if why != "" {
		return subscription.StatusNotRun, "start-workflow: " + why, nil, nil
	}
	d.EntityType, d.EntityID, d.RequestID = &t.entity.Type, &t.entity.ID, &t.requestID
	running, err := pgdb.New(tx).RunningStartedBy(ctx, pgdb.RunningStartedByParams{TenantID: env.TenantID, SubscriptionID: &v.ID})
	if err != nil {
		return "", "", nil, fmt.Errorf("start workflow on %s: blast radius: %w", env.ID, err)
	}
	estimate := fmt.Sprintf("blast radius of subscription %s in tenant %s: %d running processes it started (limit %d)",
		v.ID, env.TenantID, running, v.Reaction.Limit())
	if int(running) >= v.Reaction.Limit() || outcome == subscription.RequireApproval {
		// One more would pass the limit (or the policy wants a person):
		// the start waits for an operator, with the estimate in hand.
		d.Outcome = string(subscription.RequireApproval)
		detail := estimate + ": an operator's approval starts the process"
		return subscription.StatusPendingApproval, detail, &pgdb.InsertReviewParams{Kind: "approval", Role: "operator", Note: &detail}, nil
	}
	status, detail, err := s.startFor(ctx, tx, env.TenantID, v, t, env.ID, env.CorrelationID, &env)
	return status, detail, nil, err
}

// startApproved starts the process an approved approval of decision d
// held back (v is d's subscription version), in the approval's
// transaction. A decision that recorded no target starts nothing.
func (s *Subscriptions) startApproved(ctx context.Context, tx pgx.Tx, v subscription.Version, d pgdb.ReactionDecision) error {
	if d.RequestID == nil || d.EntityType == nil || d.EntityID == nil {
		return nil
	}
	t := startTarget{entity: envelope.Ref{Type: *d.EntityType, ID: *d.EntityID}, requestID: *d.RequestID}
	_, _, err := s.startFor(ctx, tx, d.TenantID, v, t, d.EventID, d.CorrelationID, nil)
	return err
}

// startFor opens the process of v's definition for t, once per trigger
// event and subscription (process_instance_reaction): its first task and
// timers, and workflow.process-started.v1 derived from cause (or, started
// by an approval, a root event under the trigger's correlation). It
// inherits the citizen and service of the request's own process, if any.
func (s *Subscriptions) startFor(ctx context.Context, tx pgx.Tx, tenantID string, v subscription.Version, t startTarget, triggerID, correlationID string,
	cause *envelope.Envelope) (string, string, error) {
	q := pgdb.New(tx)
	def, ok := s.catalog.ByID(v.Reaction.DefinitionID)
	if !ok {
		return subscription.StatusNotRun, "start-workflow: definition " + v.Reaction.DefinitionID + " is no longer deployed", nil
	}
	origin, err := q.RequestProcess(ctx, pgdb.RequestProcessParams{TenantID: tenantID, RequestID: t.requestID})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("start workflow: the request's process: %w", err)
	}
	id, err := newID()
	if err != nil {
		return "", "", err
	}
	now := s.clock()
	p := process.Instance{ID: id, TenantID: tenantID, RequestID: t.requestID, CitizenID: origin.CitizenID,
		ServiceID: origin.ServiceID, DefinitionID: def.ID, CorrelationID: correlationID}
	n, err := q.InsertReactionProcess(ctx, pgdb.InsertReactionProcessParams{ID: p.ID, TenantID: p.TenantID, RequestID: p.RequestID,
		CitizenID: p.CitizenID, ServiceID: p.ServiceID, DefinitionID: def.ID, CorrelationID: correlationID, StartedAt: now,
		SubscriptionID: &v.ID, TriggerEventID: &triggerID, EntityType: &t.entity.Type, EntityID: &t.entity.ID})
	if err != nil {
		return "", "", fmt.Errorf("start workflow for %s %s: %w", t.entity.Type, t.entity.ID, err)
	}
	if n == 0 {
		return subscription.StatusNotRun, "start-workflow: this event already started its process for this subscription", nil
	}
	taskID, err := s.openTask(ctx, pgdb.New(tenant.Deferring{Tx: tx}), p, def, 0, now)
	if err != nil {
		return "", "", err
	}
	started := payload.ProcessStarted{ProcessID: p.ID, RequestID: p.RequestID, DefinitionID: def.ID, FirstTaskID: taskID}
	env, err := process.Event(p, process.TypeProcessStarted, started)
	if cause != nil {
		env, err = envelope.Derive(*cause, process.TypeProcessStarted, process.Producer, started)
	}
	if err != nil {
		return "", "", err
	}
	if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: aggregate(p.ID), Envelope: env}); err != nil {
		return "", "", fmt.Errorf("start workflow: enqueue %s for process %s: %w", env.Type, p.ID, err)
	}
	return subscription.StatusExecuted, fmt.Sprintf("process %s of definition %s started for %s %s (request %s)",
		p.ID, def.ID, t.entity.Type, t.entity.ID, p.RequestID), nil
}
