// Package edge holds the checks every service's HTTP input passes before
// its handlers see it (host.Serve installs them). Text that PostgreSQL
// cannot store, a NUL or invalid UTF-8, is refused here with 400 and a
// problem body: otherwise each handler that forgot to check would answer
// 500 (`invalid byte sequence for encoding "UTF8"`), or, where Go's JSON
// decoder quietly replaces bad bytes, store something else than was sent.
package edge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// MaxChecked is how much of a body is checked before the handler runs: the
// largest JSON body any service accepts (a request submission, 256 KiB),
// so a refusal comes before any effect. Beyond it the rest is checked as
// the handler reads; its own size limit refuses such a body first.
const MaxChecked = 256 << 10

// Error is input the edge refuses. A handler reading a body beyond
// MaxChecked gets it as a read error.
type Error struct {
	Where string // "path", "query parameter \"x\"", "body"
	Why   string // "contains NUL", "is not valid UTF-8", …
}

func (e *Error) Error() string { return e.Where + " " + e.Why }

// ErrInvalidText is wrapped by every *Error.
var ErrInvalidText = errors.New("edge: input is not valid text")

func (e *Error) Unwrap() error { return ErrInvalidText }

// invalidText is the problem type of every refusal, described in
// docs/problems.md beside the body refusals of httpjson.ReadStrict.
const invalidText = "https://github.com/agora-platform/agora/blob/main/docs/problems.md#invalid-text"

// Problem is the problem that answers e: the same whether the edge refuses
// the request up front or a handler meets e reading the body.
func (e *Error) Problem() problem.Details {
	return problem.Details{Type: invalidText, Title: "The input is not valid text", Status: http.StatusBadRequest, Detail: e.Error()}
}

// ValidText refuses, with 400 and a problem body, requests whose path or
// query values hold a NUL or invalid UTF-8, and bodies holding invalid
// UTF-8, a NUL byte, or a JSON string with \u0000 or an unpaired UTF-16
// surrogate escape (PostgreSQL's json and jsonb refuse both; Go's decoder
// turns the latter into U+FFFD).
//
// Which bodies: JSON, text, and those without a Content-Type are checked
// before the handler runs. Multipart bodies are left to their handlers:
// their parts may be binary files. A body of any other declared type
// (image/png sent where JSON is expected) is not refused here, since the
// handler may well answer 415 without reading it; it is checked as it is
// read instead, so a handler that decodes it regardless gets a read error
// rather than the offending bytes.
func ValidText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkURL(r.URL); err != nil {
			refuse(w, r, err)
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		switch bodyKind(r) {
		case multipartBody:
			next.ServeHTTP(w, r)
			return
		case otherBody:
			r.Body = body{Reader: &checkingReader{r: r.Body, sc: &Scanner{}}, Closer: r.Body}
			next.ServeHTTP(w, r)
			return
		}
		var sc Scanner
		head, err := io.ReadAll(io.LimitReader(r.Body, MaxChecked+1))
		if verr := sc.Check(head); verr != nil {
			refuse(w, r, verr)
			return
		}
		var rest io.Reader
		switch {
		case err != nil:
			// The handler meets the read error where it would have.
			rest = errReader{err}
		case len(head) > MaxChecked:
			rest = &checkingReader{r: r.Body, sc: &sc}
		default:
			if verr := sc.End(); verr != nil {
				refuse(w, r, verr)
				return
			}
			rest = http.NoBody
		}
		r.Body = body{Reader: io.MultiReader(bytes.NewReader(head), rest), Closer: r.Body}
		next.ServeHTTP(w, r)
	})
}

func refuse(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		problem.Write(w, r, e.Problem())
		return
	}
	problem.Error(w, r, http.StatusBadRequest, err.Error())
}

const (
	textBody = iota
	multipartBody
	otherBody
)

// bodyKind sorts a body by its declared type; a missing or unparsable
// Content-Type counts as text (handlers that ignore it decode JSON).
func bodyKind(r *http.Request) int {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return textBody
	}
	mt, _, err := mime.ParseMediaType(ct)
	switch {
	case err != nil, mt == "application/json", strings.HasSuffix(mt, "+json"), strings.HasPrefix(mt, "text/"):
		return textBody
	case strings.HasPrefix(mt, "multipart/"):
		return multipartBody
	}
	return otherBody
}

// checkURL checks the decoded path and every query name and value.
func checkURL(u *url.URL) error {
	if why := badText(u.Path); why != "" {
		return &Error{Where: "path", Why: why}
	}
	// ParseQuery keeps the pairs it could decode; malformed ones are
	// dropped by handlers' Query() alike and so reach nothing.
	q, _ := url.ParseQuery(u.RawQuery)
	for k, vs := range q {
		if why := badText(k); why != "" {
			return &Error{Where: "a query parameter name", Why: why}
		}
		for _, v := range vs {
			if why := badText(v); why != "" {
				return &Error{Where: fmt.Sprintf("query parameter %q", k), Why: why}
			}
		}
	}
	return nil
}

func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains NUL"
	}
	return ""
}

type body struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// checkingReader checks a body as it is read. A piece with offending text
// is withheld whole, so the reader never gets any of it.
type checkingReader struct {
	r   io.Reader
	sc  *Scanner
	err error
}

func (c *checkingReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if verr := c.sc.Check(p[:n]); verr != nil {
		c.err = verr
		return 0, verr
	}
	if err == io.EOF {
		if verr := c.sc.End(); verr != nil {
			c.err = verr
			return 0, verr
		}
	}
	return n, err
}

// Scanner checks a JSON text handed to it in pieces of any size: valid UTF-8,
// no NUL byte, and within strings no \u0000 escape and no UTF-16
// surrogate escape without its partner. It does not check JSON syntax:
// the handler's decoder does.
type Scanner struct {
	off     int64 // bytes accepted so far
	carry   []byte
	state   state
	unit    rune // the \u escape being read
	digits  int
	pending bool // a high surrogate escape waits for its low half
}

type state uint8

const (
	outside state = iota
	inString
	inEscape
	inUnicode
)

// Check checks p, the text that follows what was checked before.
func (s *Scanner) Check(p []byte) error {
	data := p
	if len(s.carry) > 0 {
		data = append(s.carry, p...)
		s.off -= int64(len(s.carry))
		s.carry = nil
	}
	for i := 0; i < len(data); {
		b := data[i]
		if b < utf8.RuneSelf {
			if err := s.ascii(b); err != nil {
				return err
			}
			i++
			s.off++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			if !utf8.FullRune(data[i:]) {
				// A character cut by the piece boundary: finish it next time.
				s.carry = append([]byte(nil), data[i:]...)
				s.off += int64(len(s.carry))
				return nil
			}
			return s.fail("is not valid UTF-8")
		}
		if err := s.other(); err != nil {
			return err
		}
		i += size
		s.off += int64(size)
	}
	return nil
}

// End reports a character left incomplete at the end of the text.
func (s *Scanner) End() error {
	if len(s.carry) > 0 {
		s.off -= int64(len(s.carry))
		return s.fail("is not valid UTF-8 (it ends inside a character)")
	}
	return nil
}

func (s *Scanner) fail(why string) error {
	return &Error{Where: "body", Why: fmt.Sprintf("%s at byte %d", why, s.off)}
}

func (s *Scanner) ascii(b byte) error {
	if b == 0 {
		return s.fail("contains NUL")
	}
	switch s.state {
	case outside:
		if b == '"' {
			s.state = inString
		}
	case inString:
		switch {
		case b == '\\':
			s.state = inEscape
		case s.pending:
			return s.fail(`has a UTF-16 high surrogate escape without its low half`)
		case b == '"':
			s.state = outside
		}
	case inEscape:
		if b == 'u' {
			s.state, s.unit, s.digits = inUnicode, 0, 0
			return nil
		}
		if s.pending {
			return s.fail(`has a UTF-16 high surrogate escape without its low half`)
		}
		s.state = inString
	case inUnicode:
		v, ok := hexValue(b)
		if !ok {
			s.state, s.pending = inString, false // malformed: the decoder refuses it
			return nil
		}
		s.unit = s.unit<<4 | v
		if s.digits++; s.digits == 4 {
			s.state = inString
			return s.escaped(s.unit)
		}
	}
	return nil
}

// other is a non-ASCII character: text inside a string, a syntax error
// (the decoder's to report) anywhere else.
func (s *Scanner) other() error {
	switch s.state {
	case inString:
		if s.pending {
			return s.fail(`has a UTF-16 high surrogate escape without its low half`)
		}
	case inEscape, inUnicode:
		s.state, s.pending = inString, false
	}
	return nil
}

func (s *Scanner) escaped(u rune) error {
	switch {
	case u == 0:
		return s.fail(`has \u0000 in a JSON string`)
	case s.pending:
		if u < 0xDC00 || u > 0xDFFF {
			return s.fail(`has a UTF-16 high surrogate escape without its low half`)
		}
		s.pending = false
	case u >= 0xD800 && u <= 0xDBFF:
		s.pending = true
	case u >= 0xDC00 && u <= 0xDFFF:
		return s.fail(`has a UTF-16 low surrogate escape without its high half`)
	}
	return nil
}

func hexValue(b byte) (rune, bool) {
	switch {
	case b >= '0' && b <= '9':
		return rune(b - '0'), true
	case b >= 'a' && b <= 'f':
		return rune(b-'a') + 10, true
	case b >= 'A' && b <= 'F':
		return rune(b-'A') + 10, true
	}
	return 0, false
}
