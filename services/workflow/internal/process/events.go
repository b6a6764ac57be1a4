package process

import (
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Producer names this service in envelopes.
const Producer = "workflow-service"

// Event types.
const (
	TypeRequestSubmitted = "request.submitted.v1"
	TypeProcessStarted   = "workflow.process-started.v1"
	TypeTaskCompleted    = "workflow.task-completed.v1"
	TypeProcessCompleted = "workflow.process-completed.v1"
	TypeSLABreached      = "task.sla-breached.v1"
)

// Submitted is the part of request.submitted.v1 a process needs.
type Submitted struct {
	RequestID string `json:"requestId"`
	ServiceID string `json:"serviceId"`
	CitizenID string `json:"citizenId"`
}

// ProcessStarted is workflow.process-started.v1.
type ProcessStarted struct {
	ProcessID    string `json:"processId"`
	RequestID    string `json:"requestId"`
	DefinitionID string `json:"definitionId"`
	FirstTaskID  string `json:"firstTaskId,omitempty"`
}

// TaskCompleted is workflow.task-completed.v1.
type TaskCompleted struct {
	ProcessID   string `json:"processId"`
	TaskID      string `json:"taskId"`
	RequestID   string `json:"requestId"`
	Step        string `json:"step"`
	Outcome     string `json:"outcome,omitempty"`
	CompletedBy string `json:"completedBy,omitempty"`
}

// ProcessCompleted is workflow.process-completed.v1.
type ProcessCompleted struct {
	ProcessID string `json:"processId"`
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"`
}

// SLABreached is task.sla-breached.v1.
type SLABreached struct {
	TaskID       string    `json:"taskId"`
	ProcessID    string    `json:"processId"`
	RequestID    string    `json:"requestId,omitempty"`
	Step         string    `json:"step,omitempty"`
	AssigneeRole string    `json:"assigneeRole,omitempty"`
	DueAt        time.Time `json:"dueAt"`
}

// Event returns an envelope about instance p that has no triggering
// message (an HTTP call, a timer): a new causation root that keeps the
// process's correlation id, so the whole conversation stays linked.
func Event(p Instance, typ string, payload any) (envelope.Envelope, error) {
	env, err := envelope.New(typ, p.TenantID, Producer, payload)
	if err != nil {
		return env, err
	}
	if p.CorrelationID != "" {
		env.CorrelationID = p.CorrelationID
	}
	return env, nil
}
