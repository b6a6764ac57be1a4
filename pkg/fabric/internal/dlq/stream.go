package dlq

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/internal/progress"
)

// StreamType is the media type of a replay or purge answered as it goes:
// one JSON object per line, {"progress": Progress} while letters are
// handled, then {"result": Result}, what the call would have answered
// without streaming. A client asks for it with Accept (the console does,
// to show progress on a large DLQ).
const StreamType = "application/x-ndjson"

// Progress is one progress line of a streamed operation.
type Progress struct {
	Done  int    `json:"done"`
	Total int    `json:"total"`
	Line  string `json:"line"` // "120/500 letters examined, 40/s, ETA 9s"
}

// Result is the last line of a streamed operation: the status and body the
// call would have answered (a Report, or a problem).
type Result struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// StreamLine is one line of a streamed operation: exactly one field is set.
type StreamLine struct {
	Progress *Progress `json:"progress,omitempty"`
	Result   *Result   `json:"result,omitempty"`
}

// streams reports whether the client asked for StreamType.
func streams(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == StreamType {
			return true
		}
	}
	return false
}

// progressEvery spaces progress lines: a walk of thousands of letters
// sends a few lines a second, not one per letter.
const progressEvery = 200 * time.Millisecond

type stream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	enc   *json.Encoder
	meter *progress.Meter
	last  time.Time
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", StreamType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, enc: json.NewEncoder(w), meter: progress.Start("letters examined", time.Now)}
}

func (s *stream) progress(done, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if done < total && now.Sub(s.last) < progressEvery {
		return
	}
	s.last = now
	s.write(StreamLine{Progress: &Progress{Done: done, Total: total, Line: s.meter.Line(done, total)}})
}

func (s *stream) result(c *capture) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body := bytes.TrimSpace(c.body.Bytes())
	if !json.Valid(body) {
		body, _ = json.Marshal(string(body))
	}
	s.write(StreamLine{Result: &Result{Status: c.status, Body: body}})
}

func (s *stream) write(l StreamLine) {
	_ = s.enc.Encode(l)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// capture keeps what a handler answers, to send it as a stream's result.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(p)
}
