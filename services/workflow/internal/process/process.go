package process

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Errors the adapters return; httpapi maps them to status codes.
var (
	// ErrNotFound: no such task or process in the caller's tenant.
	ErrNotFound = errors.New("not found")
	// ErrTaskClosed: the task was already completed.
	ErrTaskClosed = errors.New("task already completed")
	// ErrForbidden: the caller lacks the task's assignee role.
	ErrForbidden = errors.New("not the task's assignee role")
	// ErrInvalidOutcome: an outcome that is not one of TaskOutcomes.
	ErrInvalidOutcome = errors.New("invalid outcome")
	// ErrClaimed: the task is claimed by someone else (see ClaimedError).
	ErrClaimed = errors.New("task claimed by someone else")
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

// CheckOutcome returns ErrInvalidOutcome for an unknown task outcome.
func CheckOutcome(o string) error {
	if !slices.Contains(TaskOutcomes, o) {
		return fmt.Errorf("%w %q: want one of done, approved, rejected", ErrInvalidOutcome, o)
	}
	return nil
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
	ID            string     `json:"id"`
	RequestID     string     `json:"requestId"`
	ServiceID     string     `json:"serviceId"`
	DefinitionID  string     `json:"definitionId"`
	Status        string     `json:"status"`
	Outcome       string     `json:"outcome,omitempty"`
	CurrentStep   int        `json:"currentStep"`
	StartedAt     time.Time  `json:"startedAt"`
	CompletedAt   *time.Time `json:"completedAt,omitempty"`
	Tasks         []Task     `json:"tasks"`
	TenantID      string     `json:"-"`
	CitizenID     string     `json:"-"`
	CorrelationID string     `json:"-"`
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
	// Assignee is the subject who claimed the task (kept once completed),
	// empty while nobody holds it.
	Assignee  string     `json:"assignee,omitempty"`
	ClaimedAt *time.Time `json:"claimedAt,omitempty"`
}
