// Package mail delivers e-mail notifications over SMTP (go-smtp client),
// optionally upgrading with STARTTLS and authenticating with PLAIN.
package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// Config locates the SMTP relay.
type Config struct {
	Addr     string // host:port
	From     string // envelope and header sender
	HeloName string // EHLO name (default "localhost")
	// StartTLS upgrades the connection before sending; local sinks do
	// without it.
	StartTLS bool
	Username string // PLAIN auth when set (requires StartTLS in practice)
	Password string
	Timeout  time.Duration // whole-conversation bound (default 30 s)
}

// Sender sends one message per SMTP conversation.
type Sender struct {
	cfg Config
}

// New returns a Sender for cfg.
func New(cfg Config) *Sender {
	if cfg.HeloName == "" {
		cfg.HeloName = "localhost"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &Sender{cfg: cfg}
}

// Send delivers m to m.To. A 5xx reply is permanent and wraps
// notify.ErrRejected; connection failures and 4xx replies are returned as
// they are, meaning "try again later".
func (s *Sender) Send(ctx context.Context, m notify.Message) error {
	err := s.send(ctx, m)
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code >= 500 {
		return fmt.Errorf("%w: smtp %d %s", notify.ErrRejected, se.Code, se.Message)
	}
	return err
}

func (s *Sender) send(ctx context.Context, m notify.Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("smtp dial %s: %w", s.cfg.Addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var c *smtp.Client
	if s.cfg.StartTLS {
		host, _, _ := net.SplitHostPort(s.cfg.Addr)
		if c, err = smtp.NewClientStartTLS(conn, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			conn.Close()
			return fmt.Errorf("smtp starttls %s: %w", s.cfg.Addr, err)
		}
	} else {
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	if err := c.Hello(s.cfg.HeloName); err != nil {
		return fmt.Errorf("smtp hello: %w", err)
	}
	if s.cfg.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", s.cfg.Username, s.cfg.Password)); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
	}
	if err := c.Mail(s.cfg.From, nil); err != nil {
		return fmt.Errorf("smtp mail from: %w", err)
	}
	if err := c.Rcpt(m.To, nil); err != nil {
		return fmt.Errorf("smtp rcpt: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if _, err := w.Write(compose(s.cfg.From, m)); err != nil {
		w.Close()
		return fmt.Errorf("smtp data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	// The message is accepted once DATA is acknowledged; a failing QUIT
	// must not make us send it twice.
	_ = c.Quit()
	return nil
}

// compose builds the RFC 5322 message. Message-ID is the notification id so
// a receiver can drop the rare duplicate of an at-least-once delivery.
func compose(from string, m notify.Message) []byte {
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", from)
	h("To", m.To)
	h("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	h("Date", time.Now().UTC().Format(time.RFC1123Z))
	h("Message-ID", "<"+m.NotificationID+"@agora.communication>")
	if m.RequestID != "" {
		h("X-Agora-Request-Id", m.RequestID)
	}
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	b.WriteString(strings.ReplaceAll(strings.ReplaceAll(m.Body, "\r\n", "\n"), "\n", "\r\n"))
	return b.Bytes()
}
