package process

import "time"

// Task statuses.
const (
	StatusOpen      = "open"
	StatusCompleted = "completed"
)

// TaskStatuses are the statuses a task can have.
var TaskStatuses = []string{StatusOpen, StatusCompleted}

// SLA states of a task on the worklist.
const (
	// SLABreached: the SLA watcher marked the task breached (Task.SLABreached).
	SLABreached = "breached"
	// SLADueSoon: open, not marked breached, due within the due-soon window
	// (an overdue task the watcher has not swept yet included).
	SLADueSoon = "due_soon"
	// SLAOnTime: everything else (a task completed without a breach too).
	SLAOnTime = "on_time"
)

// SLAStates are the values of WorkItem.SLAState.
var SLAStates = []string{SLAOnTime, SLADueSoon, SLABreached}

// DefaultDueSoon is the default due-soon window (SLA_DUE_SOON).
const DefaultDueSoon = 4 * time.Hour

// DefaultStuckAfter is the watchdog's default threshold
// (WATCHDOG_STUCK_AFTER): three days on one step.
const DefaultStuckAfter = 72 * time.Hour

// Position is a place in the worklist's order (due date, then id): the
// last item of a page.
type Position struct {
	DueAt time.Time
	ID    string
}

// TaskQuery selects a page of the worklist. Empty strings filter nothing.
type TaskQuery struct {
	Status   string // one of TaskStatuses
	Role     string // an assignee role (AssigneeRoles)
	Assignee string // the subject who claimed the task
	SLA      string // one of SLAStates
	After    *Position
	Limit    int
}

// WorkItem is a task on the worklist, with what an attendant needs to
// pick it up.
type WorkItem struct {
	Task
	RequestID string `json:"requestId"`
	ServiceID string `json:"serviceId"`
	SLAState  string `json:"slaState"`
}
