package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Span is one finished span as the services' stdouttrace exporter wrote it
// (OTEL_TRACES_FILE), flattened for assertions.
type Span struct {
	Name         string
	Service      string // resource attribute service.name
	TraceID      string // hex; all zeros never appear
	SpanID       string
	ParentSpanID string // "0000000000000000" for a root span
	Kind         int    // trace.SpanKind (1 internal, 2 server, 3 client, 4 producer, 5 consumer)
	Start, End   time.Time
	Attributes   map[string]any
	File         string // the span file it came from
}

// IsRoot reports whether the span has no parent.
func (s Span) IsRoot() bool { return strings.Trim(s.ParentSpanID, "0") == "" }

// rawSpan mirrors the JSON of tracetest.SpanStub, the exporter's format.
type rawSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	SpanKind    int
	StartTime   time.Time
	EndTime     time.Time
	Attributes  []rawKV
	Resource    []rawKV
}

type rawKV struct {
	Key   string
	Value struct {
		Type  string
		Value any
	}
}

// Spans reads every *.jsonl span file in dir (normally Harness.TracesDir).
// Services flush spans in batches (every 200 ms) and at shutdown, so poll
// with fabrictest.Eventually, or Stop the services first, before asserting
// on a complete trace. A file that is being written may end in a partial
// line; that line is ignored.
func Spans(t testing.TB, dir string) []Span {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatalf("spans: %v", err)
	}
	var out []Span
	for _, f := range files {
		spans, err := readSpans(f)
		if err != nil {
			t.Fatalf("spans: %v", err)
		}
		out = append(out, spans...)
	}
	return out
}

func readSpans(path string) ([]Span, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	dec := json.NewDecoder(fh)
	var out []Span
	for {
		var r rawSpan
		err := dec.Decode(&r)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: span %d: %w", path, len(out)+1, err)
		}
		s := Span{Name: r.Name, TraceID: r.SpanContext.TraceID, SpanID: r.SpanContext.SpanID,
			ParentSpanID: r.Parent.SpanID, Kind: r.SpanKind, Start: r.StartTime, End: r.EndTime,
			Attributes: map[string]any{}, File: path}
		for _, kv := range r.Attributes {
			s.Attributes[kv.Key] = kv.Value.Value
		}
		for _, kv := range r.Resource {
			if kv.Key == "service.name" {
				s.Service, _ = kv.Value.Value.(string)
			}
		}
		out = append(out, s)
	}
}

// Trace returns the spans of spans with trace id.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}
