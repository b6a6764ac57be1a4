// Package subscription is the reactive fabric's subscriptions (seed 004
// §17-21, §72-74): a tenant's declaration that events of some types,
// matching a filter, lead through a policy to a reaction. A subscription
// is versioned; each version goes through a lifecycle, every transition
// audited:
//
//	DRAFT → VALIDATING → APPROVED → ACTIVE ⇄ DISABLED → DEPRECATED → REMOVED
//
// VALIDATING is entered only by a version whose filter and policy compile
// against the JSON Schemas of its event types; APPROVED only by an
// operator who did not write the version (four eyes); at most one version
// of a subscription is ACTIVE, and activating one disables the other.
// Rollback reactivates the previous version.
//
// This package is the pure part: the model, its checks and the lifecycle.
package subscription

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/filter"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// State is a version's place in the lifecycle.
type State string

const (
	Draft      State = "DRAFT"
	Validating State = "VALIDATING"
	Approved   State = "APPROVED"
	Active     State = "ACTIVE"
	Disabled   State = "DISABLED"
	Deprecated State = "DEPRECATED"
	Removed    State = "REMOVED"
)

// next lists the transitions the lifecycle allows.
var next = map[State][]State{
	Draft:      {Validating, Removed},
	Validating: {Approved, Draft},
	Approved:   {Active, Deprecated},
	Active:     {Disabled, Deprecated},
	Disabled:   {Active, Deprecated},
	Deprecated: {Removed},
}

// Outcome is a policy's decision (seed 004 §19-21).
type Outcome string

const (
	Allow              Outcome = "ALLOW"
	RequireApproval    Outcome = "REQUIRE_APPROVAL"
	RequireHumanReview Outcome = "REQUIRE_HUMAN_REVIEW"
	Deny               Outcome = "DENY"
)

var outcomes = []Outcome{Allow, RequireApproval, RequireHumanReview, Deny}

// Policy decides what a matching event leads to: the outcome of its first
// rule whose condition (a filter) holds, else Default. The message itself
// never authorizes anything: the policy is the subscription's.
type Policy struct {
	Default Outcome `json:"default"`
	Rules   []Rule  `json:"rules,omitempty"`
}

// Rule is one policy rule.
type Rule struct {
	When    string  `json:"when"`
	Outcome Outcome `json:"outcome"`
}

// Reaction is what an allowed (or approved) match does.
type Reaction struct {
	// Kind: start-workflow (a process of DefinitionID for the event's
	// request), review-task (a task for Role to look at the event),
	// resume-workflow or review-affected-requests.
	Kind         string `json:"kind"`
	DefinitionID string `json:"definitionId,omitempty"`
	Role         string `json:"role,omitempty"`
	// MaxAffected is the blast-radius limit (DefaultMaxAffected when
	// zero): review-affected-requests' open requests; start-workflow's
	// running processes its subscription started.
	MaxAffected int `json:"maxAffected,omitempty"`
	// DueAfter is how long the approvals and reviews its decisions open
	// may stay open before they are reported overdue (a Go duration,
	// MinDueAfter to MaxDueAfter); empty: the service's REVIEW_DUE_AFTER.
	DueAfter string `json:"dueAfter,omitempty"`
}

// The bounds of Reaction.DueAfter.
const (
	MinDueAfter = time.Second
	MaxDueAfter = 90 * 24 * time.Hour
)

// Due returns r's DueAfter, or def when it sets none.
func (r Reaction) Due(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(r.DueAfter); err == nil && r.DueAfter != "" {
		return d
	}
	return def
}

// Limit is the reaction's blast-radius limit.
func (r Reaction) Limit() int {
	if r.MaxAffected > 0 {
		return r.MaxAffected
	}
	return DefaultMaxAffected
}

// Reaction kinds.
const (
	StartWorkflow = "start-workflow"
	ReviewTask    = "review-task"
	// ResumeWorkflow completes the step of the event's request's process
	// that waits for the event's type (a definition step's waitFor).
	ResumeWorkflow = "resume-workflow"
	// ReviewAffectedRequests opens a review for Role on every open request
	// of the event's service (seed 004 §88), behind a blast-radius gate:
	// above MaxAffected requests it needs an operator's approval, and it
	// runs as a job, in batches.
	ReviewAffectedRequests = "review-affected-requests"
)

// DefaultMaxAffected is a mass reaction's blast-radius limit unless its
// subscription sets maxAffected.
const DefaultMaxAffected = 100

// Spec is a version as its author writes it.
type Spec struct {
	Name       string   `json:"name"`
	EventTypes []string `json:"eventTypes"`
	Filter     string   `json:"filter"`
	Policy     Policy   `json:"policy"`
	Reaction   Reaction `json:"reaction"`
	// Agent, when set, decides what no policy rule decides (agent.go).
	Agent *Agent `json:"agent,omitempty"`
}

// Version is one stored version.
type Version struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	Spec
	State     State     `json:"state"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Transition is one audited lifecycle step.
type Transition struct {
	Version int       `json:"version"`
	From    State     `json:"from"`
	To      State     `json:"to"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// Errors.
var (
	ErrInvalid    = fmt.Errorf("%w subscription", fabric.ErrInvalid)
	ErrTransition = fmt.Errorf("%w: transition not allowed", fabric.ErrConflict)
	ErrFourEyes   = errors.New("a version is approved by an operator who did not write it")
	ErrNotFound   = fmt.Errorf("%w: no such subscription or review", fabric.ErrNotFound)
	ErrNoPrevious = fmt.Errorf("%w: no previous version to roll back to", fabric.ErrConflict)
)

// Check validates s as far as it can without running it: the name, event
// types known to reg, a filter and policy rules that compile against
// their schemas, known outcomes and a complete reaction. definitions says
// whether a workflow definition exists.
func (s *Spec) Check(reg *registry.Registry, definitions func(string) bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" || len(s.Name) > 100 {
		return bad("name: 1 to 100 characters")
	}
	if len(s.EventTypes) == 0 || len(s.EventTypes) > 20 {
		return bad("eventTypes: 1 to 20 event types")
	}
	for _, t := range s.EventTypes {
		d, ok := reg.Lookup(t)
		if !ok {
			return bad("eventTypes: %s is not in the catalog", t)
		}
		if d.Kind != registry.KindEvent {
			return bad("eventTypes: %s is a %s; subscriptions react to events", t, d.Kind)
		}
	}
	if _, err := filter.Compile(reg, s.EventTypes, s.Filter); err != nil {
		return fmt.Errorf("%w: filter: %v", ErrInvalid, err)
	}
	if !slices.Contains(outcomes, s.Policy.Default) {
		return bad("policy.default %q: want one of %v", s.Policy.Default, outcomes)
	}
	for i, r := range s.Policy.Rules {
		if !slices.Contains(outcomes, r.Outcome) {
			return bad("policy.rules[%d].outcome %q: want one of %v", i, r.Outcome, outcomes)
		}
		if _, err := filter.Compile(reg, s.EventTypes, r.When); err != nil {
			return fmt.Errorf("%w: policy.rules[%d].when: %v", ErrInvalid, i, err)
		}
	}
	if s.Reaction.DueAfter != "" {
		if d, err := time.ParseDuration(s.Reaction.DueAfter); err != nil || d < MinDueAfter || d > MaxDueAfter {
			return bad("reaction.dueAfter %q: want a duration from %s to %s, like 24h", s.Reaction.DueAfter, MinDueAfter, MaxDueAfter)
		}
	}
	switch s.Reaction.Kind {
	case StartWorkflow:
		if !definitions(s.Reaction.DefinitionID) {
			return bad("reaction.definitionId %q: no such workflow definition", s.Reaction.DefinitionID)
		}
		if s.Reaction.MaxAffected < 0 || s.Reaction.MaxAffected > 100_000 {
			return bad("reaction.maxAffected %d: want 1 to 100000 (0: %d)", s.Reaction.MaxAffected, DefaultMaxAffected)
		}
	case ReviewTask:
		if s.Reaction.Role != "attendant" && s.Reaction.Role != "operator" {
			return bad("reaction.role %q: want attendant or operator", s.Reaction.Role)
		}
	case ReviewAffectedRequests:
		if s.Reaction.Role != "attendant" && s.Reaction.Role != "operator" {
			return bad("reaction.role %q: want attendant or operator", s.Reaction.Role)
		}
		if s.Reaction.MaxAffected < 0 || s.Reaction.MaxAffected > 100_000 {
			return bad("reaction.maxAffected %d: want 1 to 100000 (0: %d)", s.Reaction.MaxAffected, DefaultMaxAffected)
		}
		if _, err := filter.Compile(reg, s.EventTypes, "has(payload.serviceId)"); err != nil {
			return bad("reaction review-affected-requests: every event type must carry payload.serviceId (%v)", err)
		}
	case ResumeWorkflow:
		// The event must say which request's process it resumes.
		if _, err := filter.Compile(reg, s.EventTypes, "has(payload.requestId)"); err != nil {
			return bad("reaction resume-workflow: every event type must carry payload.requestId (%v)", err)
		}
	default:
		return bad("reaction.kind %q: want %s, %s, %s or %s", s.Reaction.Kind, StartWorkflow, ReviewTask, ResumeWorkflow, ReviewAffectedRequests)
	}
	if s.Agent != nil {
		return s.Agent.check(reg, s.EventTypes)
	}
	return nil
}

// CanMove reports whether from → to is a lifecycle transition.
func CanMove(from, to State) bool { return slices.Contains(next[from], to) }

// Emits lists, deterministically, the types a reaction can lead the
// workflow service to emit: a started process emits its lifecycle and
// timers' events (and, approved, its SEI registration command); a review
// task its completion.
func (r Reaction) Emits() []string {
	switch r.Kind {
	case StartWorkflow:
		return []string{"workflow.process-started.v1", "workflow.task-completed.v1", "workflow.process-completed.v1",
			"task.sla-breached.v1", "workflow.stuck.v1", "integration.sei.register.v1"}
	case ReviewTask:
		return []string{"workflow.task-completed.v1", "task.sla-breached.v1", "workflow.stuck.v1"}
	case ReviewAffectedRequests:
		return nil // reviews for people; no event
	case ResumeWorkflow:
		return []string{"workflow.task-completed.v1", "workflow.process-completed.v1", "task.sla-breached.v1",
			"workflow.stuck.v1", "integration.sei.register.v1"}
	}
	return nil
}

// Compiled is a version ready to evaluate events: its filter and policy
// conditions compiled once.
type Compiled struct {
	Version
	filter *filter.Filter
	rules  []*filter.Filter
	// Decision is the agent step's decision schema (nil without one).
	Decision *jsonschema.Schema
}

// Compile prepares v for Evaluate.
func Compile(reg *registry.Registry, v Version) (*Compiled, error) {
	c := &Compiled{Version: v}
	var err error
	if c.filter, err = filter.Compile(reg, v.EventTypes, v.Filter); err != nil {
		return nil, err
	}
	for _, r := range v.Policy.Rules {
		f, err := filter.Compile(reg, v.EventTypes, r.When)
		if err != nil {
			return nil, err
		}
		c.rules = append(c.rules, f)
	}
	if v.Agent != nil {
		if c.Decision, err = CompileDecisionSchema(v.Agent.Schema()); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Evaluate runs the filter on env and, when it holds, the policy: the
// outcome of the first rule whose condition holds (rule is its index),
// else the default (rule -1). An error evaluating anything is returned:
// the caller decides DENY, failing closed.
func (c *Compiled) Evaluate(env envelope.Envelope) (matched bool, outcome Outcome, rule int, err error) {
	if matched, err = c.filter.Match(env); err != nil || !matched {
		return false, "", -1, err
	}
	for i, f := range c.rules {
		ok, err := f.Match(env)
		if err != nil {
			return true, Deny, i, err
		}
		if ok {
			return true, c.Policy.Rules[i].Outcome, i, nil
		}
	}
	return true, c.Policy.Default, -1, nil
}

// Decision is one recorded decision: why the platform did (or did not do)
// something on an event.
type Decision struct {
	ID                  string    `json:"id"`
	EventID             string    `json:"eventId"`
	EventType           string    `json:"eventType"`
	CorrelationID       string    `json:"correlationId"`
	SubscriptionID      string    `json:"subscriptionId"`
	SubscriptionVersion int       `json:"subscriptionVersion"`
	Outcome             Outcome   `json:"outcome"`
	Rule                *int      `json:"rule,omitempty"`
	ActorType           string    `json:"actorType"`
	Actor               string    `json:"actor"`
	Status              string    `json:"status"`
	Detail              string    `json:"detail"`
	ReviewID            string    `json:"reviewId,omitempty"`
	DecidedAt           time.Time `json:"decidedAt"`
	// Reviews are the approval or review the decision opened and what
	// people made of it (an approved approval opens the reaction's review).
	Reviews []Review `json:"reviews,omitempty"`
	// Job is a mass reaction's progress.
	Job *Job `json:"job,omitempty"`
	// Agent is what the agent step did, when it decided (actor AGENT).
	Agent *AgentRecord `json:"agent,omitempty"`
}

// Job is a mass reaction run in batches.
type Job struct {
	ServiceID string `json:"serviceId"`
	Total     int    `json:"total"`
	Done      int    `json:"done"`
	Status    string `json:"status"` // running | done
	// Outcomes counts, by outcome, what the agent step decided about each
	// request so far, when the subscription's agent step decides per
	// request.
	Outcomes map[Outcome]int `json:"outcomes,omitempty"`
}

// Decision statuses.
const (
	StatusExecuted        = "executed"
	StatusPendingApproval = "pending-approval"
	StatusPendingReview   = "pending-review"
	StatusDenied          = "denied"
	StatusNotRun          = "not-run"
	StatusError           = "error"
	// StatusWaiting: a resume kept until the step it is for opens.
	StatusWaiting = "waiting"
	// StatusLoopStopped: the reaction would emit deeper in the causation
	// chain than the fabric lets any message go (a reaction loop).
	StatusLoopStopped = "loop-stopped"
)

// Review is an approval or review a decision left for people.
type Review struct {
	ID         string     `json:"id"`
	DecisionID string     `json:"decisionId"`
	Kind       string     `json:"kind"` // approval | review
	Role       string     `json:"role"`
	Status     string     `json:"status"` // open | resolved
	CreatedAt  time.Time  `json:"createdAt"`
	Resolution string     `json:"resolution,omitempty"` // approved | rejected
	ResolvedBy string     `json:"resolvedBy,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
	// Follows is the approval whose approval opened this review.
	Follows string `json:"follows,omitempty"`
	// RequestID is the request a mass reaction's review is about.
	RequestID string `json:"requestId,omitempty"`
	// Note is what the approver should know (a blast-radius estimate, an
	// agent's proposal).
	Note string `json:"note,omitempty"`
	// DueAt is when it becomes overdue; OverdueAt when it was reported so
	// (workflow.review-overdue.v1).
	DueAt     *time.Time `json:"dueAt,omitempty"`
	OverdueAt *time.Time `json:"overdueAt,omitempty"`
	// Agent is the agent step's decision and the passages it cited, for
	// the person who resolves a review an agent's decision opened.
	Agent *AgentRecord `json:"agent,omitempty"`
}

// Errors of resolving a review.
var (
	ErrReviewClosed = fmt.Errorf("%w: the review is already resolved", fabric.ErrConflict)
	ErrNotYourRole  = errors.New("the review is for another role")
)
