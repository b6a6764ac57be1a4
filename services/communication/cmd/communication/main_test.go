package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// stack is one running communication service on its test stack, with a
// real SMTP sink process as its mail relay, stand-in SMS and WhatsApp
// gateways and a probe queue of the notification-sent events it publishes.
type stack struct {
	*deploytest.Stack
	url     string
	mailDir string
	sms, wa *gatewayStandIn
	sent    interface { // the notification-sent events it published
		Next(t testing.TB, what string, match func(envelope.Envelope) bool) envelope.Envelope
	}
}

// startSink builds cmd/smtpsink and runs it as a separate process, with
// extra flags (-dedupe).
func startSink(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "smtpsink")
	if out, err := exec.Command("go", "build", "-o", bin, "../smtpsink").CombinedOutput(); err != nil {
		t.Fatalf("build smtpsink: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-dir", dir, "-reject", "bounce", "-defer", "busy"}, flags...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start smtpsink: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("smtpsink did not start: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("smtpsink said %q", line)
	}
	return addr
}

// newStack provisions the stack, the SMTP sink (with sinkFlags), the
// gateways and the probe queue; start runs the service on it.
func newStack(t testing.TB, sinkFlags ...string) *stack {
	t.Helper()
	s := &stack{Stack: deploytest.NewStack(t, "communication"), mailDir: t.TempDir(), sms: startGateway(t), wa: startGateway(t)}
	s.Vars["SMTP_ADDR"] = startSink(t, s.mailDir, sinkFlags...)
	s.Vars["SMS_GATEWAY_URL"], s.Vars["WHATSAPP_GATEWAY_URL"] = s.sms.URL, s.wa.URL
	s.Vars["GATEWAY_TIMEOUT"] = "5s"
	s.Vars["RETRY_TIERS"] = "300ms,300ms,300ms,300ms,300ms,300ms"
	s.sent = fabrictest.Observe(t, s.Conn, "communication.notification-sent.v1")
	return s
}

// start runs the service with extra variables (or overrides), and has api
// check the exchanges with it.
func (s *stack) start(t testing.TB, extra map[string]string) *stack {
	t.Helper()
	s.url = s.Start(t, run, extra).URL
	return s
}

// call sends a request and decodes a JSON answer into out (if non-nil).
func (s *stack) call(t *testing.T, method, path, token string, body any, out any) deploytest.Response {
	t.Helper()
	var header map[string]string
	if _, raw := body.(string); raw {
		header = map[string]string{"Content-Type": "application/json"}
	}
	r := deploytest.Do(t, method, s.url+path, token, body, header)
	if out != nil && len(r.Body) > 0 {
		r.JSON(t, out)
	}
	return r
}

func (s *stack) putContact(t *testing.T, tenantID, citizen string, body any) {
	t.Helper()
	tok := s.Token(t, tenantID, "attendant-1", auth.RoleAttendant)
	if r := s.call(t, http.MethodPut, "/v1/contacts/"+citizen, tok, body, nil); r.Status != http.StatusOK {
		t.Fatalf("PUT contact %s = %d %s, want 200", citizen, r.Status, r.Body)
	}
}

func submittedEvent(t *testing.T, tenantID, citizen, requestID, protocol string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", tenantID, "request-service", map[string]any{
		"requestId": requestID, "protocol": protocol, "serviceId": "iptu-segunda-via", "formId": "form-1",
		"formVersion": 1, "channel": "web", "citizenId": citizen, "submittedAt": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type notification struct {
	ID, RequestID, CitizenID, Channel, Status, FailureReason, LastError string
	Template, CoalescedInto                                             string
	Attempts                                                            int
}

func (s *stack) notifications(t *testing.T, tenantID, requestID string) []notification {
	t.Helper()
	var out struct{ Items []notification }
	tok := s.Token(t, tenantID, "attendant-1", auth.RoleAttendant)
	if r := s.call(t, http.MethodGet, "/v1/notifications?requestId="+requestID, tok, nil, &out); r.Status != http.StatusOK {
		t.Fatalf("GET notifications = %d, want 200", r.Status)
	}
	return out.Items
}

// waitStatus waits until requestID has one notification in status want.
func (s *stack) waitStatus(t *testing.T, tenantID, requestID, want string) notification {
	t.Helper()
	var got []notification
	fabrictest.Eventually(t, 20*time.Second, "notification "+want+" for "+requestID, func() bool {
		got = s.notifications(t, tenantID, requestID)
		return len(got) == 1 && got[0].Status == want
	})
	return got[0]
}

// mails returns the messages at the sink whose text contains needle.
func (s *stack) mails(t *testing.T, needle string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.mailDir, "*.eml"))
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), needle) {
			out = append(out, string(data))
		}
	}
	return out
}

// sentStatus waits for the notification-sent event of notification id and
// returns the status it reports.
func (s *stack) sentStatus(t *testing.T, id string) string {
	t.Helper()
	decode := func(e envelope.Envelope) (p struct{ NotificationID, Status string }) {
		_ = json.Unmarshal(e.Payload, &p)
		return p
	}
	return decode(s.sent.Next(t, "notification-sent.v1 of "+id, func(e envelope.Envelope) bool {
		return decode(e).NotificationID == id
	})).Status
}

func TestConfirmationDelivery(t *testing.T) {
	s := newStack(t).start(t, nil)
	const tenantID = "org-a"
	s.putContact(t, tenantID, "citizen-mail", map[string]string{"email": "maria@example.org", "preferredChannel": "email"})
	s.putContact(t, tenantID, "citizen-bounce", map[string]string{"email": "bounce@example.org"})
	s.putContact(t, tenantID, "citizen-sms", map[string]string{"phone": "+5511999990000", "preferredChannel": "sms"})
	s.putContact(t, tenantID, "citizen-sms-refused", map[string]string{"phone": refusedPrefix + "1234567", "preferredChannel": "sms"})

	tests := []struct {
		name, citizen   string
		wantStatus      string
		wantReason      string
		wantChannel     string
		wantMail        bool
		wantSMS         bool // the SMS gateway accepted it, keyed by the notification id
		wantMinAttempts int
	}{
		{name: "email is delivered over SMTP", citizen: "citizen-mail", wantStatus: "sent", wantChannel: "email", wantMail: true, wantMinAttempts: 1},
		{name: "unknown contact fails without retry", citizen: "citizen-nobody", wantStatus: "failed", wantReason: "no-contact", wantChannel: "email"},
		{name: "SMTP 5xx is permanent", citizen: "citizen-bounce", wantStatus: "failed", wantReason: "rejected", wantChannel: "email", wantMinAttempts: 1},
		{name: "preferred sms goes to the sms gateway", citizen: "citizen-sms", wantStatus: "sent", wantChannel: "sms", wantSMS: true, wantMinAttempts: 1},
		{name: "a gateway's 4xx is permanent", citizen: "citizen-sms-refused", wantStatus: "failed", wantReason: "rejected", wantChannel: "sms", wantMinAttempts: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requestID := uuid.NewString()
			protocol := fmt.Sprintf("AG-2026-%06d", 100+i)
			s.Publish(t, submittedEvent(t, tenantID, tc.citizen, requestID, protocol))
			n := s.waitStatus(t, tenantID, requestID, tc.wantStatus)
			if n.FailureReason != tc.wantReason || n.Channel != tc.wantChannel || n.Attempts < tc.wantMinAttempts {
				t.Errorf("notification = %+v, want reason %q channel %q attempts >= %d", n, tc.wantReason, tc.wantChannel, tc.wantMinAttempts)
			}
			mails := s.mails(t, protocol)
			if tc.wantMail && (len(mails) != 1 || !strings.Contains(mails[0], "X-Sink-To: maria@example.org") ||
				!strings.Contains(mails[0], "Message-ID: <"+n.ID+"@agora.communication>")) {
				t.Errorf("mails with %s = %q, want one to maria@example.org with Message-ID %s", protocol, mails, n.ID)
			}
			if !tc.wantMail && len(mails) != 0 {
				t.Errorf("mails with %s = %d, want none", protocol, len(mails))
			}
			sms := s.sms.messages(requestID)
			if tc.wantSMS && (len(sms) != 1 || sms[0].Key != n.ID || sms[0].To != "+5511999990000" || !strings.Contains(sms[0].Text, protocol)) {
				t.Errorf("SMS of %s = %+v, want one to +5511999990000 with Idempotency-Key %s", protocol, sms, n.ID)
			}
			if !tc.wantSMS && len(sms) != 0 {
				t.Errorf("SMS of %s = %d, want none", protocol, len(sms))
			}
			if got := s.sentStatus(t, n.ID); got != tc.wantStatus {
				t.Errorf("notification-sent status = %q, want %q", got, tc.wantStatus)
			}
		})
	}
}

// TestTemporaryFailureIsRetried follows a message sent at once (no
// coalescing window) through the retry tiers, over SMTP (451) and an SMS
// gateway (503); a held one waits retryHeldAfter instead.
func TestTemporaryFailureIsRetried(t *testing.T) {
	s := newStack(t).start(t, map[string]string{"NOTICE_COALESCE_WINDOW": "0"})
	const tenantID = "org-a"
	tests := []struct {
		name, protocol    string
		contact, recovers map[string]string
		wantError         string
		delivered         func(t *testing.T, requestID string) int
	}{
		{name: "SMTP 451", protocol: "AG-2026-777001",
			contact: map[string]string{"email": "busy@example.org"}, recovers: map[string]string{"email": "maria.back@example.org"},
			wantError: "451", delivered: func(t *testing.T, _ string) int { return len(s.mails(t, "AG-2026-777001")) }},
		{name: "gateway 503", protocol: "AG-2026-777002",
			contact:   map[string]string{"phone": unavailablePrefix + "1234567", "preferredChannel": "sms"},
			recovers:  map[string]string{"phone": "+5511988887777", "preferredChannel": "sms"},
			wantError: "503", delivered: func(_ *testing.T, id string) int { return len(s.sms.messages(id)) }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			citizen := fmt.Sprintf("citizen-busy-%d", i)
			s.putContact(t, tenantID, citizen, tc.contact)
			requestID := uuid.NewString()
			s.Publish(t, submittedEvent(t, tenantID, citizen, requestID, tc.protocol))
			fabrictest.Eventually(t, 20*time.Second, "a failed attempt recorded", func() bool {
				n := s.notifications(t, tenantID, requestID)
				return len(n) == 1 && n[0].Status == "pending" && n[0].Attempts >= 1 && strings.Contains(n[0].LastError, tc.wantError)
			})
			// The address comes back: a later retry tier delivers.
			s.putContact(t, tenantID, citizen, tc.recovers)
			n := s.waitStatus(t, tenantID, requestID, "sent")
			if n.Attempts < 2 {
				t.Errorf("attempts = %d, want >= 2", n.Attempts)
			}
			if got := tc.delivered(t, requestID); got != 1 {
				t.Errorf("messages delivered = %d, want 1", got)
			}
		})
	}
}

func statusChangedEvent(t *testing.T, tenantID, citizen, requestID, protocol, status string) envelope.Envelope {
	t.Helper()
	p := map[string]any{"requestId": requestID, "status": status, "previousStatus": "in_progress",
		"changedAt": time.Now().UTC().Format(time.RFC3339)}
	if citizen != "" {
		p["citizenId"], p["protocol"] = citizen, protocol
	}
	e, err := envelope.New("request.status-changed.v1", tenantID, "request-service", p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Every status change of a request sends its citizen one notice, however
// often it is delivered; a change that names no citizen (an older
// producer) is acked without one.
func TestStatusChangeNotice(t *testing.T) {
	s := newStack(t).start(t, nil)
	const tenantID, queue = "org-a", "communication.request-status"
	s.putContact(t, tenantID, "citizen-ana", map[string]string{"email": "ana@example.org", "preferredChannel": "email"})
	requestID := uuid.NewString()
	changed := statusChangedEvent(t, tenantID, "citizen-ana", requestID, "AG-2026-555001", "completed")
	s.Publish(t, changed)
	n := s.waitStatus(t, tenantID, requestID, "sent")
	mails := s.mails(t, "AG-2026-555001")
	if len(mails) != 1 || !strings.Contains(mails[0], "X-Sink-To: ana@example.org") ||
		!strings.Contains(mails[0], "Request AG-2026-555001 is now completed") {
		t.Fatalf("mails = %q, want one to ana@example.org saying the request is now completed", mails)
	}

	// The same event again: the inbox skips it (a duplicate counted), no mail.
	dupes := map[string]string{"consumer": queue}
	before := fabrictest.Counter(t, s.url+"/metrics", "fabric_consumer_duplicates_total", dupes)
	s.Publish(t, changed)
	fabrictest.WaitCounter(t, 15*time.Second, s.url+"/metrics", "fabric_consumer_duplicates_total", dupes, before+1)
	if got := s.mails(t, "AG-2026-555001"); len(got) != 1 {
		t.Errorf("mails after a redelivery = %d, want 1", len(got))
	}
	if got := s.notifications(t, tenantID, requestID); len(got) != 1 || got[0].ID != n.ID {
		t.Errorf("notifications = %+v, want only %s", got, n.ID)
	}

	// No citizen named: handled (processed counted), nothing sent.
	processed := map[string]string{"consumer": queue}
	before = fabrictest.Counter(t, s.url+"/metrics", "fabric_consumer_processed_total", processed)
	anonymous := uuid.NewString()
	s.Publish(t, statusChangedEvent(t, tenantID, "", anonymous, "", "rejected"))
	fabrictest.WaitCounter(t, 15*time.Second, s.url+"/metrics", "fabric_consumer_processed_total", processed, before+1)
	if got := s.notifications(t, tenantID, anonymous); len(got) != 0 {
		t.Errorf("notifications for a change naming no citizen = %+v, want none", got)
	}
}

func TestDuplicateEventSendsOnce(t *testing.T) {
	s := newStack(t).start(t, nil)
	const tenantID = "org-a"
	s.putContact(t, tenantID, "citizen-dup", map[string]string{"email": "dup@example.org"})
	requestID := uuid.NewString()
	e := submittedEvent(t, tenantID, "citizen-dup", requestID, "AG-2026-888001")
	for range 3 {
		s.Publish(t, e)
	}
	s.waitStatus(t, tenantID, requestID, "sent")
	// A second event for the same request proves the queue moved past the duplicates.
	other := uuid.NewString()
	s.Publish(t, submittedEvent(t, tenantID, "citizen-dup", other, "AG-2026-888002"))
	s.waitStatus(t, tenantID, other, "sent")
	if got := s.mails(t, "AG-2026-888001"); len(got) != 1 {
		t.Errorf("mails for a thrice-delivered event = %d, want 1", len(got))
	}
	if got := s.notifications(t, tenantID, requestID); len(got) != 1 {
		t.Errorf("notifications = %d, want 1", len(got))
	}
}

// A crash between the relay accepting a mail and the commit that records
// it (here: the commit fails once, after the send) makes the mail go
// again: on redelivery when it was sent at once, at the dispatcher's next
// look when it was held to coalesce. Both copies must carry the same
// Message-ID, so the relay or the citizen's client can drop the second;
// with a Message-ID drawn per attempt they could not.
func TestMailResentAfterLostCommitKeepsItsMessageID(t *testing.T) {
	for _, tc := range []struct{ name, window string }{
		{"sent at once, redelivered", "0"},
		{"held to coalesce, dispatched again", "500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testLostCommit(t, tc.window)
		})
	}
}

func testLostCommit(t *testing.T, window string) {
	s := newStack(t).start(t, map[string]string{"NOTICE_COALESCE_WINDOW": window})
	const tenantID = "org-a"
	s.putContact(t, tenantID, "citizen-crash", map[string]string{"email": "crash@example.org", "preferredChannel": "email"})
	ctx := context.Background()
	// The first "sent" update fails, as a commit lost to a crash would: a
	// sequence counts across the rolled-back transaction. SECURITY DEFINER:
	// the service's role may not use the test's sequence.
	schema := pgx.Identifier{s.Schema}.Sanitize()
	for _, q := range []string{
		"CREATE SEQUENCE " + schema + ".lost_commit",
		"CREATE FUNCTION " + schema + `.lose_first_commit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
		BEGIN
			IF nextval('` + s.Schema + `.lost_commit') = 1 THEN
				RAISE EXCEPTION 'simulated crash after the send, before the commit';
			END IF;
			RETURN NEW;
		END $$`,
		"CREATE TRIGGER lose_first_commit BEFORE UPDATE ON " + schema + ".notification FOR EACH ROW WHEN (NEW.status = 'sent') EXECUTE FUNCTION " + schema + ".lose_first_commit()",
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	requestID, protocol := uuid.NewString(), "AG-2026-777001"
	s.Publish(t, submittedEvent(t, tenantID, "citizen-crash", requestID, protocol))
	n := s.waitStatus(t, tenantID, requestID, "sent")
	var lost int
	if err := s.Pool.QueryRow(ctx, "SELECT last_value FROM "+schema+".lost_commit").Scan(&lost); err != nil || lost < 2 {
		t.Fatalf("the lost commit was not simulated (sequence at %d, err %v)", lost, err)
	}
	mails := s.mails(t, protocol)
	if len(mails) != 2 {
		t.Fatalf("mails with %s = %d, want 2: one before the lost commit, one after", protocol, len(mails))
	}
	want := "Message-ID: <" + n.ID + "@agora.communication>"
	for i, m := range mails {
		if !strings.Contains(m, want) {
			t.Errorf("mail %d lacks %q (the recorded notification's id):\n%s", i+1, want, m)
		}
	}
}

func TestSendCommandUsesChannelAdapter(t *testing.T) {
	s := newStack(t).start(t, nil)
	const tenantID = "org-b"
	s.putContact(t, tenantID, "citizen-wa", map[string]string{"phone": "+5521988887777", "preferredChannel": "whatsapp"})
	requestID := uuid.NewString()
	e, err := envelope.New("communication.send.v1", tenantID, "workflow-service", map[string]any{
		"channel": "whatsapp", "recipientRef": "citizen-wa", "template": "request-status",
		"requestId": requestID, "params": map[string]any{"status": "in_progress"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(t, e)
	n := s.waitStatus(t, tenantID, requestID, "sent")
	if n.Channel != "whatsapp" {
		t.Errorf("channel = %q, want whatsapp", n.Channel)
	}
	if got := s.wa.messages(requestID); len(got) != 1 || got[0].Key != n.ID || got[0].Channel != "whatsapp" ||
		got[0].To != "+5521988887777" || !strings.Contains(got[0].Text, "in_progress") {
		t.Errorf("WhatsApp gateway got %+v, want one message to +5521988887777 keyed %s", got, n.ID)
	}
	if got := s.sms.messages(requestID); len(got) != 0 {
		t.Errorf("SMS gateway got %+v, want nothing", got)
	}
}

func TestAPI(t *testing.T) {
	s := newStack(t).start(t, nil)
	citizenA := s.Token(t, "org-a", "citizen-1", auth.RoleCitizen)
	attendantA := s.Token(t, "org-a", "att-1", auth.RoleAttendant)
	attendantB := s.Token(t, "org-b", "att-2", auth.RoleAttendant)
	s.putContact(t, "org-a", "citizen-1", map[string]string{"email": "c1@example.org"})
	requestID := uuid.NewString()
	s.Publish(t, submittedEvent(t, "org-a", "citizen-1", requestID, "AG-2026-999001"))
	s.waitStatus(t, "org-a", requestID, "sent")

	tests := []struct {
		name, method, path, token string
		body                      any
		wantStatus, wantItems     int
	}{
		{"citizen updates own contact", "PUT", "/v1/contacts/citizen-1", citizenA, map[string]string{"email": "new@example.org"}, 200, -1},
		{"citizen cannot touch another citizen", "PUT", "/v1/contacts/citizen-2", citizenA, map[string]string{"email": "x@example.org"}, 404, -1},
		{"malformed JSON", "PUT", "/v1/contacts/citizen-1", citizenA, "{", 400, -1},
		{"unknown field", "PUT", "/v1/contacts/citizen-1", citizenA, `{"mail":"a@b.c"}`, 400, -1},
		{"bad e-mail", "PUT", "/v1/contacts/citizen-1", citizenA, map[string]string{"email": "not-an-address"}, 422, -1},
		{"preferred channel without address", "PUT", "/v1/contacts/citizen-1", citizenA, map[string]string{"email": "a@b.org", "preferredChannel": "sms"}, 422, -1},
		{"no token", "GET", "/v1/notifications?requestId=" + requestID, "", nil, 401, -1},
		{"requestId missing", "GET", "/v1/notifications", attendantA, nil, 400, -1},
		{"requestId not a UUID", "GET", "/v1/notifications?requestId=42", attendantA, nil, 400, -1},
		{"citizen sees own notification", "GET", "/v1/notifications?requestId=" + requestID, citizenA, nil, 200, 1},
		{"other citizen sees nothing", "GET", "/v1/notifications?requestId=" + requestID, s.Token(t, "org-a", "citizen-9", auth.RoleCitizen), nil, 200, 0},
		{"tenant B sees nothing", "GET", "/v1/notifications?requestId=" + requestID, attendantB, nil, 200, 0},
		{"tenant B cannot read tenant A's contact", "GET", "/v1/contacts/citizen-1", attendantB, nil, 404, -1},
		{"tenant A reads the contact", "GET", "/v1/contacts/citizen-1", attendantA, nil, 200, -1},
		{"NUL in the path (PUT)", "PUT", "/v1/contacts/a%00b", attendantA, map[string]string{"email": "a@example.org"}, 400, -1},
		{"NUL in the path (GET)", "GET", "/v1/contacts/a%00b", attendantA, nil, 400, -1},
		{"invalid UTF-8 in the path", "GET", "/v1/contacts/a%FFb", attendantA, nil, 400, -1},
		{"NUL in a JSON string", "PUT", "/v1/contacts/citizen-1", citizenA, `{"email":"a@example.org","phone":"+55\u000011"}`, 400, -1},
		{"NUL in the query", "GET", "/v1/notifications?requestId=" + requestID + "&x=%00", attendantA, nil, 400, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out struct {
				Items []notification
				Title string
			}
			r := s.call(t, tc.method, tc.path, tc.token, tc.body, &out)
			if r.Status != tc.wantStatus {
				t.Fatalf("%s %s = %d, want %d", tc.method, tc.path, r.Status, tc.wantStatus)
			}
			if ct := r.Header.Get("Content-Type"); tc.wantStatus >= 400 && ct != "application/problem+json" {
				t.Errorf("Content-Type = %q, want application/problem+json", ct)
			}
			if tc.wantItems >= 0 && len(out.Items) != tc.wantItems {
				t.Errorf("items = %d, want %d", len(out.Items), tc.wantItems)
			}
		})
	}
}

// TestConcurrentDeliveriesWithASmallPool guards against a handler needing
// a second pool connection while its inbox transaction holds one: with
// every connection held by waiting handlers, the service would stall.
func TestConcurrentDeliveriesWithASmallPool(t *testing.T) {
	s := newStack(t)
	dbURL := s.Vars["DATABASE_URL"]
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	// Sent at once (no coalescing window): the handlers, not the
	// dispatcher, hold the pool's connections while they send.
	s.start(t, map[string]string{"DATABASE_URL": dbURL + sep + "pool_max_conns=3", "NOTICE_COALESCE_WINDOW": "0"})
	const tenantID = "org-a"
	s.putContact(t, tenantID, "citizen-ok", map[string]string{"email": "ok@example.org"})
	s.putContact(t, tenantID, "citizen-busy", map[string]string{"email": "busy@example.org"})
	var ids []string
	for i := range 12 {
		citizen := "citizen-ok"
		if i%3 == 0 {
			citizen = "citizen-busy" // transient failures take the rollback-and-record path
		}
		id := uuid.NewString()
		ids = append(ids, id)
		s.Publish(t, submittedEvent(t, tenantID, citizen, id, fmt.Sprintf("AG-2026-555%03d", i)))
	}
	for i, id := range ids {
		if i%3 == 0 {
			fabrictest.Eventually(t, 20*time.Second, "failed attempts recorded for "+id, func() bool {
				n := s.notifications(t, tenantID, id)
				return len(n) == 1 && n[0].Attempts >= 1
			})
			continue
		}
		s.waitStatus(t, tenantID, id, "sent")
	}
}

// TestConsentAndQuietHours: a citizen who withdrew consent gets no progress
// notice but still the confirmation of their own submission; an SMS in the
// citizen's quiet hours is held, held again while they last, and sent once
// they are over. The test moves the hold's due time instead of waiting for
// the clock.
func TestConsentAndQuietHours(t *testing.T) {
	s := newStack(t).start(t, map[string]string{"HELD_CHECK_INTERVAL": "100ms"})
	ctx := context.Background()
	// Consent withdrawn in org-a only.
	s.putContact(t, "org-a", "citizen-ana", map[string]any{"email": "ana@example.org", "progressNotices": false})
	s.putContact(t, "org-b", "citizen-ana", map[string]any{"email": "ana.b@example.org"})
	withheld, elsewhere := uuid.NewString(), uuid.NewString()
	for _, e := range []envelope.Envelope{
		statusChangedEvent(t, "org-a", "citizen-ana", withheld, "AG-2026-700001", "in_progress"),
		statusChangedEvent(t, "org-b", "citizen-ana", elsewhere, "AG-2026-700002", "in_progress"),
	} {
		s.Publish(t, e)
	}
	if n := s.waitStatus(t, "org-a", withheld, "withheld"); n.FailureReason != "no-consent" {
		t.Errorf("withheld notice: failureReason = %q, want no-consent", n.FailureReason)
	}
	s.waitStatus(t, "org-b", elsewhere, "sent")
	confirmed := uuid.NewString()
	s.Publish(t, submittedEvent(t, "org-a", "citizen-ana", confirmed, "AG-2026-700003"))
	s.waitStatus(t, "org-a", confirmed, "sent")
	if got := s.mails(t, "AG-2026-700001"); len(got) != 0 {
		t.Errorf("mails about the withheld notice: %d, want none", len(got))
	}

	// Quiet hours around now, in UTC.
	now := time.Now().UTC()
	quiet := map[string]any{"start": now.Add(-time.Hour).Format("15:04"), "end": now.Add(2 * time.Hour).Format("15:04"), "timeZone": "UTC"}
	bia := map[string]any{"phone": "+5511977776666", "preferredChannel": "sms", "quietHours": quiet}
	s.putContact(t, "org-a", "citizen-bia", bia)
	held := uuid.NewString()
	s.Publish(t, statusChangedEvent(t, "org-a", "citizen-bia", held, "AG-2026-700004", "completed"))
	n := s.waitStatus(t, "org-a", held, "held")
	dueIn := func() time.Duration {
		var due time.Time
		if err := s.Pool.QueryRow(ctx, "SELECT not_before FROM "+s.Schema+".notification_hold WHERE notification_id = $1", n.ID).Scan(&due); err != nil {
			t.Fatalf("hold of %s: %v", n.ID, err)
		}
		return time.Until(due)
	}
	if d := dueIn(); d < time.Hour || d > 2*time.Hour {
		t.Errorf("held until %v from now, want the end of the quiet hours, 1–2 h away", d)
	}
	makeDue := func() {
		if _, err := s.Pool.Exec(ctx, "UPDATE "+s.Schema+".notification_hold SET not_before = now() - interval '1 second' WHERE notification_id = $1", n.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Due while the quiet hours still last: held again until their end.
	makeDue()
	fabrictest.Eventually(t, 10*time.Second, "held again until the quiet hours end", func() bool { return dueIn() > time.Hour })
	// The quiet hours end (the citizen drops them): sent.
	delete(bia, "quietHours")
	s.putContact(t, "org-a", "citizen-bia", bia)
	makeDue()
	s.waitStatus(t, "org-a", held, "sent")
	if got := s.sentStatus(t, n.ID); got != "sent" {
		t.Errorf("notification-sent status of the held notice = %q, want sent", got)
	}
}
