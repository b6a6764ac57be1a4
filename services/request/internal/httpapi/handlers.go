package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/keyset"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/request/internal/request"
)

// Requests is the request store the handlers use.
type Requests interface {
	Submit(ctx context.Context, a request.Actor, sub request.Submission, key, bodyHash string) (request.Receipt, bool, error)
	Get(ctx context.Context, a request.Actor, id string) (request.Request, error)
	List(ctx context.Context, a request.Actor, p request.Page) ([]request.Request, error)
	Cancel(ctx context.Context, a request.Actor, id, reason string) (request.Request, error)
	Documents(ctx context.Context, a request.Actor, id string) ([]request.Document, error)
}

// Uploader attaches files to requests.
type Uploader interface {
	Upload(ctx context.Context, a request.Actor, requestID string, u request.Upload) (request.Document, error)
}

// maxSubmissionBytes bounds a submission body: form fields, not files.
const maxSubmissionBytes = 256 << 10

// maxCancelBytes bounds a cancellation's body: a reason.
const maxCancelBytes = 8 << 10

const maxIdempotencyKey = 255

func actor(r *http.Request) request.Actor {
	c, _ := auth.FromContext(r.Context())
	return request.Actor{TenantID: c.TenantID, Subject: c.Subject,
		Attendant: c.Has(auth.RoleAttendant) || c.Has(auth.RoleOperator)}
}

func handleSubmit(store Requests, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sub request.Submission
		if err := httpjson.ReadStrict(w, r, maxSubmissionBytes, &sub); err != nil {
			writeError(w, r, log, err)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if err := checkIdempotencyKey(key, r.Header.Values("Idempotency-Key")); err != nil {
			problem.Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		if err := sub.Validate(); err != nil {
			writeError(w, r, log, err)
			return
		}
		hash, err := sub.Hash()
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		rc, replayed, err := store.Submit(r.Context(), actor(r), sub, key, hash)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		w.Header().Set("Location", "/v1/requests/"+rc.ID)
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		httpjson.Write(w, http.StatusCreated, rc)
	})
}

func checkIdempotencyKey(key string, all []string) error {
	if len(all) > 1 {
		return errors.New("send one Idempotency-Key header")
	}
	if len(all) == 1 && (key == "" || len(key) > maxIdempotencyKey) {
		return fmt.Errorf("Idempotency-Key must have 1 to %d characters", maxIdempotencyKey)
	}
	for _, c := range key {
		if c < 0x21 || c > 0x7e {
			return errors.New("Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return nil
}

// badRequest is a multipart body that cannot be read as an upload (400).
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// requestView is a request as the API shows it.
type requestView struct {
	ID            string          `json:"id"`
	Protocol      string          `json:"protocol"`
	Status        request.Status  `json:"status"`
	StatusReason  string          `json:"statusReason,omitempty"`
	ServiceID     string          `json:"serviceId"`
	FormID        string          `json:"formId"`
	FormVersion   int             `json:"formVersion"`
	Channel       string          `json:"channel"`
	CitizenID     string          `json:"citizenId"`
	Fields        json.RawMessage `json:"fields"`
	SLABreached   bool            `json:"slaBreached"`
	SLABreachedAt *time.Time      `json:"slaBreachedAt,omitempty"`
	SubmittedAt   time.Time       `json:"submittedAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	// CorrelationID ties every event about the request together; it is
	// also the id of its request.submitted.v1 event (a root event is its
	// own correlation), which the data lake's lineage is keyed by.
	CorrelationID string `json:"correlationId"`
}

func handleGet(store Requests, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := store.Get(r.Context(), actor(r), chi.URLParam(r, "id"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, requestView{
			ID: req.ID, Protocol: req.Protocol, Status: req.Status, StatusReason: req.StatusReason,
			ServiceID: req.ServiceID, FormID: req.FormID, FormVersion: req.FormVersion, Channel: req.Channel,
			CitizenID: req.CitizenID, Fields: req.Fields, SLABreached: req.SLABreachedAt != nil,
			SLABreachedAt: req.SLABreachedAt, SubmittedAt: req.SubmittedAt, UpdatedAt: req.UpdatedAt,
			CorrelationID: req.CorrelationID,
		})
	})
}

// handleCancel serves POST /v1/requests/{id}/cancel for the citizen who
// submitted the request, with an optional body {"reason": "…"}. It is
// idempotent: cancelling a cancelled request answers the same 200.
func handleCancel(store Requests, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		// The body is optional: an empty one is no reason.
		if err := httpjson.ReadStrict(w, r, maxCancelBytes, &body); err != nil && !errors.Is(err, io.EOF) {
			writeError(w, r, log, err)
			return
		}
		if n := len([]rune(body.Reason)); n > request.MaxReasonLength {
			problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: "invalid cancellation",
				Errors: map[string]any{"reason": fmt.Sprintf("is %d characters, at most %d", n, request.MaxReasonLength)}})
			return
		}
		req, err := store.Cancel(r.Context(), actor(r), chi.URLParam(r, "id"), body.Reason)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, summary(req))
	})
}

// Page sizes of GET /v1/requests.
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// listItem is a request in a listing: what a citizen's "my requests" page
// shows, without the form's contents (GET /v1/requests/{id} has them).
type listItem struct {
	ID           string         `json:"id"`
	Protocol     string         `json:"protocol"`
	Status       request.Status `json:"status"`
	StatusReason string         `json:"statusReason,omitempty"`
	ServiceID    string         `json:"serviceId"`
	Channel      string         `json:"channel"`
	CitizenID    string         `json:"citizenId"`
	SLABreached  bool           `json:"slaBreached"`
	SubmittedAt  time.Time      `json:"submittedAt"`
	UpdatedAt    time.Time      `json:"updatedAt"`
}

func summary(r request.Request) listItem {
	return listItem{ID: r.ID, Protocol: r.Protocol, Status: r.Status, StatusReason: r.StatusReason,
		ServiceID: r.ServiceID, Channel: r.Channel, CitizenID: r.CitizenID, SLABreached: r.SLABreachedAt != nil,
		SubmittedAt: r.SubmittedAt, UpdatedAt: r.UpdatedAt}
}

type listPage struct {
	Items []listItem `json:"items"`
	// NextCursor, when present, fetches the next page (?cursor=).
	NextCursor string `json:"nextCursor,omitempty"`
}

// handleList serves GET /v1/requests: a citizen's own requests, or every
// request of a staff member's tenant, newest first, ?status= to filter,
// ?limit= (1-100, 20) and ?cursor= (from the previous page) to page.
func handleList(store Requests, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		bad := map[string]any{}
		p := request.Page{Limit: defaultPageSize, Status: request.Status(q.Get("status"))}
		if p.Status != "" && !p.Status.Known() {
			bad["status"] = "must be one of submitted, in_progress, completed, rejected, cancelled"
		}
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxPageSize {
				bad["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", maxPageSize)
			}
			p.Limit = n
		}
		if v := q.Get("cursor"); v != "" {
			pos, err := decodeCursor(v)
			if err != nil {
				bad["cursor"] = "is not a cursor this API returned"
			}
			p.After = pos
		}
		if len(bad) > 0 {
			problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: "invalid query parameters", Errors: bad})
			return
		}
		want := p.Limit
		p.Limit++ // one more tells whether a next page exists
		reqs, err := store.List(r.Context(), actor(r), p)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		page := listPage{Items: []listItem{}}
		if len(reqs) > want {
			reqs = reqs[:want]
			last := reqs[want-1]
			page.NextCursor = encodeCursor(request.Position{SubmittedAt: last.SubmittedAt, ID: last.ID})
		}
		for _, rq := range reqs {
			page.Items = append(page.Items, summary(rq))
		}
		httpjson.Write(w, http.StatusOK, page)
	})
}

// A cursor is the position of a page's last request (package keyset).
func encodeCursor(p request.Position) string {
	return keyset.Encode(keyset.Position{At: p.SubmittedAt, ID: p.ID})
}

func decodeCursor(s string) (*request.Position, error) {
	p, err := keyset.Decode(s)
	if err != nil {
		return nil, err
	}
	return &request.Position{SubmittedAt: p.At, ID: p.ID}, nil
}

// allowedTypes are the document types the platform can read (OCR, PDF text).
var allowedTypes = []string{"image/png", "image/jpeg", "image/tiff", "application/pdf", "text/plain"}

// sniff returns the media type of a file from its first bytes. Go's sniffer
// does not know TIFF, so its two byte-order signatures are checked first.
func sniff(head []byte) string {
	if bytes.HasPrefix(head, []byte("II*\x00")) || bytes.HasPrefix(head, []byte("MM\x00*")) {
		return "image/tiff"
	}
	mt, _, err := mime.ParseMediaType(http.DetectContentType(head))
	if err != nil {
		return "application/octet-stream"
	}
	return mt
}

func handleUpload(up Uploader, maxBytes int64, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Headroom for the multipart framing; the file itself is counted exactly.
		body := http.MaxBytesReader(w, r.Body, maxBytes+1<<20)
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || (mt != "multipart/form-data" && mt != "multipart/mixed") || params["boundary"] == "" {
			problem.Error(w, r, http.StatusUnsupportedMediaType, "the body must be multipart/form-data with a part named \"file\"")
			return
		}
		watch := newCloseWatch(body, params["boundary"])
		file, err := receiveFile(multipart.NewReader(watch, params["boundary"]), watch, maxBytes)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		defer file.Close()
		if file.size == 0 {
			problem.Error(w, r, http.StatusBadRequest, "the file is empty")
			return
		}
		ct := sniff(file.head)
		if !slices.Contains(allowedTypes, ct) {
			problem.Error(w, r, http.StatusUnsupportedMediaType,
				fmt.Sprintf("content type %s is not accepted; allowed: %s", ct, strings.Join(allowedTypes, ", ")))
			return
		}
		doc, err := up.Upload(r.Context(), actor(r), chi.URLParam(r, "id"), request.Upload{
			FileName: file.name, ContentType: ct, MaxSize: maxBytes, Body: file,
		})
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusCreated, doc)
	})
}

// spooledFile is the part named "file", received whole and kept in a
// temporary file until it is stored.
type spooledFile struct {
	*os.File
	name string // as the client named it
	size int64
	head []byte // the first bytes, for sniffing
}

// Close closes and deletes the temporary file.
func (f *spooledFile) Close() error {
	err := f.File.Close()
	if rerr := os.Remove(f.File.Name()); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// receiveFile reads the multipart body to its closing boundary and returns
// its part named "file". Nothing may be stored before it returns: a body
// cut short (mid-file, or before the closing boundary) reads like a
// shorter file, and an object stored from it would pass for the whole
// document with the OCR worker.
func receiveFile(mr *multipart.Reader, watch *closeWatch, maxBytes int64) (*spooledFile, error) {
	var file *spooledFile
	fail := func(err error) (*spooledFile, error) {
		if file != nil {
			file.Close()
		}
		return nil, err
	}
	for {
		part, err := mr.NextPart()
		// A bare io.EOF is the closing boundary, or a body that stopped
		// right after a part's opening delimiter (the watch tells them
		// apart); a body that stops anywhere else makes NextPart return
		// an error wrapping io.EOF.
		if err == io.EOF {
			if !watch.seen {
				return fail(readError(io.ErrUnexpectedEOF))
			}
			break
		}
		if err != nil {
			return fail(readError(err))
		}
		if part.FormName() != "file" {
			// Unused, but read to its end: the stream must still be whole.
			if _, err := io.Copy(io.Discard, part); err != nil {
				return fail(readError(err))
			}
			continue
		}
		if file != nil {
			return fail(&badRequest{"more than one part named \"file\""})
		}
		if file, err = spool(part, maxBytes); err != nil {
			return fail(err)
		}
	}
	if file == nil {
		return nil, &badRequest{"no part named \"file\""}
	}
	return file, nil
}

// spool copies part to a temporary file: ErrTooLarge beyond maxBytes, a
// bad request when the part cannot be read to its end.
func spool(part *multipart.Part, maxBytes int64) (*spooledFile, error) {
	tmp, err := os.CreateTemp("", "request-upload-*")
	if err != nil {
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	f := &spooledFile{File: tmp, name: part.FileName()}
	src := &readErrors{r: io.LimitReader(part, maxBytes+1)}
	n, err := io.Copy(tmp, src)
	switch {
	case src.err != nil:
		f.Close()
		return nil, readError(src.err)
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("spool upload to %s: %w", tmp.Name(), err)
	case n > maxBytes:
		f.Close()
		return nil, request.ErrTooLarge
	}
	f.size = n
	f.head = make([]byte, min(n, 512))
	if _, err := tmp.ReadAt(f.head, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool upload %s: read back: %w", tmp.Name(), err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool upload %s: rewind: %w", tmp.Name(), err)
	}
	return f, nil
}

// readErrors remembers a read error other than io.EOF, so a failing client
// (400) is told apart from a failing disk (500).
type readErrors struct {
	r   io.Reader
	err error
}

func (e *readErrors) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// closeWatch passes a multipart body through and notes whether its close
// delimiter ("--" boundary "--" at the start of a line) went by.
// multipart.Reader answers a bare io.EOF both there and when the body
// stops right after a part's opening delimiter, so NextPart alone cannot
// tell a whole body from a cut one. A client never puts its boundary
// inside the content, so the delimiter seen is the real one.
type closeWatch struct {
	r       io.Reader
	pattern []byte // "\n--<boundary>--"
	tail    []byte // the last len(pattern)-1 bytes read
	scratch []byte
	seen    bool
}

func newCloseWatch(r io.Reader, boundary string) *closeWatch {
	pattern := []byte("\n--" + boundary + "--")
	c := &closeWatch{r: r, pattern: pattern, scratch: make([]byte, 0, 2*len(pattern))}
	// A body that starts with the close delimiter (no parts) starts a line.
	c.tail = append(make([]byte, 0, len(pattern)), '\n')
	return c
}

func (c *closeWatch) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n == 0 || c.seen {
		return n, err
	}
	keep := len(c.pattern) - 1
	// The delimiter may straddle two reads: look at the old tail joined
	// to the start of this read, then at this read alone.
	span := append(append(c.scratch[:0], c.tail...), p[:min(n, keep)]...)
	if bytes.Contains(span, c.pattern) || bytes.Contains(p[:n], c.pattern) {
		c.seen = true
		return n, err
	}
	if n >= keep {
		c.tail = append(c.tail[:0], p[n-keep:n]...)
	} else {
		span = append(append(c.scratch[:0], c.tail...), p[:n]...)
		c.tail = append(c.tail[:0], span[max(0, len(span)-keep):]...)
	}
	return n, err
}

// readError classifies a failure reading the request body.
func readError(err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return request.ErrTooLarge
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &badRequest{"the multipart body ends before its closing boundary: the upload is incomplete"}
	}
	return &badRequest{"malformed multipart body: " + err.Error()}
}

func handleListDocuments(store Requests, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		docs, err := store.Documents(r.Context(), actor(r), chi.URLParam(r, "id"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"documents": docs})
	})
}

// writeError answers the errors of the service's own (a submission's
// invalid fields, an upload's body); problem.Fail answers the rest, the
// fabric's kinds (no such request, a conflict) and refused JSON bodies
// included.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var invalid *request.ValidationError
	var bad *badRequest
	switch {
	case errors.As(err, &invalid):
		fields := make(map[string]any, len(invalid.Fields))
		for k, v := range invalid.Fields {
			fields[k] = v
		}
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity,
			Detail: "the submission has invalid fields", Errors: fields})
	case errors.As(err, &bad):
		problem.Error(w, r, http.StatusBadRequest, bad.msg)
	case errors.Is(err, request.ErrTooLarge):
		problem.Error(w, r, http.StatusRequestEntityTooLarge, "the body is larger than allowed")
	default:
		problem.Fail(w, r, log, err)
	}
}
