package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// compiledCache keeps compiled versions: a version never changes once
// written, so (id, version) is a sound key.
type compiledCache struct {
	mu sync.Mutex
	m  map[string]*subscription.Compiled
}

func (s *Subscriptions) compiled(v subscription.Version) (*subscription.Compiled, error) {
	key := fmt.Sprintf("%s/%d", v.ID, v.Version)
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if c, ok := s.cache.m[key]; ok {
		return c, nil
	}
	c, err := subscription.Compile(s.reg, v)
	if err != nil {
		return nil, err
	}
	if s.cache.m == nil {
		s.cache.m = map[string]*subscription.Compiled{}
	}
	s.cache.m[key] = c
	return c, nil
}

// React evaluates the tenant's active subscriptions to env's type inside
// tx (the inbox's transaction, scoped to env's tenant): for each whose
// filter holds, the policy decides, the decision is recorded (once per
// event and subscription), and the outcome is carried out: ALLOW runs the
// reaction, REQUIRE_APPROVAL and REQUIRE_HUMAN_REVIEW open an approval or
// a review for people, DENY does nothing more. The event itself grants
// nothing: what it may cause is the subscription's policy. It returns how
// many decisions it recorded.
func (s *Subscriptions) React(ctx context.Context, tx pgx.Tx, env envelope.Envelope) (int, error) {
	q := pgdb.New(tx)
	rows, err := q.ActiveSubscriptionsFor(ctx, pgdb.ActiveSubscriptionsForParams{TenantID: env.TenantID, EventType: env.Type})
	if err != nil {
		return 0, fmt.Errorf("react to %s: subscriptions: %w", env.ID, err)
	}
	decided := 0
	for _, row := range rows {
		v, err := versionOf(row)
		if err != nil {
			return decided, err
		}
		d := pgdb.InsertDecisionParams{TenantID: env.TenantID, EventID: env.ID, EventType: env.Type, CorrelationID: env.CorrelationID,
			SubscriptionID: v.ID, SubscriptionVersion: int32(v.Version), Actor: process.Producer, DecidedAt: s.clock()}
		var review *pgdb.InsertReviewParams
		c, err := s.compiled(v)
		var matched bool
		var outcome subscription.Outcome
		rule := -1
		if err == nil {
			matched, outcome, rule, err = c.Evaluate(env)
		}
		switch {
		case err != nil:
			// Fail closed: a filter or rule that cannot be evaluated on
			// this event denies, and says why.
			d.Outcome, d.Status, d.Detail = string(subscription.Deny), subscription.StatusError, err.Error()
		case !matched:
			continue
		default:
			d.Outcome = string(outcome)
			if rule >= 0 {
				r := int32(rule)
				d.Rule = &r
			}
			if outcome == subscription.Allow && v.Reaction.Kind == subscription.ResumeWorkflow {
				d.Status, d.Detail, err = s.resume(ctx, tx, v, env)
				if err != nil {
					return decided, err
				}
				break
			}
			d.Status, d.Detail, review = decide(v, outcome, env)
		}
		if d.ID, err = newID(); err != nil {
			return decided, err
		}
		if review != nil {
			if review.ID, err = newID(); err != nil {
				return decided, err
			}
			review.TenantID, review.DecisionID, review.CreatedAt = env.TenantID, d.ID, d.DecidedAt
			d.ReviewID = &review.ID
		}
		n, err := q.InsertDecision(ctx, d)
		if err != nil {
			return decided, fmt.Errorf("react to %s: record the decision of subscription %s: %w", env.ID, v.ID, err)
		}
		if n == 0 {
			continue // decided before (a redelivery the inbox did not see)
		}
		if review != nil {
			if err := q.InsertReview(ctx, *review); err != nil {
				return decided, fmt.Errorf("react to %s: open %s: %w", env.ID, review.Kind, err)
			}
		}
		decided++
	}
	return decided, nil
}

// decide turns a policy outcome into what happens: the decision's status
// and detail, and the approval or review it opens, if any.
func decide(v subscription.Version, outcome subscription.Outcome, env envelope.Envelope) (string, string, *pgdb.InsertReviewParams) {
	role := v.Reaction.Role
	if role == "" {
		role = "operator"
	}
	switch outcome {
	case subscription.Deny:
		return subscription.StatusDenied, "the policy denies the reaction", nil
	case subscription.RequireApproval:
		return subscription.StatusPendingApproval, "the reaction waits for an operator's approval",
			&pgdb.InsertReviewParams{Kind: "approval", Role: "operator"}
	case subscription.RequireHumanReview:
		return subscription.StatusPendingReview, "a review by " + role + " was opened instead of the reaction",
			&pgdb.InsertReviewParams{Kind: "review", Role: role}
	}
	switch v.Reaction.Kind {
	case subscription.ReviewTask:
		return subscription.StatusExecuted, "review task opened for " + role, &pgdb.InsertReviewParams{Kind: "review", Role: role}
	default:
		// Starting a process needs a request without one; the types a
		// subscription can react to today are about requests that have
		// theirs (one process per request).
		return subscription.StatusNotRun, "start-workflow: " + env.Type + " does not start a request's process (the request has one)", nil
	}
}

// Decisions returns the tenant's recorded decisions about correlationID
// or, when it is empty, about eventID: why the platform did what it did.
func (s *Subscriptions) Decisions(ctx context.Context, tenantID, correlationID, eventID string) ([]subscription.Decision, error) {
	out := []subscription.Decision{}
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		var rows []pgdb.ReactionDecision
		var err error
		if correlationID != "" {
			rows, err = q.DecisionsByCorrelation(ctx, pgdb.DecisionsByCorrelationParams{TenantID: tenantID, CorrelationID: correlationID})
		} else if id, ok := canonicalID(eventID); ok {
			rows, err = q.DecisionsByEvent(ctx, pgdb.DecisionsByEventParams{TenantID: tenantID, EventID: id})
		}
		if err != nil {
			return fmt.Errorf("decisions: %w", err)
		}
		for _, r := range rows {
			d := subscription.Decision{ID: r.ID, EventID: r.EventID, EventType: r.EventType, CorrelationID: r.CorrelationID,
				SubscriptionID: r.SubscriptionID, SubscriptionVersion: int(r.SubscriptionVersion), Outcome: subscription.Outcome(r.Outcome),
				ActorType: r.ActorType, Actor: r.Actor, Status: r.Status, Detail: r.Detail, DecidedAt: r.DecidedAt}
			if r.Rule != nil {
				rule := int(*r.Rule)
				d.Rule = &rule
			}
			if r.ReviewID != nil {
				d.ReviewID = *r.ReviewID
			}
			out = append(out, d)
		}
		if len(out) == 0 {
			return nil
		}
		ids := make([]string, len(out))
		for i, d := range out {
			ids[i] = d.ID
		}
		reviews, err := q.ReviewsOfDecisions(ctx, pgdb.ReviewsOfDecisionsParams{TenantID: tenantID, DecisionIds: ids})
		if err != nil {
			return fmt.Errorf("decisions: reviews: %w", err)
		}
		for _, r := range reviews {
			for i := range out {
				if out[i].ID == r.DecisionID {
					out[i].Reviews = append(out[i].Reviews, reviewOf(r))
				}
			}
		}
		return nil
	})
	return out, err
}

func reviewOf(r pgdb.ReactionReview) subscription.Review {
	return subscription.Review{ID: r.ID, DecisionID: r.DecisionID, Kind: r.Kind, Role: r.Role, Status: r.Status,
		CreatedAt: r.CreatedAt, ResolvedAt: r.ResolvedAt, Resolution: deref(r.Resolution), ResolvedBy: deref(r.ResolvedBy),
		Reason: deref(r.ResolvedReason), Follows: deref(r.Follows)}
}

// Reviews returns the tenant's open approvals and reviews for a's roles
// (an operator sees every one).
func (s *Subscriptions) Reviews(ctx context.Context, a process.Actor) ([]subscription.Review, error) {
	roles := a.Roles
	if a.Operator() {
		roles = []string{"attendant", "operator"}
	}
	out := []subscription.Review{}
	err := s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.OpenReviews(ctx, pgdb.OpenReviewsParams{TenantID: a.TenantID, Roles: roles})
		if err != nil {
			return fmt.Errorf("open reviews: %w", err)
		}
		for _, r := range rows {
			out = append(out, reviewOf(r))
		}
		return nil
	})
	return out, err
}

// Resolve records a's resolution of review id. Approving an approval runs
// the reaction it held back, as ALLOW would have: a review-task reaction
// opens its review (following this one). Rejecting closes it, and nothing
// runs. It returns subscription.ErrNotFound, ErrReviewClosed or
// ErrNotYourRole.
func (s *Subscriptions) Resolve(ctx context.Context, a process.Actor, id string, approve bool, reason string) (subscription.Review, error) {
	id, ok := canonicalID(id)
	if !ok {
		return subscription.Review{}, subscription.ErrNotFound
	}
	var out subscription.Review
	err := s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		r, err := q.GetReviewForUpdate(ctx, pgdb.GetReviewForUpdateParams{TenantID: a.TenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			return subscription.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("review %s: %w", id, err)
		}
		if r.Status != "open" {
			return subscription.ErrReviewClosed
		}
		if !a.Operator() && !slices.Contains(a.Roles, r.Role) {
			return subscription.ErrNotYourRole
		}
		resolution := "rejected"
		if approve {
			resolution = "approved"
		}
		now := s.clock()
		row, err := q.ResolveReview(ctx, pgdb.ResolveReviewParams{TenantID: a.TenantID, ID: id, Resolution: &resolution,
			ResolvedBy: &a.Subject, ResolvedReason: &reason, ResolvedAt: &now})
		if err != nil {
			return fmt.Errorf("resolve review %s: %w", id, err)
		}
		out = reviewOf(row)
		if r.Kind != "approval" || !approve {
			return nil
		}
		d, err := q.GetDecision(ctx, pgdb.GetDecisionParams{TenantID: a.TenantID, ID: r.DecisionID})
		if err != nil {
			return fmt.Errorf("review %s: its decision: %w", id, err)
		}
		versions, err := q.ListSubscriptionVersions(ctx, pgdb.ListSubscriptionVersionsParams{TenantID: a.TenantID, ID: d.SubscriptionID})
		if err != nil {
			return fmt.Errorf("review %s: its subscription: %w", id, err)
		}
		for _, v := range versions {
			if v.Version != d.SubscriptionVersion {
				continue
			}
			sv, err := versionOf(v)
			if err != nil {
				return err
			}
			if sv.Reaction.Kind != subscription.ReviewTask {
				return nil // start-workflow: nothing it can start (see decide)
			}
			followID, err := newID()
			if err != nil {
				return err
			}
			return q.InsertFollowUpReview(ctx, pgdb.InsertFollowUpReviewParams{ID: followID, TenantID: a.TenantID, DecisionID: d.ID,
				Kind: "review", Role: sv.Reaction.Role, CreatedAt: now, Follows: &id})
		}
		return nil
	})
	return out, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// resume runs a resume-workflow reaction of v on env (Store.Resume).
func (s *Subscriptions) resume(ctx context.Context, tx pgx.Tx, v subscription.Version, env envelope.Envelope) (string, string, error) {
	var p struct {
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil || p.RequestID == "" {
		return subscription.StatusNotRun, "the event names no request", nil
	}
	if _, ok := canonicalID(p.RequestID); !ok {
		return subscription.StatusNotRun, "the event's requestId is not a UUID", nil
	}
	return s.Resume(ctx, tx, env, p.RequestID, fmt.Sprintf("subscription:%s@v%d", v.ID, v.Version))
}
