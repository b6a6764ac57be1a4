package payload

import (
	"encoding/json"
	"time"
)

// ProcessStarted is workflow.process-started.v1.
type ProcessStarted struct {
	ProcessID    string `json:"processId"`
	RequestID    string `json:"requestId"`
	DefinitionID string `json:"definitionId"`
	FirstTaskID  string `json:"firstTaskId,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (ProcessStarted) MessageType() string { return "workflow.process-started.v1" }

// TaskCompleted is workflow.task-completed.v1.
type TaskCompleted struct {
	ProcessID   string `json:"processId"`
	TaskID      string `json:"taskId"`
	RequestID   string `json:"requestId"`
	Step        string `json:"step"`
	Outcome     string `json:"outcome,omitempty"`
	CompletedBy string `json:"completedBy,omitempty"`
	// Reason explains the decision (required by the workflow API when the
	// outcome is rejected); at most 1000 characters.
	Reason string `json:"reason,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (TaskCompleted) MessageType() string { return "workflow.task-completed.v1" }

// ProcessCompleted is workflow.process-completed.v1.
type ProcessCompleted struct {
	ProcessID string `json:"processId"`
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"`
}

// MessageType returns the catalog type of the payload.
func (ProcessCompleted) MessageType() string { return "workflow.process-completed.v1" }

// SLABreached is task.sla-breached.v1. RequestID is optional: a task need
// not belong to a citizen's request.
type SLABreached struct {
	TaskID       string    `json:"taskId"`
	ProcessID    string    `json:"processId"`
	RequestID    string    `json:"requestId,omitempty"`
	Step         string    `json:"step,omitempty"`
	AssigneeRole string    `json:"assigneeRole,omitempty"`
	DueAt        time.Time `json:"dueAt"`
}

// MessageType returns the catalog type of the payload.
func (SLABreached) MessageType() string { return "task.sla-breached.v1" }

// Stuck is workflow.stuck.v1: the watchdog found the instance waiting on
// one step (its open task) longer than StuckAfterSeconds.
type Stuck struct {
	ProcessID         string    `json:"processId"`
	RequestID         string    `json:"requestId,omitempty"`
	DefinitionID      string    `json:"definitionId"`
	TaskID            string    `json:"taskId"`
	Step              string    `json:"step"`
	WaitingSince      time.Time `json:"waitingSince"`
	StuckAfterSeconds int64     `json:"stuckAfterSeconds"`
}

// MessageType returns the catalog type of the payload.
func (Stuck) MessageType() string { return "workflow.stuck.v1" }

// ScheduleFired is workflow.schedule-fired.v1: one slot of a tenant's
// schedule. SkippedBefore counts the missed slots its catch-up policy
// dropped in the same sweep.
type ScheduleFired struct {
	ScheduleID    string          `json:"scheduleId"`
	Name          string          `json:"name"`
	Slot          time.Time       `json:"slot"`
	FiredAt       time.Time       `json:"firedAt"`
	Late          bool            `json:"late"`
	SkippedBefore int             `json:"skippedBefore"`
	Payload       json.RawMessage `json:"payload"`
	// Query, RequestID and ServiceID are set only on the events of a
	// schedule with a query: one event per selected entity (the envelope's
	// entity), the request it belongs to and that request's service.
	Query     string `json:"query,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	ServiceID string `json:"serviceId,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (ScheduleFired) MessageType() string { return "workflow.schedule-fired.v1" }
