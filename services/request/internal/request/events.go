package request

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Event types this service publishes and consumes.
const (
	TypeSubmitted        = "request.submitted.v1"
	TypeStatusChanged    = "request.status-changed.v1"
	TypeDocumentUploaded = "document.uploaded.v1"
	TypeProcessStarted   = "workflow.process-started.v1"
	TypeProcessCompleted = "workflow.process-completed.v1"
	TypeSLABreached      = "task.sla-breached.v1"
)

// SubmittedPayload is request.submitted.v1: identifiers only, never the
// contents of the form's fields.
type SubmittedPayload struct {
	RequestID   string    `json:"requestId"`
	Protocol    string    `json:"protocol"`
	ServiceID   string    `json:"serviceId"`
	FormID      string    `json:"formId"`
	FormVersion int       `json:"formVersion"`
	Channel     string    `json:"channel"`
	CitizenID   string    `json:"citizenId"`
	SubmittedAt time.Time `json:"submittedAt"`
	FieldCount  int       `json:"fieldCount"`
}

// SubmittedEvent returns the root envelope announcing r. Its id becomes
// r's correlation id.
func SubmittedEvent(r Request, fieldCount int) (envelope.Envelope, error) {
	return envelope.New(TypeSubmitted, r.TenantID, Producer, SubmittedPayload{
		RequestID: r.ID, Protocol: r.Protocol, ServiceID: r.ServiceID, FormID: r.FormID,
		FormVersion: r.FormVersion, Channel: r.Channel, CitizenID: r.CitizenID,
		SubmittedAt: r.SubmittedAt, FieldCount: fieldCount,
	})
}

// StatusChangedPayload is request.status-changed.v1.
type StatusChangedPayload struct {
	RequestID      string    `json:"requestId"`
	Status         Status    `json:"status"`
	PreviousStatus Status    `json:"previousStatus,omitempty"`
	ServiceID      string    `json:"serviceId,omitempty"`
	Channel        string    `json:"channel,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	ChangedAt      time.Time `json:"changedAt"`
}

// StatusChangedEvent derives request.status-changed.v1 from the workflow
// event that caused it, keeping the conversation's correlation.
func StatusChangedEvent(cause envelope.Envelope, r Request, previous Status) (envelope.Envelope, error) {
	return envelope.Derive(cause, TypeStatusChanged, Producer, StatusChangedPayload{
		RequestID: r.ID, Status: r.Status, PreviousStatus: previous, ServiceID: r.ServiceID,
		Channel: r.Channel, Reason: r.StatusReason, ChangedAt: r.UpdatedAt,
	})
}

// UploadedPayload is document.uploaded.v1: a reference to the object,
// never its bytes.
type UploadedPayload struct {
	DocumentID  string `json:"documentId"`
	RequestID   string `json:"requestId"`
	Bucket      string `json:"bucket"`
	ObjectKey   string `json:"objectKey"`
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
}

// UploadedEvent announces d, correlated with its request's submission.
func UploadedEvent(r Request, d Document) (envelope.Envelope, error) {
	env, err := envelope.New(TypeDocumentUploaded, r.TenantID, Producer, UploadedPayload{
		DocumentID: d.ID, RequestID: d.RequestID, Bucket: d.Bucket, ObjectKey: d.ObjectKey,
		FileName: d.FileName, ContentType: d.ContentType, Size: d.Size, SHA256: d.SHA256,
	})
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
	SLABreached bool
}

// workflowPayload holds the fields of the workflow events this service
// reads; the consumer has already validated each against its schema.
type workflowPayload struct {
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"`
	Step      string `json:"step"`
}

// ChangeFromWorkflow interprets a workflow or task event. ok is false for
// events that do not concern the request's status (they are acked and
// ignored); an error means the payload cannot be read.
func ChangeFromWorkflow(env envelope.Envelope) (c WorkflowChange, ok bool, err error) {
	var p workflowPayload
	switch env.Type {
	case TypeProcessStarted, TypeProcessCompleted, TypeSLABreached:
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return c, false, fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err)
		}
	default:
		return c, false, nil
	}
	if p.RequestID == "" {
		// task.sla-breached.v1 makes requestId optional; without it there
		// is no request to flag.
		return c, false, nil
	}
	c.RequestID = p.RequestID
	switch env.Type {
	case TypeProcessStarted:
		c.Status = StatusInProgress
	case TypeProcessCompleted:
		c.Status, c.Reason = StatusCompleted, "process "+p.Outcome
		if p.Outcome == "rejected" {
			c.Status = StatusRejected
		}
	case TypeSLABreached:
		c.SLABreached = true
	}
	return c, true, nil
}
