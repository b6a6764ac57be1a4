package process

import "github.com/agora-platform/agora/pkg/fabric/envelope"

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
)

// Submitted is what a process needs of a submitted request (read from
// request.submitted.v1).
type Cancelled struct {
	RequestID string
	CitizenID string // who cancelled: the request's citizen
}

// Submitted is what starting a process needs from request.submitted.v1.
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
	return env, nil
}
