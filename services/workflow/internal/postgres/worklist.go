package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// claimAttempts bounds how often a claim or release is retried when the
// row changed between the UPDATE that missed and the read that explains
// why (released and claimed again meanwhile); after that it is a conflict.
const claimAttempts = 3

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// visibleRoles is a.VisibleRoles() for the query: nil (NULL: every role)
// for an operator, never nil otherwise, so an actor without roles sees
// nothing rather than everything.
func visibleRoles(a process.Actor) []string {
	if roles := a.VisibleRoles(); roles != nil {
		return roles
	}
	if a.Operator() {
		return nil
	}
	return []string{}
}

// Worklist returns one page of the tasks of a's tenant that a may see (an
// operator: all; anyone else: those assigned to one of a's roles), by due
// date then id, filtered by q. It asks for q.Limit rows.
func (s *Store) Worklist(ctx context.Context, a process.Actor, q process.TaskQuery) ([]process.WorkItem, error) {
	params := pgdb.ListWorklistParams{TenantID: a.TenantID, Soon: s.clock().Add(s.dueSoon), Roles: visibleRoles(a),
		Role: optional(q.Role), Status: optional(q.Status), Assignee: optional(q.Assignee), Sla: optional(q.SLA),
		MaxRows: int32(q.Limit)}
	if q.After != nil {
		due, id := q.After.DueAt, q.After.ID
		params.AfterDue, params.AfterID = &due, &id
	}
	out := []process.WorkItem{}
	err := s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, db *pgdb.Queries) error {
		rows, err := db.ListWorklist(ctx, params)
		if err != nil {
			return fmt.Errorf("list worklist: %w", err)
		}
		for _, r := range rows {
			t := fromTaskRow(pgdb.Task{ID: r.ID, TenantID: r.TenantID, ProcessID: r.ProcessID, StepIndex: r.StepIndex,
				Step: r.Step, AssigneeRole: r.AssigneeRole, Status: r.Status, Outcome: r.Outcome, DueAt: r.DueAt,
				BreachedAt: r.BreachedAt, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt, CompletedBy: r.CompletedBy,
				Assignee: r.Assignee, ClaimedAt: r.ClaimedAt, Reason: r.Reason})
			out = append(out, process.WorkItem{Task: t, RequestID: r.RequestID, ServiceID: r.ServiceID, SLAState: r.SlaState})
		}
		return nil
	})
	return out, err
}

// ClaimTask makes a (the token's subject) the assignee of open task id.
// The UPDATE decides: of concurrent claims exactly one takes the row.
// Claiming a task a already holds returns it unchanged. It returns
// process.ErrNotFound (no such task in a's tenant), process.ErrForbidden
// (a lacks the task's role and is no operator), process.ErrTaskClosed, or a
// *process.ClaimedError (someone else holds it).
func (s *Store) ClaimTask(ctx context.Context, a process.Actor, id string) (process.Task, error) {
	id, ok := canonicalID(id)
	if !ok {
		return process.Task{}, process.ErrNotFound
	}
	var out process.Task
	err := s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		for range claimAttempts {
			row, err := q.ClaimTask(ctx, pgdb.ClaimTaskParams{Assignee: a.Subject, ClaimedAt: s.clock(),
				TenantID: a.TenantID, ID: id, Roles: visibleRoles(a)})
			if err == nil {
				out = fromTaskRow(row)
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("claim task %s: %w", id, err)
			}
			// Not taken: why, from the row as it is now (read committed:
			// a claim that won is committed by the time ours returned).
			t, err := s.task(ctx, q, a.TenantID, id)
			if err != nil {
				return err
			}
			switch {
			case !a.MayComplete(t.AssigneeRole):
				return process.ErrForbidden
			case t.Status != process.StatusOpen:
				return process.ErrTaskClosed
			case t.Assignee != nil && *t.Assignee == a.Subject:
				out = fromTaskRow(t) // already ours: idempotent
				return nil
			case t.Assignee != nil:
				return &process.ClaimedError{Assignee: *t.Assignee}
			}
			// Released since our UPDATE looked: try again.
		}
		return fmt.Errorf("%w: the claim changed hands while claiming", process.ErrClaimed)
	})
	return out, err
}

// ReleaseTask clears the claim on open task id: a's own, or anyone's if a
// is an operator. Releasing an unclaimed task returns it unchanged. It
// returns process.ErrNotFound, process.ErrForbidden (a lacks the task's
// role and does not hold it), process.ErrTaskClosed, or a
// *process.ClaimedError (someone else holds it and a is no operator).
func (s *Store) ReleaseTask(ctx context.Context, a process.Actor, id string) (process.Task, error) {
	id, ok := canonicalID(id)
	if !ok {
		return process.Task{}, process.ErrNotFound
	}
	var out process.Task
	err := s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		for range claimAttempts {
			row, err := q.ReleaseTask(ctx, pgdb.ReleaseTaskParams{TenantID: a.TenantID, ID: id,
				Subject: a.Subject, AnyAssignee: a.Operator()})
			if err == nil {
				out = fromTaskRow(row)
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("release task %s: %w", id, err)
			}
			t, err := s.task(ctx, q, a.TenantID, id)
			if err != nil {
				return err
			}
			mine := t.Assignee != nil && *t.Assignee == a.Subject
			switch {
			case !a.MayComplete(t.AssigneeRole) && !mine:
				return process.ErrForbidden
			case t.Status != process.StatusOpen:
				return process.ErrTaskClosed
			case t.Assignee == nil:
				out = fromTaskRow(t) // nobody holds it: nothing to release
				return nil
			case !mine:
				return &process.ClaimedError{Assignee: *t.Assignee}
			}
			// Claimed by a since our UPDATE looked: try again.
		}
		return fmt.Errorf("%w: the claim changed hands while releasing", process.ErrClaimed)
	})
	return out, err
}

func (s *Store) task(ctx context.Context, q *pgdb.Queries, tenantID, id string) (pgdb.Task, error) {
	t, err := q.GetTask(ctx, pgdb.GetTaskParams{TenantID: tenantID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return t, process.ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}
