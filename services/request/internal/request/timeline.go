package request

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Event types of the process that the timeline records besides the ones
// ChangeFromWorkflow acts on.
const TypeTaskCompleted = "workflow.task-completed.v1"

// Entry is one event in a request's timeline.
type Entry struct {
	EventID    string    `json:"eventId"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurredAt"`
	// Status is the request's status after the event, for status changes.
	Status  Status `json:"status,omitempty"`
	Summary string `json:"summary"`
	// CitizenVisible marks what the citizen is shown: what they did, what
	// happened to their request and its documents. The process's inner
	// steps (tasks, SLA timers) are for staff.
	CitizenVisible bool `json:"citizenVisible"`
}

// EntryOf returns the timeline entry env makes for its request, or
// ok=false for types the timeline does not record. The payload has passed
// its schema; fields read here are the ones every version carries.
func EntryOf(env envelope.Envelope) (e Entry, ok bool, err error) {
	var p struct {
		Protocol, Status, PreviousStatus, Reason string
		FileName, DefinitionID, Step, Outcome    string
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return e, false, fmt.Errorf("timeline: decode %s %s: %w", env.Type, env.ID, err)
	}
	e = Entry{EventID: env.ID, Type: env.Type, OccurredAt: env.OccurredAt.UTC()}
	withReason := func(s string) string {
		if p.Reason != "" {
			return s + ": " + p.Reason
		}
		return s
	}
	switch env.Type {
	case TypeSubmitted:
		e.Status, e.CitizenVisible = StatusSubmitted, true
		e.Summary = "Request submitted, protocol " + p.Protocol
	case TypeStatusChanged:
		e.Status, e.CitizenVisible = Status(p.Status), true
		e.Summary = withReason("Status changed to " + strings.ReplaceAll(p.Status, "_", " "))
	case TypeCancelled:
		e.CitizenVisible = true
		e.Summary = withReason("Cancelled by the citizen")
	case TypeDocumentUploaded:
		e.CitizenVisible = true
		e.Summary = "Document " + p.FileName + " received"
	case TypeProcessStarted:
		e.Summary = "Process " + p.DefinitionID + " started"
	case TypeTaskCompleted:
		e.Summary = "Task " + p.Step + " completed"
		if p.Outcome != "" {
			e.Summary += ": " + p.Outcome
		}
		e.Summary = withReason(e.Summary)
	case TypeSLABreached:
		e.Summary = "SLA of task " + p.Step + " breached"
	case TypeWorkflowStuck:
		// Staff only: the watchdog's finding is for those who can act on it.
		e.Summary = "Process stuck: task " + p.Step + " has waited longer than its definition allows"
	case TypeProcessCompleted:
		e.Summary = "Process completed: " + p.Outcome
	default:
		return Entry{}, false, nil
	}
	return e, true, nil
}

// SubmissionEntry is the entry of r's submission, for requests stored
// before the timeline was (their submission event's id is r's
// correlation id).
func SubmissionEntry(r Request) Entry {
	return Entry{EventID: r.CorrelationID, Type: TypeSubmitted, OccurredAt: r.SubmittedAt, Status: StatusSubmitted,
		Summary: "Request submitted, protocol " + r.Protocol, CitizenVisible: true}
}

// ForActor returns what of entries a may see, in order: everything for
// staff, the citizen-visible entries for the citizen. It adds the
// submission entry when entries lack one.
func ForActor(a Actor, r Request, entries []Entry) []Entry {
	out := make([]Entry, 0, len(entries)+1)
	submitted := false
	for _, e := range entries {
		submitted = submitted || e.Type == TypeSubmitted
	}
	if !submitted {
		out = append(out, SubmissionEntry(r))
	}
	for _, e := range entries {
		if a.Attendant || e.CitizenVisible {
			out = append(out, e)
		}
	}
	return out
}
