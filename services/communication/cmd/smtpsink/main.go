// Command smtpsink is a local SMTP server that accepts every message and
// writes it to a directory, one file per message. Tests and `make up` use
// it as the mail relay; recipients can be made to fail on purpose.
//
//	smtpsink -addr 127.0.0.1:1025 -dir .data/mail
//
// It prints "listening on <addr>" once ready (with -addr :0 too). With
// -dedupe it keeps one message per Message-ID, as a receiver that drops
// duplicates by Message-ID does: a message whose Message-ID it already
// wrote is accepted (250) and not written again.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/agora-platform/agora/pkg/fabric/host"
)

func main() {
	host.Main("smtpsink", func(ctx context.Context, args []string, _ func(string) string, stdout io.Writer) error {
		return run(ctx, args, stdout)
	})
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:1025", "listen address")
	dir := fs.String("dir", ".data/mail", "directory for received messages (.eml)")
	reject := fs.String("reject", "", "recipients containing this text get 550 (permanent)")
	defer4xx := fs.String("defer", "", "recipients containing this text get 451 (temporary)")
	dedupe := fs.Bool("dedupe", false, "write one message per Message-ID: accept a repeated one without writing it")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	be := &backend{dir: *dir, reject: *reject, defer4xx: *defer4xx}
	if *dedupe {
		be.seen = map[string]bool{}
	}
	s := smtp.NewServer(be)
	s.Domain = "smtpsink.local"
	s.ReadTimeout, s.WriteTimeout = time.Minute, time.Minute
	s.MaxMessageBytes = 10 << 20
	s.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return s.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, smtp.ErrServerClosed) {
			return nil
		}
		return err
	}
}

type backend struct {
	dir              string
	reject, defer4xx string
	seq              atomic.Int64
	// With -dedupe, seen holds the Message-IDs written (nil without), under mu.
	mu   sync.Mutex
	seen map[string]bool
}

// messageID is body's Message-ID, or "" without one.
func messageID(body []byte) string {
	msg, err := mail.ReadMessage(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	return msg.Header.Get("Message-ID")
}

// keepOnce writes body with write unless -dedupe is on and a message with
// its Message-ID was written already. The lock spans the write: a
// duplicate arriving meanwhile waits and is dropped, and a failed write
// leaves the Message-ID free for the retry.
func (b *backend) keepOnce(body []byte, write func() error) error {
	if b.seen == nil {
		return write()
	}
	id := messageID(body)
	if id == "" {
		return write()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[id] {
		return nil // accepted, as the duplicate it is
	}
	if err := write(); err != nil {
		return err
	}
	b.seen[id] = true
	return nil
}

func (b *backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{b: b}, nil }

type session struct {
	b    *backend
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	switch {
	case s.b.reject != "" && strings.Contains(to, s.b.reject):
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "mailbox unavailable"}
	case s.b.defer4xx != "" && strings.Contains(to, s.b.defer4xx):
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.to = append(s.to, to)
	return nil
}

// Data writes the message (once per Message-ID with -dedupe).
func (s *session) Data(r io.Reader) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return s.b.keepOnce(body, func() error { return s.write(body) })
}

// write writes body with an envelope header block first, then renames it
// into place so readers never see half a file.
func (s *session) write(body []byte) error {
	n := s.b.seq.Add(1)
	name := fmt.Sprintf("%d-%06d.eml", time.Now().UnixNano(), n)
	tmp := filepath.Join(s.b.dir, "."+name+".tmp")
	content := fmt.Sprintf("X-Sink-From: %s\r\nX-Sink-To: %s\r\n", s.from, strings.Join(s.to, ", ")) + string(body)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.b.dir, name))
}
