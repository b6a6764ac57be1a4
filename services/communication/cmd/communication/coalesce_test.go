package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestStatusNoticesCoalesce: a submission and the move to in progress that
// follows it within the window reach the citizen as one mail that says
// both; a change after that mail went out is a mail of its own; a window
// of 0 sends one mail per notice, as before coalescing; and a status the
// citizen did not consent to is withheld without touching the held
// confirmation, which goes alone.
func TestStatusNoticesCoalesce(t *testing.T) {
	tests := []struct {
		name, window string
		consent      bool
		// wantStatuses are the request's notices once settled, by status.
		wantStatuses map[string]int
		// wantSubjects are the mails about the request, by subject ("%s":
		// the protocol).
		wantSubjects []string
		// wantLater is the subject of the mail about a later change, or
		// empty when none is due.
		wantLater string
	}{
		{name: "within the window: one mail of both", window: "1s", consent: true,
			wantStatuses: map[string]int{"coalesced": 1, "sent": 1},
			wantSubjects: []string{"Request received: protocol %s, now in_progress"},
			wantLater:    "Request %s is now completed"},
		{name: "window 0: one mail each, as before", window: "0", consent: true,
			wantStatuses: map[string]int{"sent": 2},
			wantSubjects: []string{"Request %s is now in_progress", "Request received: protocol %s"},
			wantLater:    "Request %s is now completed"},
		{name: "no consent to progress notices: the confirmation alone", window: "1s", consent: false,
			wantStatuses: map[string]int{"withheld": 1, "sent": 1},
			wantSubjects: []string{"Request received: protocol %s"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t).start(t, map[string]string{"NOTICE_COALESCE_WINDOW": tc.window, "HELD_CHECK_INTERVAL": "100ms"})
			const tenantID, citizen = "org-a", "citizen-eva"
			s.putContact(t, tenantID, citizen, map[string]any{"email": "eva@example.org", "progressNotices": tc.consent})
			requestID, protocol := uuid.NewString(), fmt.Sprintf("AG-2026-4%05d", i)
			s.Publish(t, submittedEvent(t, tenantID, citizen, requestID, protocol))
			s.Publish(t, statusChangedEvent(t, tenantID, citizen, requestID, protocol, "in_progress"))

			got := s.waitSettled(t, tenantID, requestID, 2)
			if statuses := countStatuses(got); !maps.Equal(statuses, tc.wantStatuses) {
				t.Fatalf("notices of the request by status = %v, want %v (%+v)", statuses, tc.wantStatuses, got)
			}
			s.checkMails(t, protocol, got, tc.wantSubjects)
			checkCoalescedInto(t, got)
			if tc.wantLater == "" {
				return
			}

			// The coalesced mail went out: a later change is news of its own.
			s.Publish(t, statusChangedEvent(t, tenantID, citizen, requestID, protocol, "completed"))
			got = s.waitSettled(t, tenantID, requestID, 3)
			s.checkMails(t, protocol, got, append(slices.Clone(tc.wantSubjects), tc.wantLater))
		})
	}
}

// waitSettled waits until requestID has n notifications, none of them
// pending or held: nothing more can be sent for them.
func (s *stack) waitSettled(t *testing.T, tenantID, requestID string, n int) []notification {
	t.Helper()
	var got []notification
	fabrictest.Eventually(t, 20*time.Second, fmt.Sprintf("%d settled notices of %s", n, requestID), func() bool {
		got = s.notifications(t, tenantID, requestID)
		return len(got) == n && !slices.ContainsFunc(got, func(x notification) bool {
			return x.Status == "pending" || x.Status == "held"
		})
	})
	return got
}

// checkMails checks that the mails about protocol are exactly one per
// subject in want, each with the Message-ID of a sent notice of got, and
// that each sent notice announced itself as sent.
func (s *stack) checkMails(t *testing.T, protocol string, got []notification, want []string) {
	t.Helper()
	ids := map[string]bool{}
	for _, n := range got {
		if n.Status == "sent" {
			ids[n.ID] = true
			if st := s.sentStatus(t, n.ID); st != "sent" {
				t.Errorf("notification-sent status of %s = %q, want sent", n.ID, st)
			}
		}
	}
	var subjects, wantSubjects []string
	for _, m := range s.mails(t, protocol) {
		subjects = append(subjects, header(m, "Subject"))
		id := strings.TrimSuffix(strings.TrimPrefix(header(m, "Message-ID"), "<"), "@agora.communication>")
		if !ids[id] {
			t.Errorf("mail %q has Message-ID %q, not one of a sent notice (%v)", header(m, "Subject"), id, ids)
		}
		if !strings.Contains(m, "X-Sink-To: eva@example.org") {
			t.Errorf("mail %q is not to eva@example.org", header(m, "Subject"))
		}
	}
	for _, w := range want {
		wantSubjects = append(wantSubjects, fmt.Sprintf(w, protocol))
	}
	slices.Sort(subjects)
	slices.Sort(wantSubjects)
	if !slices.Equal(subjects, wantSubjects) {
		t.Errorf("mails about %s: %q, want %q", protocol, subjects, wantSubjects)
	}
}

// checkCoalescedInto checks that every coalesced notice names the one that
// was sent in its stead.
func checkCoalescedInto(t *testing.T, got []notification) {
	t.Helper()
	for _, n := range got {
		if n.Status != "coalesced" {
			continue
		}
		i := slices.IndexFunc(got, func(x notification) bool { return x.ID == n.CoalescedInto })
		if i < 0 || got[i].Status != "sent" || got[i].Template != "request-received-status" {
			t.Errorf("coalesced notice %s names %q, want the sent request-received-status notice (%+v)", n.ID, n.CoalescedInto, got)
		}
	}
}

func countStatuses(ns []notification) map[string]int {
	out := map[string]int{}
	for _, n := range ns {
		out[n.Status]++
	}
	return out
}

// header returns the value of the first header name in the mail m.
func header(m, name string) string {
	for line := range strings.SplitSeq(m, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return v
		}
		if line == "" {
			break
		}
	}
	return ""
}
