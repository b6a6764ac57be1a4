package request

import (
	"testing"

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
		{"workflow.task-completed.v1", `{}`, WorkflowChange{}, false},
	}
	for _, tc := range tests {
		got, ok, err := ChangeFromWorkflow(envelope.Envelope{Type: tc.typ, Payload: []byte(tc.payload)})
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("ChangeFromWorkflow(%s %s) = %+v, %v, %v; want %+v, %v", tc.typ, tc.payload, got, ok, err, tc.want, tc.ok)
		}
	}
}
