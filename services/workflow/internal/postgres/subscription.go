package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// Subscriptions keeps the tenants' subscriptions; reg is the catalog their
// filters are checked against.
type Subscriptions struct {
	*Store
	reg       *registry.Registry
	reactable []string
	cache     compiledCache
	metrics   reactionMetrics
	// maxDepth is the causation depth no message may exceed (the
	// consumers' limit): a reaction that would emit deeper is a loop.
	maxDepth int
	// agent runs agent steps; nil: no model (every step is a human review).
	agent Decider
	// tracer records evaluations and decisions (UseTracer).
	tracer trace.Tracer
	// reviewDue is how long an approval or review stays open before it is
	// overdue, for subscriptions that set no dueAfter.
	reviewDue time.Duration
}

// DefaultReviewDue is REVIEW_DUE_AFTER unless set: a working day and a
// night for a person to look.
const DefaultReviewDue = 24 * time.Hour

// UseReviewDue sets the due duration of approvals and reviews whose
// subscription sets none (REVIEW_DUE_AFTER).
func (s *Subscriptions) UseReviewDue(d time.Duration) { s.reviewDue = d }

// Decider runs a subscription's agent step (agent.Decider). It never
// fails: what went wrong is the record's Failure.
type Decider interface {
	Decide(ctx context.Context, c *subscription.Compiled, env envelope.Envelope) subscription.AgentRecord
	// DecideRequest runs the step about one request a mass reaction on an
	// event affects, given the event's projection (Projection).
	DecideRequest(ctx context.Context, c *subscription.Compiled, tenantID string, event json.RawMessage, req subscription.AffectedRequest) subscription.AgentRecord
	// Projection is what the step may send of env.
	Projection(c *subscription.Compiled, env envelope.Envelope) (json.RawMessage, error)
}

// UseAgent makes d run the subscriptions' agent steps.
func (s *Subscriptions) UseAgent(d Decider) { s.agent = d }

// UseTracer records each reaction evaluation and decision as spans of t
// (none until called).
func (s *Subscriptions) UseTracer(t trace.Tracer) { s.tracer = t }

// Subscriptions returns the subscription store over s; reactable are the
// event types the service receives for subscriptions (its reactions
// queue's bindings): no subscription may name another. meter may be nil
// (no metrics).
func (s *Store) Subscriptions(reg *registry.Registry, reactable []string, meter metric.Meter) (*Subscriptions, error) {
	m, err := newReactionMetrics(meter)
	if err != nil {
		return nil, err
	}
	return &Subscriptions{Store: s, reg: reg, reactable: reactable, metrics: m, maxDepth: envelope.DefaultMaxDepth,
		reviewDue: DefaultReviewDue, tracer: noop.NewTracerProvider().Tracer("")}, nil
}

func (s *Subscriptions) check(spec *subscription.Spec) error {
	if err := spec.Check(s.reg, func(id string) bool { _, ok := s.catalog.ByID(id); return ok }); err != nil {
		return err
	}
	for _, t := range spec.EventTypes {
		if !slices.Contains(s.reactable, t) {
			return fmt.Errorf("%w: eventTypes: the workflow does not receive %s (it reacts to %v)", subscription.ErrInvalid, t, s.reactable)
		}
	}
	return nil
}

// Create stores spec as version 1 of a new subscription, in DRAFT.
func (s *Subscriptions) Create(ctx context.Context, a process.Actor, spec subscription.Spec) (subscription.Version, error) {
	id, err := newID()
	if err != nil {
		return subscription.Version{}, err
	}
	return s.insert(ctx, a, id, 1, spec)
}

// AddVersion stores spec as the next version of subscription id, in
// DRAFT; the versions before it keep their states.
func (s *Subscriptions) AddVersion(ctx context.Context, a process.Actor, id string, spec subscription.Spec) (subscription.Version, error) {
	id, ok := canonicalID(id)
	if !ok {
		return subscription.Version{}, subscription.ErrNotFound
	}
	var latest int32
	err := s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		versions, err := q.LockSubscription(ctx, pgdb.LockSubscriptionParams{TenantID: a.TenantID, ID: id})
		if err != nil {
			return fmt.Errorf("lock subscription %s: %w", id, err)
		}
		if len(versions) == 0 {
			return subscription.ErrNotFound
		}
		latest = versions[len(versions)-1]
		return nil
	})
	if err != nil {
		return subscription.Version{}, err
	}
	return s.insert(ctx, a, id, int(latest)+1, spec)
}

func (s *Subscriptions) insert(ctx context.Context, a process.Actor, id string, version int, spec subscription.Spec) (subscription.Version, error) {
	if err := s.check(&spec); err != nil {
		return subscription.Version{}, err
	}
	policy, err := json.Marshal(spec.Policy)
	if err != nil {
		return subscription.Version{}, err
	}
	reaction, err := json.Marshal(spec.Reaction)
	if err != nil {
		return subscription.Version{}, err
	}
	var agent []byte
	if spec.Agent != nil {
		if agent, err = json.Marshal(spec.Agent); err != nil {
			return subscription.Version{}, err
		}
	}
	var out subscription.Version
	err = s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		row, err := q.InsertSubscription(ctx, pgdb.InsertSubscriptionParams{ID: id, Version: int32(version), TenantID: a.TenantID,
			Name: spec.Name, EventTypes: spec.EventTypes, Filter: spec.Filter, Policy: policy, Reaction: reaction,
			Agent: agent, CreatedBy: a.Subject, CreatedAt: s.clock()})
		if err != nil {
			return fmt.Errorf("insert subscription %s v%d: %w", id, version, err)
		}
		if out, err = versionOf(row); err != nil {
			return err
		}
		return q.InsertSubscriptionTransition(ctx, pgdb.InsertSubscriptionTransitionParams{TenantID: a.TenantID, SubscriptionID: id,
			Version: int32(version), FromState: "", ToState: string(subscription.Draft), Actor: a.Subject, Reason: "created", At: s.clock()})
	})
	return out, err
}

// List returns the latest version of each of the tenant's subscriptions.
func (s *Subscriptions) List(ctx context.Context, tenantID string) ([]subscription.Version, error) {
	out := []subscription.Version{}
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.LatestSubscriptions(ctx, tenantID)
		if err != nil {
			return fmt.Errorf("list subscriptions: %w", err)
		}
		out, err = versionsOf(rows)
		return err
	})
	return out, err
}

// History returns every version of subscription id and its transitions.
func (s *Subscriptions) History(ctx context.Context, tenantID, id string) ([]subscription.Version, []subscription.Transition, error) {
	id, ok := canonicalID(id)
	if !ok {
		return nil, nil, subscription.ErrNotFound
	}
	var versions []subscription.Version
	var transitions []subscription.Transition
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListSubscriptionVersions(ctx, pgdb.ListSubscriptionVersionsParams{TenantID: tenantID, ID: id})
		if err != nil {
			return fmt.Errorf("subscription %s: %w", id, err)
		}
		if len(rows) == 0 {
			return subscription.ErrNotFound
		}
		if versions, err = versionsOf(rows); err != nil {
			return err
		}
		trs, err := q.ListSubscriptionTransitions(ctx, pgdb.ListSubscriptionTransitionsParams{TenantID: tenantID, SubscriptionID: id})
		if err != nil {
			return fmt.Errorf("subscription %s: transitions: %w", id, err)
		}
		for _, t := range trs {
			transitions = append(transitions, subscription.Transition{Version: int(t.Version), From: subscription.State(t.FromState),
				To: subscription.State(t.ToState), Actor: t.Actor, Reason: t.Reason, At: t.At})
		}
		return nil
	})
	return versions, transitions, err
}

// Move takes version of subscription id to state to, audited with reason.
// Validating re-checks the version against today's catalog; Approved
// needs an operator who did not write it; Active disables the version
// active before it.
func (s *Subscriptions) Move(ctx context.Context, a process.Actor, id string, version int, to subscription.State, reason string) (subscription.Version, error) {
	id, ok := canonicalID(id)
	if !ok {
		return subscription.Version{}, subscription.ErrNotFound
	}
	var out subscription.Version
	err := s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		if _, err := q.LockSubscription(ctx, pgdb.LockSubscriptionParams{TenantID: a.TenantID, ID: id}); err != nil {
			return fmt.Errorf("lock subscription %s: %w", id, err)
		}
		row, err := q.GetSubscriptionVersionForUpdate(ctx, pgdb.GetSubscriptionVersionForUpdateParams{TenantID: a.TenantID, ID: id, Version: int32(version)})
		if errors.Is(err, pgx.ErrNoRows) {
			return subscription.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("subscription %s v%d: %w", id, version, err)
		}
		v, err := versionOf(row)
		if err != nil {
			return err
		}
		if out, err = s.move(ctx, q, a, v, to, reason); err != nil {
			return err
		}
		return nil
	})
	return out, err
}

func (s *Subscriptions) move(ctx context.Context, q *pgdb.Queries, a process.Actor, v subscription.Version, to subscription.State, reason string) (subscription.Version, error) {
	if !subscription.CanMove(v.State, to) {
		return v, fmt.Errorf("%w: %s → %s", subscription.ErrTransition, v.State, to)
	}
	switch to {
	case subscription.Validating:
		if err := s.check(&v.Spec); err != nil {
			return v, err
		}
	case subscription.Approved:
		if !a.Operator() || a.Subject == v.CreatedBy {
			return v, subscription.ErrFourEyes
		}
	case subscription.Active:
		versions, err := q.ListSubscriptionVersions(ctx, pgdb.ListSubscriptionVersionsParams{TenantID: a.TenantID, ID: v.ID})
		if err != nil {
			return v, err
		}
		for _, other := range versions {
			if other.State == string(subscription.Active) && int(other.Version) != v.Version {
				o, err := versionOf(other)
				if err != nil {
					return v, err
				}
				if _, err := s.move(ctx, q, a, o, subscription.Disabled, "version "+fmt.Sprint(v.Version)+" activated"); err != nil {
					return v, err
				}
			}
		}
	}
	now := s.clock()
	row, err := q.SetSubscriptionState(ctx, pgdb.SetSubscriptionStateParams{TenantID: a.TenantID, ID: v.ID, Version: int32(v.Version),
		State: string(to), UpdatedAt: now})
	if err != nil {
		return v, fmt.Errorf("subscription %s v%d → %s: %w", v.ID, v.Version, to, err)
	}
	if err := q.InsertSubscriptionTransition(ctx, pgdb.InsertSubscriptionTransitionParams{TenantID: a.TenantID, SubscriptionID: v.ID,
		Version: int32(v.Version), FromState: string(v.State), ToState: string(to), Actor: a.Subject, Reason: reason, At: now}); err != nil {
		return v, fmt.Errorf("audit subscription %s v%d → %s: %w", v.ID, v.Version, to, err)
	}
	return versionOf(row)
}

// Rollback reactivates the newest version before the active one (it must
// be DISABLED or APPROVED), disabling the active one; audited with reason.
func (s *Subscriptions) Rollback(ctx context.Context, a process.Actor, id, reason string) (subscription.Version, error) {
	id, ok := canonicalID(id)
	if !ok {
		return subscription.Version{}, subscription.ErrNotFound
	}
	var out subscription.Version
	err := s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		if _, err := q.LockSubscription(ctx, pgdb.LockSubscriptionParams{TenantID: a.TenantID, ID: id}); err != nil {
			return fmt.Errorf("lock subscription %s: %w", id, err)
		}
		rows, err := q.ListSubscriptionVersions(ctx, pgdb.ListSubscriptionVersionsParams{TenantID: a.TenantID, ID: id})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return subscription.ErrNotFound
		}
		active := -1
		for i, r := range rows {
			if r.State == string(subscription.Active) {
				active = i
			}
		}
		if active < 1 {
			return subscription.ErrNoPrevious
		}
		prev, err := versionOf(rows[active-1])
		if err != nil {
			return err
		}
		if prev.State != subscription.Disabled && prev.State != subscription.Approved {
			return fmt.Errorf("%w: version %d is %s", subscription.ErrNoPrevious, prev.Version, prev.State)
		}
		out, err = s.move(ctx, q, a, prev, subscription.Active, "rollback: "+reason)
		return err
	})
	return out, err
}

// Active returns the tenant's active subscriptions to typ.
func (s *Subscriptions) Active(ctx context.Context, tenantID, typ string) ([]subscription.Version, error) {
	out := []subscription.Version{}
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ActiveSubscriptionsFor(ctx, pgdb.ActiveSubscriptionsForParams{TenantID: tenantID, EventType: typ})
		if err != nil {
			return fmt.Errorf("active subscriptions to %s: %w", typ, err)
		}
		out, err = versionsOf(rows)
		return err
	})
	return out, err
}

func versionsOf(rows []pgdb.Subscription) ([]subscription.Version, error) {
	out := make([]subscription.Version, 0, len(rows))
	for _, r := range rows {
		v, err := versionOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func versionOf(r pgdb.Subscription) (subscription.Version, error) {
	v := subscription.Version{ID: r.ID, Version: int(r.Version), State: subscription.State(r.State), CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Spec: subscription.Spec{Name: r.Name, EventTypes: r.EventTypes, Filter: r.Filter}}
	if err := json.Unmarshal(r.Policy, &v.Policy); err != nil {
		return v, fmt.Errorf("subscription %s v%d: policy: %w", r.ID, r.Version, err)
	}
	if err := json.Unmarshal(r.Reaction, &v.Reaction); err != nil {
		return v, fmt.Errorf("subscription %s v%d: reaction: %w", r.ID, r.Version, err)
	}
	if len(r.Agent) > 0 {
		if err := json.Unmarshal(r.Agent, &v.Agent); err != nil {
			return v, fmt.Errorf("subscription %s v%d: agent: %w", r.ID, r.Version, err)
		}
	}
	return v, nil
}
