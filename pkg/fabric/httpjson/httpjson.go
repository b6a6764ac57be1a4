// Package httpjson reads the JSON body of an HTTP request and writes the
// JSON body of a successful response, as package problem writes the body
// of a failed one, so every service reads and answers in the same form.
package httpjson

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// Write sends v as JSON with status. An encoding error is dropped: the
// status line is already on its way, so the client can only see a
// truncated body, and v is the handler's own value, never client input.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ReadStrict decodes r's body into v: application/json (a charset, if
// given, UTF-8), at most limit bytes, one value with no field v does not
// have and nothing after it. Every service reads its bodies with it, so
// the same bad body gets the same answer from all of them.
//
// On failure the error is the problem to answer, with a type of its own
// for each case (see refusals) and its status (415 for another media type,
// 413 for a body over limit, 400 otherwise): problem.Fail writes it.
//
// An empty body is an error that wraps io.EOF, so that a route whose body
// is optional can take it as absent, whatever its Content-Type:
//
//	if err := httpjson.ReadStrict(w, r, limit, &v); err != nil && !errors.Is(err, io.EOF) { … }
//
// NUL bytes and invalid UTF-8 are refused before any handler runs (the
// host's edge checks); a body past what the edge checks up front reaches
// this reader as a read error that is its own problem, and is returned as
// it is.
func ReadStrict(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	return read(w, r, limit, v)
}

func read(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body := bufio.NewReader(http.MaxBytesReader(w, r.Body, limit))
	// An empty body is told apart before the media type is judged: a
	// route with an optional body takes none with any Content-Type. Any
	// other outcome of the peek, an error included, is a body.
	_, peekErr := body.Peek(1)
	empty := errors.Is(peekErr, io.EOF)
	if !isJSON(r.Header.Get("Content-Type")) {
		e := refuse(mediaType, "the body must be application/json")
		if empty {
			e.cause = io.EOF
		}
		return e
	}
	if empty {
		return &bodyError{refusal: bodyEmpty, detail: "the body is empty; it must be a JSON object", cause: io.EOF}
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if e := readError(err, limit); e != nil {
			return e
		}
		return refuse(trailingData, "the body has data after its JSON value")
	}
	return nil
}

// isJSON reports whether ct is application/json, with no charset or UTF-8
// (RFC 8259 has JSON in UTF-8 only: a body declared in another charset
// would be read as something else than was meant).
func isJSON(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// decodeError says which refusal a Decode error is.
func decodeError(err error, limit int64) error {
	if e := readError(err, limit); e != nil {
		return e
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF): // white space only
		return &bodyError{refusal: bodyEmpty, detail: "the body is empty; it must be a JSON object", cause: io.EOF}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return refuse(malformed, "the body is not JSON: it ends inside a value")
	case errors.As(err, &syntax):
		return refuse(malformed, fmt.Sprintf("the body is not JSON: %s (at byte %d)", strings.TrimPrefix(syntax.Error(), "json: "), syntax.Offset))
	case errors.As(err, &typ):
		where := "the body"
		if typ.Field != "" {
			where = fmt.Sprintf("field %q", typ.Field)
		}
		return refuse(wrongType, fmt.Sprintf("%s cannot be a JSON %s", where, typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no error type for it.
		return refuse(unknownField, "the body has "+strings.TrimPrefix(err.Error(), "json: "))
	}
	return refuse(malformed, "the body is not JSON: "+strings.TrimPrefix(err.Error(), "json: "))
}

// readError is the refusal for an error reading the body itself (not its
// JSON), or nil: a body over limit, or text the edge refuses (an error
// that is its own problem, returned as it is).
func readError(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	var own interface{ Problem() problem.Details }
	switch {
	case errors.As(err, &tooBig):
		return refuse(tooLarge, fmt.Sprintf("the body is larger than the %d bytes this route accepts", limit))
	case errors.As(err, &own):
		return err
	}
	return nil
}

// A refusal is one way a body can be wrong: its status and its problem
// type, a URI that stays the same whichever service answers, so that a
// client can tell the cases apart without reading the detail. Each is
// described at its anchor of docs/problems.md.
type refusal struct {
	status      int
	slug, title string
}

// typeBase is where the problem types are described.
const typeBase = "https://github.com/agora-platform/agora/blob/main/docs/problems.md#"

var (
	mediaType    = refusal{http.StatusUnsupportedMediaType, "unsupported-media-type", "The body is not application/json"}
	tooLarge     = refusal{http.StatusRequestEntityTooLarge, "body-too-large", "The body is larger than the route accepts"}
	bodyEmpty    = refusal{http.StatusBadRequest, "body-empty", "The body is empty"}
	malformed    = refusal{http.StatusBadRequest, "malformed-json", "The body is not JSON"}
	unknownField = refusal{http.StatusBadRequest, "unknown-field", "The body has a field the route does not know"}
	trailingData = refusal{http.StatusBadRequest, "trailing-data", "The body has data after its JSON value"}
	wrongType    = refusal{http.StatusBadRequest, "wrong-json-type", "A value of the body has the wrong JSON type"}
)

// bodyError is a body ReadStrict refuses; problem.Fail answers it with
// Problem.
type bodyError struct {
	refusal
	detail string
	cause  error // io.EOF for an empty body
}

func refuse(r refusal, detail string) *bodyError { return &bodyError{refusal: r, detail: detail} }

func (e *bodyError) Error() string { return e.detail }
func (e *bodyError) Unwrap() error { return e.cause }

// Problem is the problem that answers the body.
func (e *bodyError) Problem() problem.Details {
	return problem.Details{Type: typeBase + e.slug, Title: e.title, Status: e.status, Detail: e.detail}
}
