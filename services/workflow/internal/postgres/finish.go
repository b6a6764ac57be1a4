package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// finish completes task t of p (definition def) with outcome, by whom (a
// person's subject, or the reaction that resumed it), and opens the next
// step or ends the process, returning the events to enqueue. The events
// are the process's own, or, when cause is set (a resume), derived from
// the event that caused them: same correlation, causation and chain, so
// the depth and cycle limits hold. A next step waiting for an event that
// already came is resumed at once (see resumeEarly).
func (s *Store) finish(ctx context.Context, q *pgdb.Queries, p process.Instance, def process.Definition, t pgdb.Task,
	outcome, reason, by string, cause *envelope.Envelope) ([]outbox.Item, error) {
	event := func(typ string, pl any) (envelope.Envelope, error) {
		if cause != nil {
			return envelope.Derive(*cause, typ, process.Producer, pl)
		}
		return process.Event(p, typ, pl)
	}
	now := s.clock()
	var stored *string
	if outcome != "" {
		stored = &outcome
	}
	if err := q.CompleteTask(ctx, pgdb.CompleteTaskParams{TenantID: p.TenantID, ID: t.ID, Outcome: stored,
		Reason: optional(reason), CompletedAt: &now, CompletedBy: &by}); err != nil {
		return nil, fmt.Errorf("complete task %s: %w", t.ID, err)
	}
	if err := dropTimers(ctx, q, t.ID); err != nil {
		return nil, err
	}
	done, err := event(process.TypeTaskCompleted, payload.TaskCompleted{ProcessID: p.ID, TaskID: t.ID,
		RequestID: p.RequestID, Step: t.Step, Outcome: outcome, CompletedBy: by, Reason: reason})
	if err != nil {
		return nil, err
	}
	items := []outbox.Item{{Aggregate: aggregate(p.ID), Envelope: done}}
	next, finished, final := def.Advance(int(t.StepIndex), outcome)
	if finished {
		if err := q.CompleteProcess(ctx, pgdb.CompleteProcessParams{TenantID: p.TenantID, ID: p.ID,
			Outcome: &final, CompletedAt: &now}); err != nil {
			return nil, fmt.Errorf("complete process %s: %w", p.ID, err)
		}
		env, err := event(process.TypeProcessCompleted, payload.ProcessCompleted{ProcessID: p.ID, RequestID: p.RequestID, Outcome: final})
		if err != nil {
			return nil, err
		}
		items = append(items, outbox.Item{Aggregate: aggregate(p.ID), Envelope: env})
		if final == process.OutcomeApproved {
			reg, err := s.registerInSEI(ctx, q, p, def, now)
			if err != nil {
				return nil, err
			}
			items = append(items, reg)
		}
		return items, nil
	}
	taskID, err := s.openTask(ctx, q, p, def, next, now)
	if err != nil {
		return nil, err
	}
	if err := q.AdvanceProcess(ctx, pgdb.AdvanceProcessParams{TenantID: p.TenantID, ID: p.ID, CurrentStep: int32(next)}); err != nil {
		return nil, fmt.Errorf("advance process %s: %w", p.ID, err)
	}
	p.CurrentStep = next
	more, err := s.resumeEarly(ctx, q, p, def, next, taskID)
	if err != nil {
		return nil, err
	}
	return append(items, more...), nil
}

// resumeEarly resumes the step index of p that just opened (task taskID)
// if it waits for an event that came before it opened: the kept event is
// taken (at most once) and the step completes as if it had come now.
func (s *Store) resumeEarly(ctx context.Context, q *pgdb.Queries, p process.Instance, def process.Definition, index int, taskID string) ([]outbox.Item, error) {
	waitFor := def.Steps[index].WaitFor
	if waitFor == "" {
		return nil, nil
	}
	body, err := q.TakeEarlyEvent(ctx, pgdb.TakeEarlyEventParams{TenantID: p.TenantID, RequestID: p.RequestID, EventType: waitFor})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("process %s: early %s: %w", p.ID, waitFor, err)
	}
	early, err := envelope.Decode(body, 0)
	if err != nil {
		return nil, fmt.Errorf("process %s: early %s: %w", p.ID, waitFor, err)
	}
	t, err := q.GetTask(ctx, pgdb.GetTaskParams{TenantID: p.TenantID, ID: taskID})
	if err != nil {
		return nil, fmt.Errorf("process %s: task %s: %w", p.ID, taskID, err)
	}
	return s.finish(ctx, q, p, def, t, "", "resumed by "+early.Type+" "+early.ID+" (received before the step opened)",
		"reaction:"+early.Type, &early)
}

// Resume is the resume-workflow reaction (seed 004 §20): env, an event
// about a request, completes the step of the request's process that waits
// for it, at most once (the step's open task is locked and must still be
// open), inside tx (the reactions consumer's, scoped to the tenant). An
// event for a process not yet at such a step is kept until the step opens
// (resumeEarly), so it is not lost. It returns the decision's status and
// detail.
func (s *Store) Resume(ctx context.Context, tx pgx.Tx, env envelope.Envelope, requestID, by string) (string, string, error) {
	q := pgdb.New(tx)
	keep := func(why string) (string, string, error) {
		body, err := env.Encode()
		if err != nil {
			return "", "", err
		}
		n, err := q.KeepEarlyEvent(ctx, pgdb.KeepEarlyEventParams{TenantID: env.TenantID, RequestID: requestID, EventType: env.Type,
			EventID: env.ID, Event: body, ReceivedAt: s.clock()})
		if err != nil {
			return "", "", fmt.Errorf("resume: keep %s: %w", env.ID, err)
		}
		if n == 0 {
			return subscription.StatusNotRun, why + "; an earlier " + env.Type + " for the request is already kept", nil
		}
		return subscription.StatusWaiting, why + ": kept until the step opens", nil
	}
	row, err := q.GetProcessByRequestForUpdate(ctx, pgdb.GetProcessByRequestForUpdateParams{TenantID: env.TenantID, RequestID: requestID})
	if errors.Is(err, pgx.ErrNoRows) {
		return keep("the request has no process yet")
	}
	if err != nil {
		return "", "", fmt.Errorf("resume: process of request %s: %w", requestID, err)
	}
	p := fromProcessRow(row)
	if p.Status != "running" {
		return subscription.StatusNotRun, "the request's process is " + p.Status, nil
	}
	def, ok := s.catalog.ByID(p.DefinitionID)
	if !ok {
		return "", "", fmt.Errorf("resume: process %s: definition %s is no longer deployed", p.ID, p.DefinitionID)
	}
	if p.CurrentStep >= len(def.Steps) {
		// The definition was redeployed with fewer steps under a running
		// process: nothing here knows which step it is on.
		return subscription.StatusNotRun, fmt.Sprintf("process %s is at step %d, which definition %s no longer has", p.ID, p.CurrentStep, def.ID), nil
	}
	if def.Steps[p.CurrentStep].WaitFor != env.Type {
		for _, st := range def.Steps[p.CurrentStep+1:] {
			if st.WaitFor == env.Type {
				return keep("step " + st.Name + " waits for it and has not opened")
			}
		}
		return subscription.StatusNotRun, "no step of process " + p.ID + " left to open waits for " + env.Type, nil
	}
	t, err := q.OpenTaskOfStep(ctx, pgdb.OpenTaskOfStepParams{TenantID: p.TenantID, ProcessID: p.ID, StepIndex: int32(p.CurrentStep)})
	if errors.Is(err, pgx.ErrNoRows) {
		return subscription.StatusNotRun, "the step's task is no longer open", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("resume: task of process %s: %w", p.ID, err)
	}
	items, err := s.finish(ctx, q, p, def, t, "", "resumed by "+env.Type+" "+env.ID, by, &env)
	if err != nil {
		return "", "", err
	}
	if err := s.outbox.Enqueue(ctx, tx, items...); err != nil {
		return "", "", fmt.Errorf("resume: enqueue: %w", err)
	}
	return subscription.StatusExecuted, "step " + t.Step + " of process " + p.ID + " resumed", nil
}
