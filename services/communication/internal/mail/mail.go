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
	"sync"
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
	Timeout  time.Duration // bound of one message's delivery (default 30 s)
	// MaxIdle is how many open conversations are kept between messages
	// (default DefaultMaxIdle; negative: none, one conversation per
	// message). IdleTime is how long an idle one is trusted (default
	// DefaultIdleTime).
	MaxIdle  int
	IdleTime time.Duration
}

// Sender sends messages over SMTP, keeping up to MaxIdle conversations
// open between messages: a conversation that delivered a message is kept
// and the next message starts with RSET, instead of a new connection,
// greeting, STARTTLS and authentication per message. A conversation that
// failed in any way is closed, never reused; one idle longer than IdleTime
// is closed rather than trusted.
type Sender struct {
	cfg Config

	mu   sync.Mutex
	idle []*conversation // most recently used last
}

// conversation is an open SMTP session and when it last delivered.
type conversation struct {
	c    *smtp.Client
	conn net.Conn
	used time.Time
}

// Defaults of Config.MaxIdle and Config.IdleTime.
const (
	DefaultMaxIdle  = 8
	DefaultIdleTime = 30 * time.Second
)

// New returns a Sender for cfg.
func New(cfg Config) *Sender {
	if cfg.HeloName == "" {
		cfg.HeloName = "localhost"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	if cfg.IdleTime <= 0 {
		cfg.IdleTime = DefaultIdleTime
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

// Close ends the idle conversations.
func (s *Sender) Close() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, cv := range idle {
		_ = cv.conn.SetDeadline(time.Now().Add(time.Second))
		_ = cv.c.Quit()
		cv.c.Close()
	}
}

func (s *Sender) send(ctx context.Context, m notify.Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	cv, trusted, err := s.conversation(ctx)
	if err != nil {
		return err
	}
	err = deliver(cv.c, s.cfg.From, m)
	if err != nil && trusted && errors.Is(err, errNoTransaction) {
		// The conversation was reused unchecked and failed before the
		// relay accepted anything: it may have ended meanwhile. Once
		// more on a new one.
		cv.c.Close()
		if cv, err = s.dial(ctx); err != nil {
			return err
		}
		err = deliver(cv.c, s.cfg.From, m)
	}
	if err != nil {
		cv.c.Close()
		return err
	}
	s.keep(cv)
	return nil
}

// checkAfter is how long a conversation may sit idle and still be reused
// without an RSET first: under load a mail follows the last within
// milliseconds, and the RSET was one round trip in five. One that idled
// longer is checked with RSET.
const checkAfter = time.Second

// conversation returns an idle conversation, or a new one; either has
// ctx's deadline. trusted is true for an idle one reused without RSET.
func (s *Sender) conversation(ctx context.Context) (cv *conversation, trusted bool, err error) {
	dl, _ := ctx.Deadline()
	for {
		s.mu.Lock()
		var cv *conversation
		if n := len(s.idle); n > 0 {
			cv, s.idle = s.idle[n-1], s.idle[:n-1]
		}
		s.mu.Unlock()
		if cv == nil {
			break
		}
		idle := time.Since(cv.used)
		if idle > s.cfg.IdleTime {
			cv.c.Close()
			continue
		}
		_ = cv.conn.SetDeadline(dl)
		if idle < checkAfter {
			return cv, true, nil
		}
		if err := cv.c.Reset(); err == nil {
			return cv, false, nil
		}
		cv.c.Close() // the relay ended it meanwhile: try another
	}
	cv, err = s.dial(ctx)
	return cv, false, err
}

// keep puts cv back for the next message, or ends it when enough are idle.
func (s *Sender) keep(cv *conversation) {
	cv.used = time.Now()
	s.mu.Lock()
	if s.cfg.MaxIdle > 0 && len(s.idle) < s.cfg.MaxIdle {
		s.idle = append(s.idle, cv)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	// The message is accepted once DATA is acknowledged; a failing QUIT
	// must not make us send it twice.
	_ = cv.c.Quit()
	cv.c.Close()
}

// dial opens a conversation: connection, greeting, STARTTLS and
// authentication as configured.
func (s *Sender) dial(ctx context.Context) (*conversation, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("smtp dial %s: %w", s.cfg.Addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var c *smtp.Client
	if s.cfg.StartTLS {
		host, _, _ := net.SplitHostPort(s.cfg.Addr)
		if c, err = smtp.NewClientStartTLS(conn, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("smtp starttls %s: %w", s.cfg.Addr, err)
		}
	} else {
		c = smtp.NewClient(conn)
	}
	if err := c.Hello(s.cfg.HeloName); err != nil {
		c.Close()
		return nil, fmt.Errorf("smtp hello: %w", err)
	}
	if s.cfg.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", s.cfg.Username, s.cfg.Password)); err != nil {
			c.Close()
			return nil, fmt.Errorf("smtp auth: %w", err)
		}
	}
	return &conversation{c: c, conn: conn}, nil
}

// errNoTransaction marks a failure of MAIL, the command that opens a
// transaction: nothing was accepted, so the message may go again at once.
var errNoTransaction = errors.New("no mail transaction")

// deliver sends m in conversation c: MAIL, RCPT, DATA.
func deliver(c *smtp.Client, from string, m notify.Message) error {
	if err := c.Mail(from, nil); err != nil {
		return fmt.Errorf("smtp mail from: %w: %w", errNoTransaction, err)
	}
	if err := c.Rcpt(m.To, nil); err != nil {
		return fmt.Errorf("smtp rcpt: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if _, err := w.Write(compose(from, m)); err != nil {
		w.Close()
		return fmt.Errorf("smtp data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	return nil
}

// compose builds the RFC 5322 message. Message-ID carries the message's
// idempotency key (the notification id), the same on every send of one
// notification, so a receiver can drop the rare duplicate of an
// at-least-once delivery.
func compose(from string, m notify.Message) []byte {
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", from)
	h("To", m.To)
	h("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	h("Date", time.Now().UTC().Format(time.RFC1123Z))
	h("Message-ID", "<"+m.IdempotencyKey()+"@agora.communication>")
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
