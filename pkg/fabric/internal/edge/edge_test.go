package edge_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
)

// serve passes one request through ValidText to a handler that reads the
// whole body; it returns the response and what the handler read.
func serve(t *testing.T, method, target, contentType string, body io.Reader) (rec *httptest.ResponseRecorder, got []byte, called bool, readErr error) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if body != nil {
		req.Body = io.NopCloser(body)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	h := edge.ValidText(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		got, readErr = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, got, called, readErr
}

func wantProblem(t *testing.T, rec *httptest.ResponseRecorder, called bool) {
	t.Helper()
	if rec.Code != http.StatusBadRequest || called {
		t.Fatalf("status %d, handler called %v; want 400 before the handler", rec.Code, called)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p struct {
		Status int
		Detail string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != 400 || p.Detail == "" {
		t.Errorf("problem = %s (%v)", rec.Body, err)
	}
}

func TestValidTextPathAndQuery(t *testing.T) {
	tests := []struct {
		target string
		ok     bool
	}{
		{"/v1/contacts/citizen-1", true},
		{"/v1/contacts/a%C3%A7b", true},
		{"/v1/contacts/a%2Fb", true},
		{"/v1/contacts/a%00b", false},
		{"/v1/contacts/a%FFb", false},
		{"/v1/contacts/a%C3", false},
		{"/v1/notifications?requestId=abc&tag=a%C3%A7", true},
		{"/v1/notifications?requestId=%zz&tag=ok", true}, // malformed pairs never reach a handler
		{"/v1/notifications?requestId=a%00", false},
		{"/v1/notifications?a%00=x", false},
		{"/v1/notifications?requestId=%FF", false},
		{"/v1/notifications?x=1&x=%00", false},
	}
	for _, tc := range tests {
		for _, method := range []string{http.MethodGet, http.MethodPut} {
			rec, _, called, _ := serve(t, method, tc.target, "", nil)
			if tc.ok {
				if rec.Code != http.StatusNoContent || !called {
					t.Errorf("%s %s = %d, want it passed to the handler", method, tc.target, rec.Code)
				}
				continue
			}
			t.Run(method+" "+tc.target, func(t *testing.T) { wantProblem(t, rec, called) })
		}
	}
}

func TestValidTextBodies(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		ok          bool
	}{
		{"plain JSON", "application/json", `{"a":"b","n":[1,2.5,true,null]}`, true},
		{"multi-byte text", "application/json", `{"a":"ação 😀 €"}`, true},
		{"escapes", "application/json", `{"a":"\"\\\/\b\f\n\r\t\u00e7\u20AC"}`, true},
		{"surrogate pair", "application/json", `{"a":"\ud83d\ude00"}`, true},
		{"an escaped backslash before u0000 is text", "application/json", `{"a":"\\u0000"}`, true},
		{"no content type (decoded as JSON anyway)", "", `{"a":"b"}`, true},
		{"empty", "application/json", ``, true},
		{"malformed JSON is the decoder's business", "application/json", `{"a":"\uZZ`, true},
		{`\u0000 in a value`, "application/json", `{"a":"x\u0000y"}`, false},
		{`\u0000 in a key`, "application/json", `{"a\u0000":1}`, false},
		{`\u0000 in a nested array`, "application/json", `{"a":[{"b":["\u0000"]}]}`, false},
		{`\u0000 without a content type`, "", `{"a":"\u0000"}`, false},
		{`\u0000 labelled text/plain`, "text/plain", `{"a":"\u0000"}`, false},
		{`\u0000 with an unparsable content type`, "application/json; =", `{"a":"\u0000"}`, false},
		{"raw NUL in a string", "application/json", "{\"a\":\"x\x00\"}", false},
		{"raw NUL outside strings", "application/json", "{\"a\":1}\x00", false},
		{"invalid UTF-8 in a string", "application/json", "{\"a\":\"\xff\"}", false},
		{"a character cut short", "application/json", "{\"a\":\"\xc3\"}", false},
		{"ends inside a character", "application/json", "{\"a\":\"\xe2\x82", false},
		{"UTF-8-encoded surrogate", "application/json", "{\"a\":\"\xed\xa0\x80\"}", false},
		{"lone high surrogate", "application/json", `{"a":"\ud800"}`, false},
		{"high surrogate then text", "application/json", `{"a":"\ud800x"}`, false},
		{"high surrogate then another escape", "application/json", `{"a":"\ud800\n"}`, false},
		{"high surrogate then a non-surrogate", "application/json", `{"a":"\ud800\u0041"}`, false},
		{"high surrogate then non-ASCII", "application/json", `{"a":"\ud800ç"}`, false},
		{"lone low surrogate", "application/json", `{"a":"\uDC00"}`, false},
		{"multipart is left to its handler", "multipart/form-data; boundary=x", "--x\r\n\r\n\x00\xff\r\n--x--\r\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, piecewise := range []bool{false, true} {
				var body io.Reader = strings.NewReader(tc.body)
				if piecewise {
					body = iotest.OneByteReader(body)
				}
				rec, got, called, readErr := serve(t, http.MethodPost, "/v1/x", tc.contentType, body)
				if !tc.ok {
					wantProblem(t, rec, called)
					continue
				}
				if rec.Code != http.StatusNoContent || readErr != nil || string(got) != tc.body {
					t.Fatalf("status %d, handler read %q (%v); want the body passed through", rec.Code, got, readErr)
				}
			}
			// The scanner's verdict does not depend on where the text is cut.
			for i := 0; i <= len(tc.body) && tc.contentType != "multipart/form-data; boundary=x"; i++ {
				var sc edge.Scanner
				err := sc.Check([]byte(tc.body[:i]))
				if err == nil {
					err = sc.Check([]byte(tc.body[i:]))
				}
				if err == nil {
					err = sc.End()
				}
				if (err == nil) != tc.ok {
					t.Fatalf("cut at byte %d: Scanner says %v", i, err)
				}
			}
		})
	}
}

// A body of a declared non-text type is the handler's to refuse (415); if
// it reads it anyway, offending text reaches it as a read error, never as
// data.
func TestValidTextOtherTypesAreCheckedAsRead(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	tests := []struct {
		name, contentType, body string
		ok                      bool
	}{
		{"an image", "image/png", png, false},
		{"JSON with \\u0000 labelled as an image", "image/png", `{"a":"\u0000"}`, false},
		{"valid JSON labelled as an octet stream", "application/octet-stream", `{"a":"b"}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A handler that refuses the type without reading.
			req := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			rec := httptest.NewRecorder()
			edge.ValidText(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnsupportedMediaType)
			})).ServeHTTP(rec, req)
			if rec.Code != http.StatusUnsupportedMediaType {
				t.Errorf("handler refusing the type: status %d, want its 415", rec.Code)
			}
			// A handler that reads it anyway.
			for _, piecewise := range []bool{false, true} {
				var body io.Reader = strings.NewReader(tc.body)
				if piecewise {
					body = iotest.OneByteReader(body)
				}
				rec, got, called, err := serve(t, http.MethodPost, "/v1/x", tc.contentType, body)
				switch {
				case !called:
					t.Fatalf("status %d: handler not called", rec.Code)
				case tc.ok && (err != nil || string(got) != tc.body):
					t.Fatalf("read %q, %v; want the body", got, err)
				case !tc.ok && (!errors.Is(err, edge.ErrInvalidText) || bytes.IndexByte(got, 0x89) >= 0 || bytes.IndexByte(got, 0) >= 0):
					t.Fatalf("read %q, %v; want edge.ErrInvalidText before any offending byte", got, err)
				}
			}
		})
	}
}

// A body larger than what is checked up front is checked as the handler
// reads on: a refusal then reaches it as a read error.
func TestValidTextLargeBodies(t *testing.T) {
	valid := `{"a":"` + strings.Repeat("ç", edge.MaxChecked) + `"}`
	rec, got, _, err := serve(t, http.MethodPost, "/v1/x", "application/json", strings.NewReader(valid))
	if rec.Code != http.StatusNoContent || err != nil || !bytes.Equal(got, []byte(valid)) {
		t.Fatalf("large valid body: status %d, %d bytes read (%v), want all %d", rec.Code, len(got), err, len(valid))
	}
	late := `{"a":"` + strings.Repeat("x", edge.MaxChecked) + `\u0000"}`
	_, _, called, err := serve(t, http.MethodPost, "/v1/x", "application/json", strings.NewReader(late))
	if !called || !errors.Is(err, edge.ErrInvalidText) {
		t.Fatalf("NUL past the first %d bytes: handler called %v, read error %v; want edge.ErrInvalidText", edge.MaxChecked, called, err)
	}
}
