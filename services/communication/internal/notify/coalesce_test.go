package notify

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestCoalesce(t *testing.T) {
	confirmation := Notice{Template: TemplateConfirmation, Params: map[string]string{"protocol": "AG-1"}}
	status := func(s, at string) Notice {
		return Notice{Template: TemplateStatus, Params: map[string]string{"protocol": "AG-1", "status": s, "changedAt": at}}
	}
	const t1, t2 = "2026-12-01T10:00:01Z", "2026-12-01T10:00:02Z"
	tests := []struct {
		name           string
		earlier, later Notice
		want           Notice
	}{
		{"received, then in progress: one notice of both", confirmation, status("in_progress", t1),
			Notice{TemplateReceivedStatus, map[string]string{"protocol": "AG-1", "status": "in_progress", "changedAt": t1}}},
		{"the change handled before the submission: the same", status("in_progress", t1), confirmation,
			Notice{TemplateReceivedStatus, map[string]string{"protocol": "AG-1", "status": "in_progress", "changedAt": t1}}},
		{"two changes: the latest status only", status("in_progress", t1), status("completed", t2),
			Notice{TemplateStatus, map[string]string{"protocol": "AG-1", "status": "completed", "changedAt": t2}}},
		{"two changes handled out of order: the one that changed last", status("completed", t2), status("in_progress", t1),
			Notice{TemplateStatus, map[string]string{"protocol": "AG-1", "status": "completed", "changedAt": t2}}},
		{"a combined notice and a newer change", Notice{TemplateReceivedStatus, status("in_progress", t1).Params}, status("completed", t2),
			Notice{TemplateReceivedStatus, map[string]string{"protocol": "AG-1", "status": "completed", "changedAt": t2}}},
		{"no changedAt (a command): the later arrival", Notice{TemplateStatus, map[string]string{"status": "approved"}},
			Notice{TemplateStatus, map[string]string{"status": "rejected"}},
			Notice{TemplateStatus, map[string]string{"status": "rejected"}}},
		{"the protocol comes from whichever has it", Notice{TemplateStatus, map[string]string{"status": "in_progress"}}, confirmation,
			Notice{TemplateReceivedStatus, map[string]string{"protocol": "AG-1", "status": "in_progress"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Coalesce(tc.earlier, tc.later)
			if got.Template != tc.want.Template || !maps.Equal(got.Params, tc.want.Params) {
				t.Errorf("Coalesce = %+v, want %+v", got, tc.want)
			}
			if _, _, err := Render(got.Template, got.Params); err != nil {
				t.Errorf("the coalesced notice does not render: %v", err)
			}
		})
	}
}

func TestSupersede(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	confirmation := Notice{Template: TemplateConfirmation, Params: map[string]string{"protocol": "AG-1"}}
	inProgress := Notice{Template: TemplateStatus, Params: map[string]string{"status": "in_progress", "changedAt": "2026-12-01T10:00:01Z"}}
	completed := Notice{Template: TemplateStatus, Params: map[string]string{"status": "completed", "changedAt": "2026-12-01T10:00:05Z"}}
	tests := []struct {
		name         string
		held         []Superseded
		due          time.Time
		wantTemplate string
		wantStatus   string
		wantDue      time.Time
	}{
		{"nothing held: the notice as it is, due when asked", nil, now.Add(3 * time.Second), TemplateStatus, "completed", now.Add(3 * time.Second)},
		{"the earlier due time is kept", []Superseded{{Notice: confirmation, NotBefore: now.Add(time.Second)}},
			now.Add(3 * time.Second), TemplateReceivedStatus, "completed", now.Add(time.Second)},
		{"several held (a race that lost): all folded, the earliest due", []Superseded{
			{Notice: confirmation, NotBefore: now.Add(2 * time.Second)}, {Notice: inProgress, NotBefore: now.Add(time.Second)}},
			now.Add(3 * time.Second), TemplateReceivedStatus, "completed", now.Add(time.Second)},
		{"a later due time (quiet hours) does not postpone", []Superseded{{Notice: inProgress, NotBefore: now.Add(time.Hour)}},
			now.Add(3 * time.Second), TemplateStatus, "completed", now.Add(3 * time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, due := Supersede(tc.held, completed, tc.due)
			if got.Template != tc.wantTemplate || got.Params["status"] != tc.wantStatus || !due.Equal(tc.wantDue) {
				t.Errorf("Supersede = %+v due %v, want %s/%s due %v", got, due, tc.wantTemplate, tc.wantStatus, tc.wantDue)
			}
		})
	}
}

func TestNarrow(t *testing.T) {
	no, yes := false, true
	tests := []struct {
		name     string
		consent  *bool
		template string
		want     string
	}{
		{"combined, consent given", &yes, TemplateReceivedStatus, TemplateReceivedStatus},
		{"combined, consent never set", nil, TemplateReceivedStatus, TemplateReceivedStatus},
		{"combined, consent withdrawn: the confirmation only", &no, TemplateReceivedStatus, TemplateConfirmation},
		{"a status notice is left to Decide", &no, TemplateStatus, TemplateStatus},
	}
	for _, tc := range tests {
		if got := (Contact{ProgressNotices: tc.consent}).Narrow(tc.template); got != tc.want {
			t.Errorf("%s: Narrow(%s) = %s, want %s", tc.name, tc.template, got, tc.want)
		}
	}
}

func TestRenderReceivedStatus(t *testing.T) {
	subject, body, err := Render(TemplateReceivedStatus, map[string]string{"protocol": "AG-1", "status": "in_progress"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"AG-1", "We received your request", "in_progress"} {
		if !strings.Contains(subject+body, want) {
			t.Errorf("%q / %q lacks %q", subject, body, want)
		}
	}
	if _, _, err := Render(TemplateReceivedStatus, map[string]string{"protocol": "AG-1"}); err == nil {
		t.Error("rendered without a status")
	}
}
