package payload

import (
	"time"

	"github.com/agora-platform/agora/pkg/fabric/enum"
)

// RequestSubmitted is request.submitted.v1: identifiers only, never the
// contents of the form's fields.
type RequestSubmitted struct {
	RequestID   string             `json:"requestId"`
	Protocol    string             `json:"protocol"`
	ServiceID   string             `json:"serviceId"`
	FormID      string             `json:"formId"`
	FormVersion int                `json:"formVersion"`
	Channel     enum.Open[Channel] `json:"channel"`
	CitizenID   string             `json:"citizenId"`
	SubmittedAt time.Time          `json:"submittedAt"`
	// FieldCount is optional in v1 (older producers leave it out), but 0
	// is a count, so it is always sent.
	FieldCount int `json:"fieldCount"`
}

// MessageType returns the catalog type of the payload.
func (RequestSubmitted) MessageType() string { return "request.submitted.v1" }

// Channel is where a request came in: an extensible enumeration, so
// producers may add channels without a new contract version.
type Channel string

// Known reports whether c is a channel this build was written for.
func (c Channel) Known() bool {
	switch c {
	case "web", "app", "whatsapp", "counter", "phone", "api":
		return true
	}
	return false
}

// RequestCancelled is request.cancelled.v1.
type RequestCancelled struct {
	RequestID      string    `json:"requestId"`
	PreviousStatus string    `json:"previousStatus"`
	CancelledBy    string    `json:"cancelledBy"` // the citizen's subject
	Reason         string    `json:"reason,omitempty"`
	CancelledAt    time.Time `json:"cancelledAt"`
}

// MessageType returns the catalog type of the payload.
func (RequestCancelled) MessageType() string { return "request.cancelled.v1" }

// RequestStatusChanged is request.status-changed.v1.
type RequestStatusChanged struct {
	RequestID      string `json:"requestId"`
	Status         string `json:"status"`
	PreviousStatus string `json:"previousStatus,omitempty"`
	ServiceID      string `json:"serviceId,omitempty"`
	Channel        string `json:"channel,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// CitizenID and Protocol (added compatibly) let the communication
	// service tell the citizen; producers before them leave them out.
	CitizenID string    `json:"citizenId,omitempty"`
	Protocol  string    `json:"protocol,omitempty"`
	ChangedAt time.Time `json:"changedAt"`
}

// MessageType returns the catalog type of the payload.
func (RequestStatusChanged) MessageType() string { return "request.status-changed.v1" }
