package process

import (
	"encoding/json"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Producer names this service in envelopes.
const Producer = "workflow-service"

// Event types.
const (
	TypeRequestSubmitted = "request.submitted.v1"
	TypeRequestCancelled = "request.cancelled.v1"
	TypeProcessStarted   = "workflow.process-started.v1"
	TypeTaskCompleted    = "workflow.task-completed.v1"
	TypeProcessCompleted = "workflow.process-completed.v1"
	TypeSLABreached      = "task.sla-breached.v1"
	TypeStuck            = "workflow.stuck.v1"
	TypeScheduleFired    = "workflow.schedule-fired.v1"
	// TypeStart is the command an integration sends to start a process.
	TypeStart = "workflow.start.v1"
	// TypeSEIRegister is the command that registers an approved request in
	// SEI, the public administration's protocol system.
	TypeSEIRegister = "integration.sei.register.v1"
	// TypeReviewOverdue reports an approval or review still open past its
	// due date; TypeIntegrationFailed an external system's operation the
	// workflow gave up on. Monitoring events: the alert rules watch them.
	TypeReviewOverdue     = "workflow.review-overdue.v1"
	TypeIntegrationFailed = "workflow.integration-failed.v1"
)

// Cancelled is what stopping a process needs from request.cancelled.v1.
type Cancelled struct {
	RequestID string
	CitizenID string // who cancelled: the request's citizen
}

// Submitted is what starting a process needs from request.submitted.v1
// or workflow.start.v1.
type Submitted struct {
	RequestID string
	ServiceID string
	CitizenID string
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
	return WithWorkflow(env, p.ID, ""), nil
}

// WithWorkflow marks env as emitted for process processID, at step (a step
// of its definition; "" for the process as a whole): the envelope's
// "workflow" extension, which every consumer's handler reads as its
// workflow context (fabric.ExecutionOf) and readers that do not know it
// keep.
func WithWorkflow(env envelope.Envelope, processID, step string) envelope.Envelope {
	raw, err := json.Marshal(struct {
		ProcessID string `json:"processId"`
		Step      string `json:"step,omitempty"`
	}{processID, step})
	if err != nil {
		return env // two strings always marshal
	}
	ext := make(map[string]json.RawMessage, len(env.Extensions)+1)
	for k, v := range env.Extensions {
		ext[k] = v
	}
	ext["workflow"] = raw
	env.Extensions = ext
	return env
}

// Start is the payload of workflow.start.v1. The catalog's payload package
// has no type for it yet, so it lives here, checked against the schema by
// TestPayloadsMatchTheirSchemas. CitizenID is optional: without it no
// citizen sees the process (staff do).
type Start struct {
	RequestID string `json:"requestId"`
	ServiceID string `json:"serviceId"`
	CitizenID string `json:"citizenId,omitempty"`
}

// SEIRegister is the payload of integration.sei.register.v1 (kept here for
// the same reason as Start). Unit is the SEI unit the request is filed
// under (Definition.SEIUnit); empty leaves it to SEI.
type SEIRegister struct {
	RequestID string `json:"requestId"`
	Unit      string `json:"unit,omitempty"`
}

// ReviewOverdue is the payload of workflow.review-overdue.v1 (the
// catalog's payload package has no type for it).
type ReviewOverdue struct {
	ReviewID            string    `json:"reviewId"`
	DecisionID          string    `json:"decisionId"`
	Kind                string    `json:"kind"`
	Role                string    `json:"role"`
	SubscriptionID      string    `json:"subscriptionId"`
	SubscriptionVersion int       `json:"subscriptionVersion,omitempty"`
	EventID             string    `json:"eventId"`
	EventType           string    `json:"eventType"`
	CreatedAt           time.Time `json:"createdAt"`
	DueAt               time.Time `json:"dueAt"`
}

// IntegrationFailed is the payload of workflow.integration-failed.v1.
type IntegrationFailed struct {
	Integration string `json:"integration"`
	Operation   string `json:"operation"`
	RequestID   string `json:"requestId"`
	Unit        string `json:"unit,omitempty"`
	Failure     string `json:"failure"`
	Reason      string `json:"reason"`
	Attempts    int    `json:"attempts"`
}
