package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
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
	// A span under the event's consumer span: the decisions and agent
	// steps of this evaluation are its children. It names on whose behalf
	// the event came (the execution's principal: its actor, else its
	// producer as SYSTEM), so a trace of a decision says who set it off.
	p := fabric.ExecutionOf(ctx).Principal
	ctx, span := s.tracer.Start(ctx, "reaction evaluation", trace.WithAttributes(
		attribute.String("messaging.message.type", env.Type), attribute.String("messaging.message.id", env.ID),
		attribute.String("agora.principal", p.Type+":"+p.ID)))
	defer span.End()
	n, err := s.react(ctx, tx, env)
	span.SetAttributes(attribute.Int("agora.reaction.decisions", n))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return n, err
}

func (s *Subscriptions) react(ctx context.Context, tx pgx.Tx, env envelope.Envelope) (int, error) {
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
		began := time.Now()
		d := pgdb.InsertDecisionParams{TenantID: env.TenantID, EventID: env.ID, EventType: env.Type, CorrelationID: env.CorrelationID,
			SubscriptionID: v.ID, SubscriptionVersion: int32(v.Version), ActorType: "SYSTEM", Actor: process.Producer, DecidedAt: s.clock()}
		var review *pgdb.InsertReviewParams
		var job *pgdb.InsertJobParams
		var agent *subscription.AgentRecord
		// perRequest: the agent step decides about each request the mass
		// reaction affects, in its job, after the blast-radius gate.
		perRequest := false
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
			if rule < 0 && v.Agent != nil && v.Reaction.Kind == subscription.ReviewAffectedRequests {
				// A mass reaction's agent step is asked about each affected
				// request, not once about the event; nothing is asked
				// before the gate (SweepJobs), and this decision is the
				// policy's and the gate's (actor SYSTEM).
				perRequest = true
			} else if rule < 0 && v.Agent != nil {
				// Deterministic resolution came first and no rule decided:
				// the agent proposes, and the policy's default bounds the
				// proposal (a model never reaches past it). A step that
				// failed proposes REQUIRE_HUMAN_REVIEW.
				rec := s.askAgent(ctx, c, env)
				if err := ctx.Err(); err != nil {
					// Stopping, not the step's timeout: decide nothing now,
					// the event comes again.
					return decided, fmt.Errorf("react to %s: agent step: %w", env.ID, err)
				}
				agent = &rec
				outcome = subscription.Stricter(rec.Outcome(), v.Policy.Default)
				d.ActorType, d.Actor = "AGENT", "agent:"+cmp.Or(rec.Model, "none")
			}
			d.Outcome = string(outcome)
			if rule >= 0 {
				r := int32(rule)
				d.Rule = &r
			}
			if outcome == subscription.Allow && derives(v.Reaction.Kind) {
				if depth := len(env.CausationChain) + 1; depth > s.maxDepth {
					// What the resumed step emits derives from env, one
					// level deeper than any consumer accepts: a chain of
					// reactions this long is a loop, stopped here rather
					// than dead-lettered downstream.
					d.Outcome, d.Status = string(subscription.Deny), subscription.StatusLoopStopped
					d.Detail = fmt.Sprintf("the reaction would emit at causation depth %d, above the limit of %d: a reaction loop, not run", depth, s.maxDepth)
					s.metrics.loops.Add(ctx, 1)
					break
				}
				if detail, err := s.repeats(ctx, q, v, env); err != nil {
					return decided, err
				} else if detail != "" {
					d.Outcome, d.Status, d.Detail = string(subscription.Deny), subscription.StatusLoopStopped, detail
					s.metrics.loops.Add(ctx, 1)
					break
				}
			}
			if v.Reaction.Kind == subscription.StartWorkflow && (outcome == subscription.Allow || outcome == subscription.RequireApproval) {
				if d.Status, d.Detail, review, err = s.startWorkflow(ctx, tx, v, outcome, env, &d); err != nil {
					return decided, err
				}
				break
			}
			if outcome == subscription.Allow && v.Reaction.Kind == subscription.ResumeWorkflow {
				rctx := ctx
				if agent != nil {
					// What the resumed step emits is the agent's doing.
					rctx = envelope.WithActor(ctx, envelope.Ref{Type: "AGENT", ID: d.Actor})
				}
				d.Status, d.Detail, err = s.resume(rctx, tx, v, env)
				if err != nil {
					return decided, err
				}
				break
			}
			if v.Reaction.Kind == subscription.ReviewAffectedRequests && outcome != subscription.Deny && outcome != subscription.RequireHumanReview {
				var gated bool
				if gated, d.Status, d.Detail, job, err = s.gate(ctx, q, v, env); err != nil {
					return decided, err
				}
				if perRequest && job != nil {
					if job.AgentEvent, err = s.agentProjection(c, env); err != nil {
						// No request's step could see the event: a person
						// looks at the change instead, and nothing runs.
						job, gated = nil, false
						d.Outcome = string(subscription.RequireHumanReview)
						d.Status, d.Detail, review = decide(v, subscription.RequireHumanReview, env)
						d.Detail = "the agent step cannot see the event (" + err.Error() + "): " + d.Detail
						break
					}
					job.AgentStep = true
					d.Detail += "; the agent step then decides about each request, in the job's batches"
				}
				if gated || outcome == subscription.RequireApproval {
					// The blast radius (or the policy) wants an operator:
					// the estimate goes with the approval, and the job
					// waits for it.
					d.Outcome, d.Status = string(subscription.RequireApproval), subscription.StatusPendingApproval
					review = &pgdb.InsertReviewParams{Kind: "approval", Role: "operator", Note: &d.Detail}
					if job != nil {
						job.Status = "awaiting-approval"
					}
				}
				break
			}
			d.Status, d.Detail, review = decide(v, outcome, env)
		}
		if agent != nil {
			// The person who resolves the review reads the proposal (or
			// why there is none) and the passages first.
			d.Detail = agent.Note() + "; " + d.Detail
			if review != nil && review.Note == nil {
				note := agent.Note()
				review.Note = &note
			}
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
		s.metrics.decided(ctx, d.Outcome, d.Status)
		s.traceDecision(ctx, began, v, d)
		if review != nil {
			if err := s.openReview(ctx, q, *review, v); err != nil {
				return decided, fmt.Errorf("react to %s: %w", env.ID, err)
			}
		}
		if job != nil {
			if err := s.startJob(ctx, q, *job, d.ID); err != nil {
				return decided, err
			}
		}
		if agent != nil {
			if err := s.recordAgent(ctx, q, env.TenantID, d.ID, *agent); err != nil {
				return decided, err
			}
		}
		decided++
	}
	return decided, nil
}

// traceDecision records a decision as a span from the start of its
// subscription's evaluation (the agent step's span, when there was one,
// is its sibling under the evaluation).
func (s *Subscriptions) traceDecision(ctx context.Context, began time.Time, v subscription.Version, d pgdb.InsertDecisionParams) {
	attrs := []attribute.KeyValue{attribute.String("agora.subscription.id", v.ID), attribute.Int("agora.subscription.version", v.Version),
		attribute.String("agora.subscription.name", v.Name), attribute.String("agora.decision.id", d.ID),
		attribute.String("agora.decision.outcome", d.Outcome), attribute.String("agora.decision.status", d.Status),
		attribute.String("agora.decision.actor", d.ActorType+":"+d.Actor)}
	if d.Rule != nil {
		attrs = append(attrs, attribute.Int("agora.decision.rule", int(*d.Rule)))
	}
	_, span := s.tracer.Start(ctx, "decision", trace.WithTimestamp(began), trace.WithAttributes(attrs...))
	span.End()
}

// gate measures a mass reaction's blast radius (seed 004 §69-71): the
// service's open requests, their citizens and workflows, in the event's
// tenant (every count is the tenant's: the event is). Above the
// subscription's limit it is gated (an operator approves it with the
// estimate in hand); otherwise the job to run it.
func (s *Subscriptions) gate(ctx context.Context, q *pgdb.Queries, v subscription.Version, env envelope.Envelope) (bool, string, string, *pgdb.InsertJobParams, error) {
	var p struct {
		ServiceID string `json:"serviceId"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil || p.ServiceID == "" {
		return false, subscription.StatusNotRun, "the event names no service", nil, nil
	}
	n, err := q.AffectedRequests(ctx, pgdb.AffectedRequestsParams{TenantID: env.TenantID, ServiceID: p.ServiceID})
	if err != nil {
		return false, "", "", nil, fmt.Errorf("react to %s: blast radius: %w", env.ID, err)
	}
	estimate := fmt.Sprintf("blast radius of service %s in tenant %s: %d open requests, %d citizens, %d workflows (limit %d)",
		p.ServiceID, env.TenantID, n.Requests, n.Citizens, n.Workflows, v.Reaction.Limit())
	job := &pgdb.InsertJobParams{TenantID: env.TenantID, ServiceID: p.ServiceID, Role: v.Reaction.Role, Total: n.Requests,
		Status: "running", Now: s.clock()}
	if int(n.Requests) > v.Reaction.Limit() {
		return true, subscription.StatusPendingApproval, estimate + ": above the limit, an operator's approval runs it", job, nil
	}
	return false, subscription.StatusExecuted, estimate + ": reviews opened in batches", job, nil
}

// startJob records the mass reaction of decision decisionID as a job the
// job sweep runs in batches.
func (s *Subscriptions) startJob(ctx context.Context, q *pgdb.Queries, job pgdb.InsertJobParams, decisionID string) error {
	var err error
	if job.ID, err = newID(); err != nil {
		return err
	}
	job.DecisionID = decisionID
	if err := q.InsertJob(ctx, job); err != nil {
		return fmt.Errorf("mass reaction of decision %s: %w", decisionID, err)
	}
	if job.Status != "running" {
		return nil // it waits for its approval (settleJob)
	}
	return q.InsertJobTimer(ctx, pgdb.InsertJobTimerParams{JobID: job.ID, TenantID: job.TenantID})
}

// settleJob starts (approved) or cancels the mass reaction an approval
// held back; a decision without one is left as it is.
func (s *Subscriptions) settleJob(ctx context.Context, q *pgdb.Queries, tenantID, decisionID string, approved bool) error {
	status := "cancelled"
	if approved {
		status = "running"
	}
	id, err := q.SettleAwaitingJob(ctx, pgdb.SettleAwaitingJobParams{TenantID: tenantID, DecisionID: decisionID, Status: status, Now: s.clock()})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mass reaction of decision %s: %w", decisionID, err)
	}
	if !approved {
		return nil
	}
	return q.InsertJobTimer(ctx, pgdb.InsertJobTimerParams{JobID: id, TenantID: tenantID})
}

// SweepJobs runs one batch of up to limit requests of a running mass
// reaction: a review for each (once per decision and request), and the
// job's progress, in one transaction, so a crash resumes after the last
// committed batch and no request is reviewed twice. Competing instances
// take different jobs (SKIP LOCKED). It returns how many requests the
// batch covered.
func (s *Subscriptions) SweepJobs(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("reaction jobs: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := pgdb.New(tx)
	if err := tenant.Platform(ctx, tx); err != nil { // any tenant's job may be next
		return 0, fmt.Errorf("reaction jobs: %w", err)
	}
	next, err := q.NextJob(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reaction jobs: next: %w", err)
	}
	if err := tenant.Set(ctx, tx, next.TenantID); err != nil {
		return 0, err
	}
	job, err := q.GetJob(ctx, pgdb.GetJobParams{TenantID: next.TenantID, ID: next.JobID})
	if err != nil {
		return 0, fmt.Errorf("reaction job %s: %w", next.JobID, err)
	}
	after := "00000000-0000-0000-0000-000000000000"
	if job.LastRequestID != nil {
		after = *job.LastRequestID
	}
	var step *requestStep
	if job.AgentStep {
		// Each request of the batch costs a knowledge search and a model
		// call inside this transaction: a smaller batch bounds how long it
		// stays open (and the model calls per batch).
		limit = min(limit, AgentBatch)
		if step, err = s.requestStep(ctx, q, job); err != nil {
			return 0, err
		}
	}
	batch, err := q.NextAffectedBatch(ctx, pgdb.NextAffectedBatchParams{TenantID: job.TenantID, ServiceID: job.ServiceID,
		After: after, MaxRows: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("reaction job %s: batch: %w", job.ID, err)
	}
	now := s.clock()
	for _, row := range batch {
		if step != nil {
			if err := s.decideRequest(ctx, q, job, step, row); err != nil {
				return 0, err
			}
			continue
		}
		id, err := newID()
		if err != nil {
			return 0, err
		}
		if _, err := q.InsertRequestReview(ctx, pgdb.InsertRequestReviewParams{ID: id, TenantID: job.TenantID, DecisionID: job.DecisionID,
			Kind: "review", Role: job.Role, CreatedAt: now, RequestID: &row.RequestID}); err != nil {
			return 0, fmt.Errorf("reaction job %s: review of request %s: %w", job.ID, row.RequestID, err)
		}
	}
	status, last := "running", job.LastRequestID
	if len(batch) > 0 {
		last = &batch[len(batch)-1].RequestID
	}
	if len(batch) < limit {
		status = "done"
		if err := q.DeleteJobTimer(ctx, job.ID); err != nil {
			return 0, fmt.Errorf("reaction job %s: %w", job.ID, err)
		}
	}
	if err := q.AdvanceJob(ctx, pgdb.AdvanceJobParams{TenantID: job.TenantID, ID: job.ID, Added: int32(len(batch)),
		LastRequestID: last, Status: status, Now: now}); err != nil {
		return 0, fmt.Errorf("reaction job %s: progress: %w", job.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("reaction job %s: commit: %w", job.ID, err)
	}
	s.metrics.reviewed.Add(ctx, int64(len(batch)))
	return len(batch), nil
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
	if v.Reaction.Kind == subscription.ReviewTask {
		return subscription.StatusExecuted, "review task opened for " + role, &pgdb.InsertReviewParams{Kind: "review", Role: role}
	}
	// start-workflow and resume-workflow run in React; nothing else is
	// allowed to reach here.
	return subscription.StatusNotRun, v.Reaction.Kind + ": not run on " + env.Type, nil
}

// derives reports whether a reaction of kind emits events derived from
// its trigger (one level deeper in the causation chain), so the depth
// limit stops a loop of them before they are emitted.
// repeats stops a loop at its second turn, whatever the ids each turn
// mints (seed 004 §55): when v's reaction already ran on an ancestor of
// env of env's own type, running it again would repeat the pattern
// (A → B → A → B …). It returns why, or "" when the chain does not repeat.
func (s *Subscriptions) repeats(ctx context.Context, q *pgdb.Queries, v subscription.Version, env envelope.Envelope) (string, error) {
	var same []string
	for _, r := range env.CausationChain {
		if id, ok := canonicalID(r.ID); ok && r.Type == env.Type {
			same = append(same, id)
		}
	}
	if len(same) == 0 {
		return "", nil // the common case: no query
	}
	prior, err := q.ReactedInChain(ctx, pgdb.ReactedInChainParams{TenantID: env.TenantID, SubscriptionID: v.ID, EventIds: same})
	if err != nil {
		return "", fmt.Errorf("react to %s: causation chain: %w", env.ID, err)
	}
	if len(prior) == 0 {
		return "", nil
	}
	types := make([]string, 0, len(env.CausationChain)+1)
	for _, r := range env.CausationChain {
		types = append(types, r.Type)
	}
	return fmt.Sprintf("a repeating pattern: this subscription already reacted to %s %s earlier in this chain (%s): its second turn is not run",
		env.Type, prior[0], strings.Join(append(types, env.Type), " → ")), nil
}

func derives(kind string) bool {
	return kind == subscription.ResumeWorkflow || kind == subscription.StartWorkflow
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
		agents, err := agentRecords(ctx, q, tenantID, ids)
		if err != nil {
			return err
		}
		for i := range out {
			out[i].Agent = agents[out[i].ID]
			for j := range out[i].Reviews {
				out[i].Reviews[j].Agent = agents[out[i].ID]
			}
		}
		jobs, err := q.JobsOfDecisions(ctx, pgdb.JobsOfDecisionsParams{TenantID: tenantID, DecisionIds: ids})
		if err != nil {
			return fmt.Errorf("decisions: jobs: %w", err)
		}
		for _, j := range jobs {
			for i := range out {
				if out[i].ID == j.DecisionID {
					out[i].Job = &subscription.Job{ServiceID: j.ServiceID, Total: int(j.Total), Done: int(j.Done), Status: j.Status}
				}
			}
		}
		counts, err := q.AgentOutcomesOf(ctx, pgdb.AgentOutcomesOfParams{TenantID: tenantID, DecisionIds: ids})
		if err != nil {
			return fmt.Errorf("decisions: agent steps per request: %w", err)
		}
		for _, c := range counts {
			for i := range out {
				if out[i].ID == c.DecisionID && out[i].Job != nil {
					if out[i].Job.Outcomes == nil {
						out[i].Job.Outcomes = map[subscription.Outcome]int{}
					}
					out[i].Job.Outcomes[subscription.Outcome(c.Outcome)] = int(c.Requests)
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
		Reason: deref(r.ResolvedReason), Follows: deref(r.Follows), RequestID: deref(r.RequestID), Note: deref(r.Note),
		DueAt: r.DueAt, OverdueAt: r.OverdueAt}
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
		ids := make([]string, len(rows))
		for i, r := range rows {
			out = append(out, reviewOf(r))
			ids[i] = r.DecisionID
		}
		if len(ids) == 0 {
			return nil
		}
		agents, err := agentRecords(ctx, q, a.TenantID, ids)
		if err != nil {
			return err
		}
		perRequest, err := requestAgentRecords(ctx, q, a.TenantID, out)
		if err != nil {
			return err
		}
		for i := range out {
			out[i].Agent = agents[out[i].DecisionID]
			if r := out[i].RequestID; r != "" {
				out[i].Agent = perRequest[out[i].DecisionID+"/"+r]
			}
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
		if err := q.DeleteReviewTimer(ctx, id); err != nil { // resolved: never overdue
			return fmt.Errorf("resolve review %s: its due date: %w", id, err)
		}
		if r.Kind == "approval" && r.RequestID == nil {
			if err := s.settleJob(ctx, q, a.TenantID, r.DecisionID, approve); err != nil {
				return err
			}
		}
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
			if sv.Reaction.Kind == subscription.StartWorkflow {
				return s.startApproved(ctx, tx, sv, d)
			}
			if r.RequestID != nil {
				// An agent step's approval of one request a mass reaction
				// affects: approved, the reaction acts on that request.
				return s.actOnApproved(ctx, q, sv, r, now)
			}
			if sv.Reaction.Kind != subscription.ReviewTask {
				return nil
			}
			followID, err := newID()
			if err != nil {
				return err
			}
			return s.openFollowUp(ctx, q, pgdb.InsertFollowUpReviewParams{ID: followID, TenantID: a.TenantID, DecisionID: d.ID,
				Kind: "review", Role: sv.Reaction.Role, CreatedAt: now, Follows: &id}, sv)
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

// askAgent runs c's agent step; without a decider it is a step with no
// model.
func (s *Subscriptions) askAgent(ctx context.Context, c *subscription.Compiled, env envelope.Envelope) subscription.AgentRecord {
	if s.agent == nil {
		return noModel(ctx)
	}
	return s.agent.Decide(ctx, c, env)
}

// recordAgent keeps what the agent step of decision decisionID did.
func (s *Subscriptions) recordAgent(ctx context.Context, q *pgdb.Queries, tenantID, decisionID string, rec subscription.AgentRecord) error {
	passages, err := json.Marshal(rec.Passages)
	if err != nil {
		return err
	}
	var failure *string
	if rec.Failure != "" {
		failure = &rec.Failure
	}
	var proposal []byte
	if len(rec.Proposal) > 0 {
		proposal = rec.Proposal
	}
	var requestID, outcome *string
	if rec.RequestID != "" {
		// A mass reaction's step about one request, and what it led to.
		result := string(rec.Result)
		requestID, outcome = &rec.RequestID, &result
	}
	if err := q.InsertAgentDecision(ctx, pgdb.InsertAgentDecisionParams{DecisionID: decisionID, TenantID: tenantID, Model: rec.Model,
		PromptDigest: rec.PromptDigest, Proposal: proposal, Passages: passages, KnowledgeVersion: rec.KnowledgeVersion,
		Release: rec.Release, Failure: failure, CreatedAt: s.clock(), RequestID: requestID, Outcome: outcome}); err != nil {
		if rec.RequestID != "" {
			return fmt.Errorf("record the agent step of request %s (decision %s): %w", rec.RequestID, decisionID, err)
		}
		return fmt.Errorf("record the agent step of decision %s: %w", decisionID, err)
	}
	return nil
}

// agentRecords returns the agent steps of decisionIDs, by decision.
func agentRecords(ctx context.Context, q *pgdb.Queries, tenantID string, decisionIDs []string) (map[string]*subscription.AgentRecord, error) {
	rows, err := q.AgentDecisionsOf(ctx, pgdb.AgentDecisionsOfParams{TenantID: tenantID, DecisionIds: decisionIDs})
	if err != nil {
		return nil, fmt.Errorf("agent steps: %w", err)
	}
	out := make(map[string]*subscription.AgentRecord, len(rows))
	for _, r := range rows {
		rec, err := agentRecordOf(r)
		if err != nil {
			return nil, err
		}
		out[r.DecisionID] = rec
	}
	return out, nil
}
