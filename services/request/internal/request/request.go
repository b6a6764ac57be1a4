// Package request is the request service's domain: citizen requests, their
// status life cycle, attached documents, who may see them, and the events
// they produce. It knows nothing of Postgres, RabbitMQ or HTTP.
package request

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
)

// Producer names this service in envelopes.
const Producer = "request-service"

// Errors the adapters and the service return. Those of the fabric's kinds
// carry their HTTP status and failure class themselves; httpapi maps the
// others in one place.
var (
	// ErrNotFound: no such request, or the caller may not see it (the two
	// are indistinguishable on purpose, so existence does not leak).
	ErrNotFound = fmt.Errorf("%w: no such request", fabric.ErrNotFound)
	// ErrIdempotencyConflict: an Idempotency-Key was reused with another body.
	ErrIdempotencyConflict = fmt.Errorf("%w: this Idempotency-Key was used with a different body", fabric.ErrConflict)
	// ErrTooLarge: an upload exceeded the size limit.
	ErrTooLarge = errors.New("too large")
	// ErrNotCancellable: the request is completed or rejected.
	ErrNotCancellable = fmt.Errorf("%w: the request is already decided and can no longer be cancelled", fabric.ErrConflict)
)

// MaxReasonLength bounds a cancellation's reason (request.cancelled.v1).
const MaxReasonLength = 500

// Cancellable reports whether a request in s may be cancelled by its
// citizen: while it is submitted or in progress, before a decision.
func (s Status) Cancellable() bool { return s == StatusSubmitted || s == StatusInProgress }

// ValidationError lists the invalid fields of a submission (422).
type ValidationError struct {
	Fields map[string]string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid submission: %d field(s)", len(e.Fields))
}

// Status is where a request stands, as the citizen sees it.
type Status string

// Statuses (request.status-changed.v1 enumerates the same).
const (
	StatusSubmitted  Status = "submitted"
	StatusInProgress Status = "in_progress"
	StatusCompleted  Status = "completed"
	StatusRejected   Status = "rejected"
	StatusCancelled  Status = "cancelled"
)

// rank orders statuses: workflow events may arrive out of order (retries,
// concurrent handlers), and a request never moves backwards.
func (s Status) rank() int {
	switch s {
	case StatusSubmitted:
		return 0
	case StatusInProgress:
		return 1
	case StatusCompleted, StatusRejected, StatusCancelled:
		return 2
	}
	return -1
}

// Known reports whether s is one of the statuses above.
func (s Status) Known() bool { return s.rank() >= 0 }

// CanMoveTo reports whether a request in s may move to next: only forward,
// and never out of a final status.
func (s Status) CanMoveTo(next Status) bool {
	return next.rank() > s.rank() && s.rank() >= 0
}

// Channels a request may arrive through (request.submitted.v1).
var Channels = []string{"web", "app", "whatsapp", "counter", "phone", "api"}

// Limits of a submission.
const (
	MaxFields     = 200
	maxIDLength   = 100
	maxFormVesion = 1_000_000
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Submission is what a citizen sends.
type Submission struct {
	ServiceID   string         `json:"serviceId"`
	FormID      string         `json:"formId"`
	FormVersion int            `json:"formVersion"`
	Channel     string         `json:"channel"`
	Fields      map[string]any `json:"fields"`
}

// Validate returns a *ValidationError naming every invalid field, or nil.
func (s Submission) Validate() error {
	bad := map[string]string{}
	checkID := func(name, v string) {
		switch {
		case v == "":
			bad[name] = "is required"
		case len(v) > maxIDLength:
			bad[name] = fmt.Sprintf("is longer than %d characters", maxIDLength)
		case !idPattern.MatchString(v):
			bad[name] = "may hold letters, digits, '.', '_' and '-' only"
		}
	}
	checkID("serviceId", s.ServiceID)
	checkID("formId", s.FormID)
	if s.FormVersion < 1 || s.FormVersion > maxFormVesion {
		bad["formVersion"] = "must be a positive integer"
	}
	if !slices.Contains(Channels, s.Channel) {
		bad["channel"] = fmt.Sprintf("must be one of %v", Channels)
	}
	switch {
	case s.Fields == nil:
		bad["fields"] = "is required (an object)"
	case len(s.Fields) > MaxFields:
		bad["fields"] = fmt.Sprintf("has more than %d entries", MaxFields)
	}
	for k := range s.Fields {
		if k == "" || len(k) > maxIDLength {
			bad["fields"] = fmt.Sprintf("field names must have 1 to %d characters", maxIDLength)
			break
		}
	}
	if len(bad) > 0 {
		return &ValidationError{Fields: bad}
	}
	return nil
}

// Hash identifies the submission's content for Idempotency-Key checks:
// the canonical JSON (object keys sorted) so key order and whitespace of
// the original body do not matter.
func (s Submission) Hash() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("hash submission: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Actor is the authenticated caller.
type Actor struct {
	TenantID  string
	Subject   string
	Attendant bool // attendants (and operators) see every request of their tenant
}

// Page asks for one page of a listing, newest first: a citizen's own
// requests, or, for staff, every request of their tenant.
type Page struct {
	Status Status    // "" for any status
	Limit  int       // rows on the page
	After  *Position // where the previous page ended; nil for the first
}

// Position is a place in the newest-first order: ties in submission time
// are broken by id, so every request has exactly one place.
type Position struct {
	SubmittedAt time.Time
	ID          string
}

// Request is a stored citizen request.
type Request struct {
	ID            string
	TenantID      string
	Protocol      string
	CitizenID     string
	ServiceID     string
	FormID        string
	FormVersion   int
	Channel       string
	Fields        json.RawMessage
	Status        Status
	StatusReason  string
	SLABreachedAt *time.Time
	CorrelationID string
	SubmittedAt   time.Time
	UpdatedAt     time.Time
}

// VisibleTo reports whether a may see r: attendants of the tenant, or the
// citizen who submitted it.
func (r Request) VisibleTo(a Actor) bool {
	return r.TenantID == a.TenantID && (a.Attendant || r.CitizenID == a.Subject)
}

// Receipt is the answer to a submission, replayed verbatim for a repeated
// Idempotency-Key.
type Receipt struct {
	ID          string    `json:"id"`
	Protocol    string    `json:"protocol"`
	Status      Status    `json:"status"`
	SubmittedAt time.Time `json:"submittedAt"`
}

// Protocol formats the n-th protocol number of a tenant in year.
func Protocol(year int, n int64) string {
	return fmt.Sprintf("AGR-%d-%06d", year, n)
}

// Document is a file attached to a request; its bytes live in object
// storage under the tenant's prefix.
type Document struct {
	ID          string    `json:"id"`
	RequestID   string    `json:"requestId"`
	Bucket      string    `json:"bucket"`
	ObjectKey   string    `json:"objectKey"`
	FileName    string    `json:"fileName"`
	ContentType string    `json:"contentType"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	UploadedBy  string    `json:"uploadedBy"`
	UploadedAt  time.Time `json:"uploadedAt"`
}
