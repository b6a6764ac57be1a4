package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// AgentBatch is the most requests a batch of a mass reaction asks the
// agent step about. Each costs a knowledge search and a model call, each
// bounded by the step's timeout, inside the batch's transaction: the batch
// bounds both the model calls a sweep makes and how long its transaction
// stays open (AgentBatch × the step's timeout at worst).
const AgentBatch = 10

// requestStep is what a mass reaction's batch needs to ask the agent about
// its requests: the subscription version that decided the event, compiled.
type requestStep struct {
	c *subscription.Compiled
}

// requestStep loads the agent step of job's decision.
func (s *Subscriptions) requestStep(ctx context.Context, q *pgdb.Queries, job pgdb.ReactionJob) (*requestStep, error) {
	d, err := q.GetDecision(ctx, pgdb.GetDecisionParams{TenantID: job.TenantID, ID: job.DecisionID})
	if err != nil {
		return nil, fmt.Errorf("reaction job %s: its decision: %w", job.ID, err)
	}
	versions, err := q.ListSubscriptionVersions(ctx, pgdb.ListSubscriptionVersionsParams{TenantID: job.TenantID, ID: d.SubscriptionID})
	if err != nil {
		return nil, fmt.Errorf("reaction job %s: its subscription: %w", job.ID, err)
	}
	for _, row := range versions {
		if row.Version != d.SubscriptionVersion {
			continue
		}
		v, err := versionOf(row)
		if err != nil {
			return nil, err
		}
		c, err := s.compiled(v)
		if err != nil {
			return nil, fmt.Errorf("reaction job %s: subscription %s v%d: %w", job.ID, v.ID, v.Version, err)
		}
		return &requestStep{c: c}, nil
	}
	return nil, fmt.Errorf("reaction job %s: subscription %s has no version %d", job.ID, d.SubscriptionID, d.SubscriptionVersion)
}

// decideRequest runs the agent step about one request of job's batch and
// carries its outcome out, bounded by the policy's default as a per-event
// step's is: ALLOW acts (the reaction's review for its role),
// REQUIRE_APPROVAL opens an approval for an operator (approved, the
// reaction acts on the request: actOnApproved), REQUIRE_HUMAN_REVIEW a
// review for the reaction's role instead; the latter two carry the
// proposal (or why there is none) and the cited passages. A failed step
// (no model, a timeout, invalid output, knowledge unavailable) is
// REQUIRE_HUMAN_REVIEW: it never acts. The step is recorded like a
// per-event one, with the request and the outcome.
func (s *Subscriptions) decideRequest(ctx context.Context, q *pgdb.Queries, job pgdb.ReactionJob, step *requestStep, row pgdb.NextAffectedBatchRow) error {
	req := subscription.AffectedRequest{ID: row.RequestID, ServiceID: job.ServiceID, DefinitionID: row.DefinitionID, StartedAt: row.StartedAt.UTC()}
	if def, ok := s.catalog.ByID(row.DefinitionID); ok && int(row.CurrentStep) < len(def.Steps) {
		req.Step = def.Steps[row.CurrentStep].Name
	}
	rec := s.askRequest(ctx, step.c, job.TenantID, job.AgentEvent, req)
	if err := ctx.Err(); err != nil {
		// Stopping, not the step's timeout: the batch rolls back and runs
		// again, asking again.
		return fmt.Errorf("agent step of request %s: %w", row.RequestID, err)
	}
	outcome := subscription.Stricter(rec.Outcome(), step.c.Policy.Default)
	rec.RequestID, rec.Result = row.RequestID, outcome
	id, err := newID()
	if err != nil {
		return err
	}
	note := rec.Note()
	review := pgdb.InsertRequestReviewParams{ID: id, TenantID: job.TenantID, DecisionID: job.DecisionID, Kind: "review", Role: job.Role,
		CreatedAt: s.clock(), RequestID: &row.RequestID, Note: &note}
	if outcome == subscription.RequireApproval {
		review.Kind, review.Role = "approval", "operator"
	}
	n, err := q.InsertRequestReview(ctx, review)
	if err != nil {
		return fmt.Errorf("agent step of request %s: its %s: %w", row.RequestID, review.Kind, err)
	}
	if n == 0 {
		return nil // decided before
	}
	return s.recordAgent(ctx, q, job.TenantID, job.DecisionID, rec)
}

// askRequest runs c's agent step about req; without a decider it is a
// step with no model.
func (s *Subscriptions) askRequest(ctx context.Context, c *subscription.Compiled, tenantID string, event json.RawMessage, req subscription.AffectedRequest) subscription.AgentRecord {
	if s.agent == nil {
		return noModel(ctx)
	}
	return s.agent.DecideRequest(ctx, c, tenantID, event, req)
}

// noModel is the record of a step taken without a decider, under the
// execution's release as any step.
func noModel(ctx context.Context) subscription.AgentRecord {
	return subscription.AgentRecord{Passages: []subscription.Passage{}, Release: fabric.ExecutionOf(ctx).Release,
		Failure: "no model is configured (AGENT_MODEL_URL, AGENT_MODEL): a person decides"}
}

// agentProjection is what c's agent step may see of env, kept with the job
// that asks it about each request later; nil without a decider.
func (s *Subscriptions) agentProjection(c *subscription.Compiled, env envelope.Envelope) ([]byte, error) {
	if s.agent == nil {
		return nil, nil
	}
	return s.agent.Projection(c, env)
}

// actOnApproved runs v's mass reaction on the one request an approved
// per-request approval r held back: the reaction's review of the request,
// following the approval.
func (s *Subscriptions) actOnApproved(ctx context.Context, q *pgdb.Queries, v subscription.Version, r pgdb.ReactionReview, now time.Time) error {
	id, err := newID()
	if err != nil {
		return err
	}
	if err := q.InsertFollowUpReview(ctx, pgdb.InsertFollowUpReviewParams{ID: id, TenantID: r.TenantID, DecisionID: r.DecisionID,
		Kind: "review", Role: v.Reaction.Role, CreatedAt: now, Follows: &r.ID, RequestID: r.RequestID, Note: r.Note}); err != nil {
		return fmt.Errorf("approval %s: the review of request %s: %w", r.ID, deref(r.RequestID), err)
	}
	return nil
}

// requestAgentRecords returns the per-request agent steps of the mass
// reactions' reviews among reviews, by "decision/request".
func requestAgentRecords(ctx context.Context, q *pgdb.Queries, tenantID string, reviews []subscription.Review) (map[string]*subscription.AgentRecord, error) {
	var decisions, requests []string
	for _, r := range reviews {
		if r.RequestID != "" {
			decisions, requests = append(decisions, r.DecisionID), append(requests, r.RequestID)
		}
	}
	if len(requests) == 0 {
		return nil, nil
	}
	rows, err := q.RequestAgentDecisionsOf(ctx, pgdb.RequestAgentDecisionsOfParams{TenantID: tenantID, DecisionIds: decisions, RequestIds: requests})
	if err != nil {
		return nil, fmt.Errorf("agent steps per request: %w", err)
	}
	out := make(map[string]*subscription.AgentRecord, len(rows))
	for _, r := range rows {
		rec, err := agentRecordOf(r)
		if err != nil {
			return nil, err
		}
		out[r.DecisionID+"/"+deref(r.RequestID)] = rec
	}
	return out, nil
}

// agentRecordOf reads a stored agent step.
func agentRecordOf(r pgdb.AgentDecision) (*subscription.AgentRecord, error) {
	rec := &subscription.AgentRecord{Model: r.Model, PromptDigest: r.PromptDigest, Proposal: r.Proposal,
		KnowledgeVersion: r.KnowledgeVersion, Release: r.Release, Failure: deref(r.Failure),
		RequestID: deref(r.RequestID), Result: subscription.Outcome(deref(r.Outcome))}
	if err := json.Unmarshal(r.Passages, &rec.Passages); err != nil {
		return nil, fmt.Errorf("agent step of decision %s: passages: %w", r.DecisionID, err)
	}
	return rec, nil
}
