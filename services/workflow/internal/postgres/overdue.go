package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// openReview opens approval or review r of a decision by v, due after v's
// dueAfter (else the service's default), with the timer the overdue
// sweep finds it by.
func (s *Subscriptions) openReview(ctx context.Context, q *pgdb.Queries, r pgdb.InsertReviewParams, v subscription.Version) error {
	due := r.CreatedAt.Add(v.Reaction.Due(s.reviewDue))
	r.DueAt = &due
	if err := q.InsertReview(ctx, r); err != nil {
		return fmt.Errorf("open %s: %w", r.Kind, err)
	}
	return s.dueTimer(ctx, q, r.TenantID, r.ID, due)
}

// openFollowUp opens the review an approved approval of v's decision
// leads to, due like any other.
func (s *Subscriptions) openFollowUp(ctx context.Context, q *pgdb.Queries, r pgdb.InsertFollowUpReviewParams, v subscription.Version) error {
	due := r.CreatedAt.Add(v.Reaction.Due(s.reviewDue))
	r.DueAt = &due
	if err := q.InsertFollowUpReview(ctx, r); err != nil {
		return fmt.Errorf("open the review following %s: %w", deref(r.Follows), err)
	}
	return s.dueTimer(ctx, q, r.TenantID, r.ID, due)
}

func (s *Subscriptions) dueTimer(ctx context.Context, q *pgdb.Queries, tenantID, reviewID string, due time.Time) error {
	if err := q.InsertReviewTimer(ctx, pgdb.InsertReviewTimerParams{ReviewID: reviewID, TenantID: tenantID, DueAt: due}); err != nil {
		return fmt.Errorf("the due date of review %s: %w", reviewID, err)
	}
	return nil
}

// SweepOverdue reports up to limit approvals and reviews whose due date
// passed while they were open: each is stamped overdue and
// workflow.review-overdue.v1 is enqueued in the transaction that deletes
// its timer, so it is reported once however many instances sweep (the
// timers are taken SKIP LOCKED, and a committed report leaves no timer).
// A review resolved meanwhile had its timer deleted with the resolution.
// It returns how many it reported.
func (s *Subscriptions) SweepOverdue(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("overdue sweep: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := pgdb.New(tx)
	if err := tenant.Platform(ctx, tx); err != nil { // due timers of every tenant
		return 0, fmt.Errorf("overdue sweep: %w", err)
	}
	now := s.clock()
	timers, err := q.DueReviewTimers(ctx, pgdb.DueReviewTimersParams{Now: now, MaxTimers: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("overdue sweep: due timers: %w", err)
	}
	reported := 0
	for _, tm := range timers {
		ok, err := s.reportOverdue(ctx, tx, q, tm, now)
		if err != nil {
			return 0, err
		}
		if ok {
			reported++
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("overdue sweep: commit: %w", err)
	}
	return reported, nil
}

// reportOverdue handles one due timer in its tenant's scope: the timer
// goes, and a review still open is stamped and reported.
func (s *Subscriptions) reportOverdue(ctx context.Context, tx pgx.Tx, q *pgdb.Queries, tm pgdb.ReviewTimer, now time.Time) (bool, error) {
	if err := tenant.Set(ctx, tx, tm.TenantID); err != nil {
		return false, err
	}
	if err := q.DeleteReviewTimer(ctx, tm.ReviewID); err != nil {
		return false, fmt.Errorf("overdue sweep: delete timer %s: %w", tm.ReviewID, err)
	}
	r, err := q.MarkReviewOverdue(ctx, pgdb.MarkReviewOverdueParams{TenantID: tm.TenantID, ID: tm.ReviewID, Now: &now})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // resolved meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("overdue sweep: review %s: %w", tm.ReviewID, err)
	}
	d, err := q.GetDecision(ctx, pgdb.GetDecisionParams{TenantID: tm.TenantID, ID: r.DecisionID})
	if err != nil {
		return false, fmt.Errorf("overdue sweep: decision of review %s: %w", r.ID, err)
	}
	env, err := envelope.New(process.TypeReviewOverdue, tm.TenantID, process.Producer, process.ReviewOverdue{
		ReviewID: r.ID, DecisionID: d.ID, Kind: r.Kind, Role: r.Role, SubscriptionID: d.SubscriptionID,
		SubscriptionVersion: int(d.SubscriptionVersion), EventID: d.EventID, EventType: d.EventType, CreatedAt: r.CreatedAt, DueAt: tm.DueAt})
	if err != nil {
		return false, err
	}
	env.CorrelationID = d.CorrelationID // the decision's story: GET /v1/decisions?correlationId= finds both
	if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "review", ID: r.ID}, Envelope: env}); err != nil {
		return false, fmt.Errorf("overdue sweep: enqueue review %s: %w", r.ID, err)
	}
	return true, nil
}
