package request

import (
	"encoding/json"
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Event types this service publishes and consumes.
const (
	TypeSubmitted        = "request.submitted.v1"
	TypeStatusChanged    = "request.status-changed.v1"
	TypeCancelled        = "request.cancelled.v1"
	TypeDocumentUploaded = "document.uploaded.v1"
	TypeProcessStarted   = "workflow.process-started.v1"
	TypeProcessCompleted = "workflow.process-completed.v1"
	TypeSLABreached      = "task.sla-breached.v1"
	TypeWorkflowStuck    = "workflow.stuck.v1"
	// Commands this service sends.
	TypeStartWorkflow   = "workflow.start.v1"
	TypeProcessDocument = "document.process.v1"
)

// SubmittedEvent returns the root envelope announcing r. Its id becomes
// r's correlation id.
func SubmittedEvent(r Request, fieldCount int) (envelope.Envelope, error) {
	return envelope.New(TypeSubmitted, r.TenantID, Producer, payload.RequestSubmitted{
		RequestID: r.ID, Protocol: r.Protocol, ServiceID: r.ServiceID, FormID: r.FormID,
		FormVersion: r.FormVersion, Channel: enum.Of(payload.Channel(r.Channel)), CitizenID: r.CitizenID,
		SubmittedAt: r.SubmittedAt, FieldCount: fieldCount,
	})
}

// StatusChangedEvent derives request.status-changed.v1 from the workflow
// event that caused it, keeping the conversation's correlation.
func StatusChangedEvent(cause envelope.Envelope, r Request, previous Status) (envelope.Envelope, error) {
	return envelope.Derive(cause, TypeStatusChanged, Producer, payload.RequestStatusChanged{
		RequestID: r.ID, Status: string(r.Status), PreviousStatus: string(previous), ServiceID: r.ServiceID,
		Channel: r.Channel, Reason: r.StatusReason, CitizenID: r.CitizenID, Protocol: r.Protocol, ChangedAt: r.UpdatedAt,
	})
}

// CancelledEvent announces that by cancelled r (now cancelled, updated at
// the moment of cancellation), correlated with its submission.
func CancelledEvent(r Request, previous Status, by string) (envelope.Envelope, error) {
	return inConversation(r, TypeCancelled, payload.RequestCancelled{
		RequestID: r.ID, PreviousStatus: string(previous), CancelledBy: by, Reason: r.StatusReason, CancelledAt: r.UpdatedAt,
	})
}

// UploadedEvent announces d, correlated with its request's submission.
func UploadedEvent(r Request, d Document) (envelope.Envelope, error) {
	return inConversation(r, TypeDocumentUploaded, payload.DocumentUploaded{
		DocumentID: d.ID, RequestID: d.RequestID, Bucket: d.Bucket, ObjectKey: d.ObjectKey,
		FileName: d.FileName, ContentType: d.ContentType, Size: d.Size, SHA256: d.SHA256,
	})
}

// startWorkflow is workflow.start.v1.
type startWorkflow struct {
	RequestID string `json:"requestId"`
	ServiceID string `json:"serviceId"`
	// CitizenID lets the citizen see the process the command starts.
	CitizenID string `json:"citizenId,omitempty"`
}

// StartWorkflowCommand asks the workflow to start r's process (it starts at
// most one per request), in r's conversation.
func StartWorkflowCommand(r Request) (envelope.Envelope, error) {
	return inConversation(r, TypeStartWorkflow, startWorkflow{RequestID: r.ID, ServiceID: r.ServiceID, CitizenID: r.CitizenID})
}

// ProcessDocumentCommand asks the document worker to process d, a document
// of r, again.
func ProcessDocumentCommand(r Request, d Document) (envelope.Envelope, error) {
	return inConversation(r, TypeProcessDocument, payload.ProcessDocument{DocumentID: d.ID})
}

// inConversation returns a new envelope of typ about r, correlated with
// its submission.
func inConversation(r Request, typ string, p any) (envelope.Envelope, error) {
	env, err := envelope.New(typ, r.TenantID, Producer, p)
	if err != nil {
		return env, err
	}
	if r.CorrelationID != "" {
		env.CorrelationID = r.CorrelationID
	}
	return env, nil
}

// WorkflowChange is what a workflow event means for a request.
type WorkflowChange struct {
	RequestID string
	// Status is the status to move to; empty when the event changes none.
	Status Status
	Reason string
	// SLABreached marks that a task of the request's process missed its SLA.
	// A change with neither status nor breach is only recorded in the
	// request's timeline.
	SLABreached bool
}

// ChangeFromWorkflow interprets a workflow or task event. ok is false for
// events that do not concern the request's status (they are acked and
// ignored); an error means the payload cannot be read. The consumer has
// already validated each payload against its schema.
func ChangeFromWorkflow(env envelope.Envelope) (c WorkflowChange, ok bool, err error) {
	decode := func(p any) error {
		if err := json.Unmarshal(env.Payload, p); err != nil {
			return fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err)
		}
		return nil
	}
	switch env.Type {
	case TypeProcessStarted:
		var p payload.ProcessStarted
		if err := decode(&p); err != nil {
			return c, false, err
		}
		c.RequestID, c.Status = p.RequestID, StatusInProgress
	case TypeProcessCompleted:
		var p payload.ProcessCompleted
		if err := decode(&p); err != nil {
			return c, false, err
		}
		c.RequestID, c.Status, c.Reason = p.RequestID, StatusCompleted, "process "+p.Outcome
		if p.Outcome == "rejected" {
			c.Status = StatusRejected
		}
	case TypeTaskCompleted:
		// No status moves, but the request's timeline records it.
		var p payload.TaskCompleted
		if err := decode(&p); err != nil {
			return c, false, err
		}
		c.RequestID = p.RequestID
	case TypeWorkflowStuck:
		// The watchdog (workflow.stuck.v1): no status moves; the request's
		// timeline records it for staff.
		var p payload.Stuck
		if err := decode(&p); err != nil {
			return c, false, err
		}
		c.RequestID = p.RequestID
	case TypeSLABreached:
		var p payload.SLABreached
		if err := decode(&p); err != nil {
			return c, false, err
		}
		c.RequestID, c.SLABreached = p.RequestID, true
	default:
		return c, false, nil
	}
	if c.RequestID == "" {
		// task.sla-breached.v1 makes requestId optional; without it there
		// is no request to flag.
		return WorkflowChange{}, false, nil
	}
	return c, true, nil
}
