package request

import (
	"slices"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

func TestStatusCanMoveTo(t *testing.T) {
	tests := []struct {
		from, to Status
		want     bool
	}{
		{StatusSubmitted, StatusInProgress, true},
		{StatusSubmitted, StatusCompleted, true},
		{StatusInProgress, StatusRejected, true},
		{StatusInProgress, StatusInProgress, false},
		{StatusCompleted, StatusInProgress, false},
		{StatusRejected, StatusCompleted, false},
		{Status("bogus"), StatusCompleted, false},
	}
	for _, tc := range tests {
		if got := tc.from.CanMoveTo(tc.to); got != tc.want {
			t.Errorf("%s.CanMoveTo(%s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestSanitizeFileName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../etc/passwd", "passwd"},
		{`C:\Users\maria\RG frente.jpg`, "RG_frente.jpg"},
		{"endereço.png", "endere_o.png"},
		{"..", "file"},
		{"", "file"},
		{".hidden", "hidden"},
	}
	for _, tc := range tests {
		if got := SanitizeFileName(tc.in); got != tc.want {
			t.Errorf("SanitizeFileName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestChangeFromWorkflow(t *testing.T) {
	const id = "0195f0c8-7b7a-7c1e-9a57-3b1f0e2d4c5a"
	tests := []struct {
		typ, payload string
		want         WorkflowChange
		ok           bool
	}{
		{TypeProcessStarted, `{"processId":"` + id + `","requestId":"` + id + `","definitionId":"d"}`, WorkflowChange{RequestID: id, Status: StatusInProgress}, true},
		{TypeProcessCompleted, `{"processId":"` + id + `","requestId":"` + id + `","outcome":"approved"}`, WorkflowChange{RequestID: id, Status: StatusCompleted, Reason: "process approved"}, true},
		{TypeProcessCompleted, `{"processId":"` + id + `","requestId":"` + id + `","outcome":"rejected"}`, WorkflowChange{RequestID: id, Status: StatusRejected, Reason: "process rejected"}, true},
		{TypeSLABreached, `{"taskId":"` + id + `","processId":"` + id + `","requestId":"` + id + `","dueAt":"2026-01-01T00:00:00Z"}`, WorkflowChange{RequestID: id, SLABreached: true}, true},
		{TypeSLABreached, `{"taskId":"` + id + `","processId":"` + id + `","dueAt":"2026-01-01T00:00:00Z"}`, WorkflowChange{}, false},
		{TypeTaskCompleted, `{"processId":"` + id + `","taskId":"` + id + `","requestId":"` + id + `","step":"review"}`, WorkflowChange{RequestID: id}, true},
		{TypeTaskCompleted, `{}`, WorkflowChange{}, false},
		{TypeWorkflowStuck, `{"processId":"` + id + `","requestId":"` + id + `","definitionId":"d","taskId":"` + id + `","step":"review","waitingSince":"2026-12-01T10:00:00Z","stuckAfterSeconds":60}`, WorkflowChange{RequestID: id}, true},
		{"workflow.task-claimed.v9", `{"requestId":"` + id + `"}`, WorkflowChange{}, false},
	}
	for _, tc := range tests {
		got, ok, err := ChangeFromWorkflow(envelope.Envelope{Type: tc.typ, Payload: []byte(tc.payload)})
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("ChangeFromWorkflow(%s %s) = %+v, %v, %v; want %+v, %v", tc.typ, tc.payload, got, ok, err, tc.want, tc.ok)
		}
	}
}

func TestEntryOf(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		typ, payload string
		want         Entry
		ok           bool
	}{
		{TypeSubmitted, `{"protocol":"2026-000001"}`, Entry{Status: StatusSubmitted, Summary: "Request submitted, protocol 2026-000001", CitizenVisible: true}, true},
		{TypeStatusChanged, `{"status":"in_progress"}`, Entry{Status: StatusInProgress, Summary: "Status changed to in progress", CitizenVisible: true}, true},
		{TypeStatusChanged, `{"status":"completed","reason":"process approved"}`, Entry{Status: StatusCompleted, Summary: "Status changed to completed: process approved", CitizenVisible: true}, true},
		{TypeCancelled, `{"reason":"moved away"}`, Entry{Summary: "Cancelled by the citizen: moved away", CitizenVisible: true}, true},
		{TypeDocumentUploaded, `{"fileName":"rg.pdf"}`, Entry{Summary: "Document rg.pdf received", CitizenVisible: true}, true},
		{TypeProcessStarted, `{"definitionId":"alvara"}`, Entry{Summary: "Process alvara started"}, true},
		{TypeTaskCompleted, `{"step":"review","outcome":"approved"}`, Entry{Summary: "Task review completed: approved"}, true},
		{TypeSLABreached, `{"step":"review"}`, Entry{Summary: "SLA of task review breached"}, true},
		{TypeWorkflowStuck, `{"step":"review"}`, Entry{Summary: "Process stuck: task review has waited longer than its definition allows"}, true},
		{TypeProcessCompleted, `{"outcome":"approved"}`, Entry{Summary: "Process completed: approved"}, true},
		{"communication.notification-sent.v1", `{}`, Entry{}, false},
	}
	for _, tc := range tests {
		got, ok, err := EntryOf(envelope.Envelope{ID: "e1", Type: tc.typ, OccurredAt: at, Payload: []byte(tc.payload)})
		if tc.ok {
			tc.want.EventID, tc.want.Type, tc.want.OccurredAt = "e1", tc.typ, at
		}
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("EntryOf(%s %s) = %+v, %v, %v; want %+v, %v", tc.typ, tc.payload, got, ok, err, tc.want, tc.ok)
		}
	}
	if _, _, err := EntryOf(envelope.Envelope{Type: TypeSubmitted, Payload: []byte(`[`)}); err == nil {
		t.Error("EntryOf of an unreadable payload: no error")
	}
}

func TestForActor(t *testing.T) {
	r := Request{ID: "r1", Protocol: "2026-000007", CorrelationID: "c1", SubmittedAt: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	staffOnly := Entry{EventID: "p", Type: TypeProcessStarted}
	visible := Entry{EventID: "s", Type: TypeStatusChanged, CitizenVisible: true}
	submitted := Entry{EventID: "c1", Type: TypeSubmitted, CitizenVisible: true}
	ids := func(es []Entry) (out []string) {
		for _, e := range es {
			out = append(out, e.EventID)
		}
		return out
	}
	tests := []struct {
		name    string
		a       Actor
		entries []Entry
		want    []string
	}{
		{"citizen sees the visible ones", Actor{}, []Entry{submitted, staffOnly, visible}, []string{"c1", "s"}},
		{"staff see all", Actor{Attendant: true}, []Entry{submitted, staffOnly, visible}, []string{"c1", "p", "s"}},
		{"an old request gets its submission", Actor{}, []Entry{staffOnly, visible}, []string{"c1", "s"}},
		{"nothing recorded yet", Actor{Attendant: true}, nil, []string{"c1"}},
	}
	for _, tc := range tests {
		if got := ids(ForActor(tc.a, r, tc.entries)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
