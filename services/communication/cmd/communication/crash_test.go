package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/services/communication/internal/messaging"
)

// The crash tests run the service in a process of its own, the test binary
// again (TestMain), which dies at a fault point with os.Exit: a real
// crash, with no deferred cleanup, no ack and no rollback but the one the
// database and the broker do for a client that is gone.
const (
	// envCrash makes the spawned service exit at messaging.FaultAccepted:
	// right after a provider accepted a message, before the commit that
	// records it. Its value is the acceptance to die at: 1, the first.
	envCrash    = "COMMUNICATION_TEST_CRASH"
	crashedCode = 3
)

// crashAtAccept is the fault hook of a doomed child: it dies at the nth
// acceptance.
type crashAtAccept struct {
	n        int64
	accepted atomic.Int64
}

func (c *crashAtAccept) Hit(point string) {
	if point == messaging.FaultAccepted && c.accepted.Add(1) == c.n {
		fmt.Fprintln(os.Stderr, "communication child: crashing at", point, c.n)
		os.Exit(crashedCode)
	}
}

func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var faults interface{ Hit(point string) }
	if n, err := strconv.ParseInt(os.Getenv(envCrash), 10, 64); err == nil && n > 0 {
		faults = &crashAtAccept{n: n}
	}
	if err := serve(ctx, os.Getenv, os.Stdout, faults); err != nil {
		fmt.Fprintln(os.Stderr, "communication child:", err)
		return 1
	}
	return 0
}

// waitCrash waits for c to die at its fault point.
func waitCrash(t *testing.T, c *deploytest.Child, timeout time.Duration) {
	t.Helper()
	if code := c.Exited(t, timeout); code != crashedCode {
		t.Fatalf("the child exited with %d, want %d (the crash after the provider's acceptance)", code, crashedCode)
	}
}

// TestResendAfterACrashIsDeduplicated: the service dies right after a
// provider accepted a message and before the commit that records it
// (messaging.FaultAccepted), and is started again. The message is sent
// again, a notice sent at once on the broker's redelivery, a held one by
// the dispatcher, which finds its hold still there, and both sends carry
// the same idempotency key: the notification id, as the gateway's
// Idempotency-Key and the mail's Message-ID. The provider, which drops a
// key it has seen as real ones do (the stand-in gateway; the SMTP sink
// with -dedupe), has ONE message. Without the key, or with one drawn per
// attempt, it has two.
func TestResendAfterACrashIsDeduplicated(t *testing.T) {
	tests := []struct {
		name, channel, window string
	}{
		{"sms sent at once, redelivered", "sms", "0"},
		{"whatsapp held to coalesce, dispatched again", "whatsapp", "300ms"},
		{"e-mail sent at once, redelivered", "email", "0"},
		{"e-mail held to coalesce, dispatched again", "email", "300ms"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, "-dedupe")
			const tenantID, citizen = "org-a", "citizen-crash"
			vars := map[string]string{"NOTICE_COALESCE_WINDOW": tc.window, "HELD_CHECK_INTERVAL": "100ms"}
			doomedVars := maps.Clone(vars)
			doomedVars[envCrash] = "1"
			doomed := s.Spawn(t, doomedVars)
			s.url = doomed.URL
			s.putContact(t, tenantID, citizen, map[string]string{"email": "crash@example.org", "phone": "+5511955554444",
				"preferredChannel": tc.channel})
			requestID, protocol := uuid.NewString(), fmt.Sprintf("AG-2026-66%04d", i)
			s.Publish(t, submittedEvent(t, tenantID, citizen, requestID, protocol))
			waitCrash(t, doomed, 30*time.Second)

			// The provider has the message; the service recorded no outcome.
			if got := s.delivered(t, tc.channel, requestID, protocol); len(got) != 1 {
				t.Fatalf("after the crash the provider has %d messages (%q), want the 1 it accepted", len(got), got)
			}
			if st := s.notificationStatus(t, requestID); st == "sent" {
				t.Fatal("the notification is recorded sent: the crash came after the commit, nothing was tested")
			}

			s.start(t, vars)
			n := s.waitStatus(t, tenantID, requestID, "sent")
			// Sent is recorded only after a send the provider accepted, in
			// this instance: the message did go again.
			got := s.delivered(t, tc.channel, requestID, protocol)
			if len(got) != 1 || got[0] != n.ID {
				t.Errorf("the provider has %d messages keyed %q, want 1 keyed %s (the notification id)", len(got), got, n.ID)
			}
			if g := s.gateway(tc.channel); g != nil {
				if calls := g.callsWith(n.ID); calls < 2 {
					t.Errorf("the gateway got %d calls keyed %s, want the first and the resend", calls, n.ID)
				}
			}
		})
	}
}

// gateway is the stand-in of channel, nil for e-mail.
func (s *stack) gateway(channel string) *gatewayStandIn {
	switch channel {
	case "sms":
		return s.sms
	case "whatsapp":
		return s.wa
	}
	return nil
}

// delivered returns the keys of the messages about requestID (protocol, in
// a mail) that channel's provider kept: Idempotency-Keys of a gateway's,
// the Message-ID's local part of the sink's mails.
func (s *stack) delivered(t *testing.T, channel, requestID, protocol string) []string {
	t.Helper()
	var keys []string
	if g := s.gateway(channel); g != nil {
		for _, m := range g.messages(requestID) {
			keys = append(keys, m.Key)
		}
		return keys
	}
	for _, m := range s.mails(t, protocol) {
		keys = append(keys, strings.TrimSuffix(strings.TrimPrefix(header(m, "Message-ID"), "<"), "@agora.communication>"))
	}
	return keys
}

// notificationStatus reads the status of requestID's notification behind
// the service's back (it may be dead), "" when there is none.
func (s *stack) notificationStatus(t *testing.T, requestID string) string {
	t.Helper()
	var status string
	err := s.Pool.QueryRow(context.Background(), "SELECT status FROM notification WHERE request_id = $1", requestID).Scan(&status)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return status
}

// TestCrashResendsOnlyTheMailInFlight: four notices come at once, to one
// handler, and the service dies right after the provider accepted the
// third (messaging.FaultAccepted), before the commit that records it. On
// the restart only that third mail goes again: the two before it were
// committed each on its own. Sent from one transaction, as the inbox's
// batches and the dispatcher's did, all three went again. The sink keeps
// every message (no -dedupe), so it shows the resend itself.
func TestCrashResendsOnlyTheMailInFlight(t *testing.T) {
	for i, tc := range []struct{ name, window string }{
		{"sent at once from the inbox", "0"},
		{"held to coalesce, dispatched", "1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t)
			const tenantID, citizen = "org-a", "citizen-in-flight"
			vars := map[string]string{"NOTICE_COALESCE_WINDOW": tc.window, "HELD_CHECK_INTERVAL": "100ms",
				"COMMUNICATION_HANDLERS": "1"}
			doomedVars := maps.Clone(vars)
			doomedVars[envCrash] = "3"
			doomed := s.Spawn(t, doomedVars)
			s.url = doomed.URL
			s.putContact(t, tenantID, citizen, map[string]string{"email": "in-flight@example.org", "preferredChannel": "email"})
			requests := map[string]string{} // id → protocol
			for k := range 4 {
				id, protocol := uuid.NewString(), fmt.Sprintf("AG-2026-67%02d%02d", i, k)
				requests[id] = protocol
				s.Publish(t, submittedEvent(t, tenantID, citizen, id, protocol))
			}
			waitCrash(t, doomed, 30*time.Second)
			mails := func() (total, twice int) {
				for _, protocol := range requests {
					n := len(s.mails(t, protocol))
					total += n
					if n > 1 {
						twice++
					}
				}
				return total, twice
			}
			if total, _ := mails(); total != 3 {
				t.Fatalf("after the crash the sink has %d mails, want the 3 accepted", total)
			}

			s.start(t, vars)
			for id := range requests {
				s.waitStatus(t, tenantID, id, "sent")
			}
			if total, twice := mails(); total != 5 || twice != 1 {
				t.Errorf("the sink has %d mails, %d of them a request's second, want 5 and 1: the four and the one in flight at the crash sent again", total, twice)
			}
		})
	}
}
