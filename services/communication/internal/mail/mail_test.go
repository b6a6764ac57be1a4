package mail_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/agora-platform/agora/services/communication/internal/mail"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// relay is an SMTP server (go-smtp) that counts conversations and keeps
// what it accepted.
type relay struct {
	sessions atomic.Int64
	mu       sync.Mutex
	got      []string // recipients of accepted messages
	conns    []*smtp.Conn
}

func (r *relay) NewSession(c *smtp.Conn) (smtp.Session, error) {
	r.sessions.Add(1)
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	return &relaySession{r: r}, nil
}

type relaySession struct {
	r  *relay
	to string
}

func (s *relaySession) Reset()                               { s.to = "" }
func (s *relaySession) Logout() error                        { return nil }
func (s *relaySession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *relaySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if strings.HasPrefix(to, "bounce") {
		return &smtp.SMTPError{Code: 550, Message: "no such mailbox"}
	}
	s.to = to
	return nil
}
func (s *relaySession) Data(r io.Reader) error {
	if _, err := io.ReadAll(r); err != nil {
		return err
	}
	s.r.mu.Lock()
	s.r.got = append(s.r.got, s.to)
	s.r.mu.Unlock()
	return nil
}

// dropAll closes every connection the relay has, as a relay restarting does.
func (r *relay) dropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

func startRelay(t *testing.T) (*relay, string) {
	t.Helper()
	r := &relay{}
	srv := smtp.NewServer(r)
	srv.Domain = "relay.test"
	srv.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return r, ln.Addr().String()
}

func msg(to string) notify.Message {
	return notify.Message{NotificationID: "n-" + to, To: to, Subject: "Protocolo", Body: "Recebemos o seu pedido."}
}

// TestConversationsAreReused: consecutive messages share one SMTP
// conversation; a rejected recipient ends its conversation (the next
// message opens another) and is reported permanent; a conversation the
// relay dropped is replaced without losing the message (reused within a
// second, it gets no RSET first: the failed MAIL sends it again on a new
// conversation); with MaxIdle negative every message has a conversation of
// its own.
func TestConversationsAreReused(t *testing.T) {
	r, addr := startRelay(t)
	s := mail.New(mail.Config{Addr: addr, From: "no-reply@agora.test"})
	defer s.Close()
	ctx := context.Background()
	for i := range 5 {
		if err := s.Send(ctx, msg("citizen"+string(rune('a'+i))+"@example.org")); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.sessions.Load(); n != 1 {
		t.Errorf("5 messages in %d conversations, want 1", n)
	}
	if err := s.Send(ctx, msg("bounce@example.org")); !errors.Is(err, notify.ErrRejected) {
		t.Errorf("a rejected recipient: %v, want ErrRejected", err)
	}
	if err := s.Send(ctx, msg("after-bounce@example.org")); err != nil {
		t.Fatal(err)
	}
	if n := r.sessions.Load(); n != 2 {
		t.Errorf("after a rejection, %d conversations, want 2 (the failed one is not reused)", n)
	}
	r.dropAll()
	if err := s.Send(ctx, msg("after-drop@example.org")); err != nil {
		t.Fatalf("after the relay dropped the conversation: %v", err)
	}
	if n := r.sessions.Load(); n != 3 {
		t.Errorf("after a drop, %d conversations, want 3", n)
	}
	r.mu.Lock()
	got := len(r.got)
	r.mu.Unlock()
	if got != 7 {
		t.Errorf("relay accepted %d messages, want 7", got)
	}

	single, addr2 := startRelay(t)
	s2 := mail.New(mail.Config{Addr: addr2, MaxIdle: -1})
	for range 3 {
		if err := s2.Send(ctx, msg("x@example.org")); err != nil {
			t.Fatal(err)
		}
	}
	if n := single.sessions.Load(); n != 3 {
		t.Errorf("MaxIdle -1: %d conversations for 3 messages, want 3", n)
	}
}
