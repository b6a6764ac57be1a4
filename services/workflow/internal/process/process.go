package process

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agora-platform/agora/pkg/fabric"
)

// Errors the adapters return. Those of the fabric's kinds carry their
// status and class; httpapi adds what the client should know of the
// others (which field, who holds the claim).
var (
	// ErrNotFound: no such task or process in the caller's tenant.
	ErrNotFound = fmt.Errorf("%w: no such task or process", fabric.ErrNotFound)
	// ErrTaskClosed: the task was already completed.
	ErrTaskClosed = fmt.Errorf("%w: the task is already completed", fabric.ErrConflict)
	// ErrForbidden: the caller lacks the task's assignee role.
	ErrForbidden = errors.New("not the task's assignee role")
	// ErrInvalidOutcome: an outcome that is not one of TaskOutcomes.
	ErrInvalidOutcome = fmt.Errorf("%w outcome", fabric.ErrInvalid)
	// ErrClaimed: the task is claimed by someone else (see ClaimedError).
	ErrClaimed = fmt.Errorf("%w: the task is claimed by someone else", fabric.ErrConflict)
	// ErrInvalidReason: a rejection without a reason, or a reason longer
	// than MaxReasonLen.
	ErrInvalidReason = fmt.Errorf("%w reason", fabric.ErrInvalid)
)

// ClaimedError is ErrClaimed with the subject who holds the claim.
type ClaimedError struct{ Assignee string }

func (e *ClaimedError) Error() string { return "task claimed by " + e.Assignee }

// Is makes errors.Is(err, ErrClaimed) hold.
func (e *ClaimedError) Is(target error) bool { return target == ErrClaimed }

// Process outcomes (workflow.process-completed.v1).
const (
	OutcomeApproved  = "approved"
	OutcomeRejected  = "rejected"
	OutcomeCompleted = "completed"
)

// TaskOutcomes are what an assignee may decide; empty means "done".
var TaskOutcomes = []string{"", "done", OutcomeApproved, OutcomeRejected}

// MaxReasonLen is the most characters (not bytes) a decision's reason may
// have; the catalog's workflow.task-completed.v1 schema says the same.
const MaxReasonLen = 1000

// Decision is what an assignee decides when completing a task: an outcome
// (one of TaskOutcomes) and why.
type Decision struct {
	Outcome string
	// Reason explains the decision: required for a rejection (the citizen
	// and SEI are told why), optional otherwise.
	Reason string
}

// Check normalises d (the reason without surrounding blanks) and returns
// ErrInvalidOutcome for an unknown outcome, then ErrInvalidReason for a
// rejection without a reason or a reason over MaxReasonLen characters.
func (d Decision) Check() (Decision, error) {
	if !slices.Contains(TaskOutcomes, d.Outcome) {
		return d, fmt.Errorf("%w %q: want one of done, approved, rejected", ErrInvalidOutcome, d.Outcome)
	}
	d.Reason = strings.TrimSpace(d.Reason)
	switch {
	case d.Outcome == OutcomeRejected && d.Reason == "":
		return d, fmt.Errorf("%w: a rejection needs a reason", ErrInvalidReason)
	case utf8.RuneCountInString(d.Reason) > MaxReasonLen:
		return d, fmt.Errorf("%w: at most %d characters", ErrInvalidReason, MaxReasonLen)
	}
	return d, nil
}

// Advance says what follows completing step (an index of d.Steps) with
// outcome: a rejection ends the process at once as rejected; the last step
// ends it as approved (if approved) or completed; otherwise the next step
// opens.
func (d Definition) Advance(step int, outcome string) (next int, done bool, processOutcome string) {
	switch {
	case outcome == OutcomeRejected:
		return step, true, OutcomeRejected
	case step >= len(d.Steps)-1 && outcome == OutcomeApproved:
		return step, true, OutcomeApproved
	case step >= len(d.Steps)-1:
		return step, true, OutcomeCompleted
	}
	return step + 1, false, ""
}

// Actor is the authenticated caller.
type Actor struct {
	TenantID string
	Subject  string
	Roles    []string
}

// Staff reports whether the actor works for the tenant (sees all processes).
func (a Actor) Staff() bool {
	return slices.Contains(a.Roles, "attendant") || slices.Contains(a.Roles, "operator")
}

// MayComplete reports whether a may complete a task assigned to role:
// holders of the role, and operators (who supervise every queue).
func (a Actor) MayComplete(role string) bool {
	return slices.Contains(a.Roles, role) || slices.Contains(a.Roles, "operator")
}

// Operator reports whether a supervises every queue of the tenant.
func (a Actor) Operator() bool { return slices.Contains(a.Roles, "operator") }

// VisibleRoles are the assignee roles of the tasks a may see on the
// worklist: nil (every role) for an operator, a's own roles otherwise.
func (a Actor) VisibleRoles() []string {
	if a.Operator() {
		return nil
	}
	return a.Roles
}

// Instance is a running or finished process.
type Instance struct {
	ID           string     `json:"id"`
	RequestID    string     `json:"requestId"`
	ServiceID    string     `json:"serviceId"`
	DefinitionID string     `json:"definitionId"`
	Status       string     `json:"status"`
	Outcome      string     `json:"outcome,omitempty"`
	CurrentStep  int        `json:"currentStep"`
	StartedAt    time.Time  `json:"startedAt"`
	CompletedAt  *time.Time `json:"completedAt,omitempty"`
	Tasks        []Task     `json:"tasks"`
	// SEI is the request's registration in SEI, once the process was
	// approved; nil before.
	SEI           *SEIRegistration `json:"seiRegistration,omitempty"`
	TenantID      string           `json:"-"`
	CitizenID     string           `json:"-"`
	CorrelationID string           `json:"-"`
}

// Task is one step's work item.
type Task struct {
	ID           string     `json:"id"`
	ProcessID    string     `json:"processId"`
	StepIndex    int        `json:"stepIndex"`
	Step         string     `json:"step"`
	AssigneeRole string     `json:"assigneeRole"`
	Status       string     `json:"status"`
	Outcome      string     `json:"outcome,omitempty"`
	DueAt        time.Time  `json:"dueAt"`
	SLABreached  bool       `json:"slaBreached"`
	BreachedAt   *time.Time `json:"breachedAt,omitempty"`
	CreatedAt    time.Time  `json:"createdAt"`
	CompletedAt  *time.Time `json:"completedAt,omitempty"`
	CompletedBy  string     `json:"completedBy,omitempty"`
	// Reason is why the task was decided as it was (see Decision).
	Reason string `json:"reason,omitempty"`
	// Assignee is the subject who claimed the task (kept once completed),
	// empty while nobody holds it.
	Assignee  string     `json:"assignee,omitempty"`
	ClaimedAt *time.Time `json:"claimedAt,omitempty"`
}

// SEI registration statuses.
const (
	// SEIPending: the registration is enqueued or being retried.
	SEIPending = "pending"
	// SEIRegistered: SEI gave the request a number.
	SEIRegistered = "registered"
	// SEIRejected: SEI refused it; a human has to look (the command is
	// dead-lettered, LastError says why).
	SEIRejected = "rejected"
)

// SEIRegistration is where a request's registration in SEI stands.
type SEIRegistration struct {
	Status string `json:"status"`
	// Number is the process number SEI assigned (registered only).
	Number string `json:"seiNumber,omitempty"`
	Unit   string `json:"unit,omitempty"`
	// Attempts counts calls to SEI so far.
	Attempts int `json:"attempts"`
	// LastError is the last failure, or SEI's reason for a rejection. Only
	// staff see it.
	LastError    string     `json:"lastError,omitempty"`
	RegisteredAt *time.Time `json:"registeredAt,omitempty"`
	UpdatedAt    time.Time  `json:"updatedAt"`
}

// SEIResult is the outcome of one call to SEI, to be recorded.
type SEIResult struct {
	Status string // SEIRegistered, SEIRejected, or SEIPending (a failure worth retrying)
	Number string // when registered
	Error  string // when not registered
}
