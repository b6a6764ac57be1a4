package httpjson_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		v        any
		wantBody string
	}{
		{"object", http.StatusOK, map[string]int{"count": 2}, `{"count":2}` + "\n"},
		{"created", http.StatusCreated, struct {
			ID string `json:"id"`
		}{"r-1"}, `{"id":"r-1"}` + "\n"},
		{"empty list, not null", http.StatusOK, []string{}, "[]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			httpjson.Write(w, tt.status, tt.v)
			if w.Code != tt.status || w.Body.String() != tt.wantBody || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("got %d %q %q, want %d %q application/json", w.Code, w.Body, w.Header().Get("Content-Type"), tt.status, tt.wantBody)
			}
		})
	}
}

func TestReadStrict(t *testing.T) {
	type body struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	const (
		ctJSON = "application/json"
		base   = "https://github.com/agora-platform/agora/blob/main/docs/problems.md#"
	)
	tests := []struct {
		name        string
		contentType string
		body        string
		wantStatus  int    // 0: read
		wantType    string // the problem type's anchor
		wantEOF     bool   // the error wraps io.EOF: an optional body may be absent
	}{
		{"object", ctJSON, `{"name":"a","n":1}`, 0, "", false},
		{"charset utf-8", "application/json; charset=UTF-8", `{"name":"a"}`, 0, "", false},
		{"white space around", ctJSON, " \n{\"n\":2}\n ", 0, "", false},
		{"null", ctJSON, `null`, 0, "", false},
		{"text/plain", "text/plain", `{"name":"a"}`, 415, "unsupported-media-type", false},
		{"no Content-Type", "", `{"name":"a"}`, 415, "unsupported-media-type", false},
		{"another charset", "application/json; charset=latin1", `{"name":"a"}`, 415, "unsupported-media-type", false},
		{"a +json type", "application/merge-patch+json", `{"name":"a"}`, 415, "unsupported-media-type", false},
		{"unparsable Content-Type", "application/json; =", `{"name":"a"}`, 415, "unsupported-media-type", false},
		{"empty, no Content-Type", "", ``, 415, "unsupported-media-type", true},
		{"empty JSON", ctJSON, ``, 400, "body-empty", true},
		{"white space only", ctJSON, " \n ", 400, "body-empty", true},
		{"over the limit", ctJSON, `{"name":"` + strings.Repeat("a", 100) + `"}`, 413, "body-too-large", false},
		{"over the limit after the value", ctJSON, `{"name":"a"}` + strings.Repeat(" ", 100), 413, "body-too-large", false},
		{"unknown field", ctJSON, `{"name":"a","x":1}`, 400, "unknown-field", false},
		{"trailing object", ctJSON, `{"name":"a"} {}`, 400, "trailing-data", false},
		{"trailing garbage", ctJSON, `{"name":"a"}x`, 400, "trailing-data", false},
		{"cut short", ctJSON, `{"name":`, 400, "malformed-json", false},
		{"syntax", ctJSON, `{name:"a"}`, 400, "malformed-json", false},
		{"wrong type of a field", ctJSON, `{"n":"one"}`, 400, "wrong-json-type", false},
		{"wrong type of the body", ctJSON, `["a"]`, 400, "wrong-json-type", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/things", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			var v body
			err := httpjson.ReadStrict(httptest.NewRecorder(), r, 64, &v)
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("ReadStrict = %v; want it read", err)
				}
				return
			}
			var own interface{ Problem() problem.Details }
			if !errors.As(err, &own) || own.Problem().Status != tt.wantStatus {
				t.Fatalf("ReadStrict = %v; want a problem with status %d", err, tt.wantStatus)
			}
			if errors.Is(err, io.EOF) != tt.wantEOF {
				t.Errorf("errors.Is(%v, io.EOF) = %v, want %v", err, !tt.wantEOF, tt.wantEOF)
			}
			w := httptest.NewRecorder()
			problem.Fail(w, r, slog.New(slog.DiscardHandler), err)
			var p problem.Details
			if jerr := json.Unmarshal(w.Body.Bytes(), &p); jerr != nil || w.Code != tt.wantStatus || p.Status != tt.wantStatus ||
				p.Type != base+tt.wantType || p.Title == "" || p.Detail == "" {
				t.Errorf("problem.Fail wrote %d %s (%v), want %d of type #%s with a title and a detail", w.Code, w.Body, jerr, tt.wantStatus, tt.wantType)
			}
		})
	}
}

// A body longer than the edge checks before the handler runs reaches the
// reader as a read error; it is answered as the edge answers a short one.
func TestReadStrictPassesTheEdgesRefusal(t *testing.T) {
	long := `{"name":"` + strings.Repeat("a", edge.MaxChecked) + "\x00\"}"
	var got *httptest.ResponseRecorder
	h := edge.ValidText(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v struct {
			Name string `json:"name"`
		}
		err := httpjson.ReadStrict(w, r, 1<<20, &v)
		problem.Fail(w, r, slog.New(slog.DiscardHandler), err)
	}))
	for name, body := range map[string]string{"short": "{\"name\":\"\x00\"}", "past the edge's head": long} {
		got = httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/things", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(got, r)
		var p problem.Details
		_ = json.Unmarshal(got.Body.Bytes(), &p)
		if got.Code != http.StatusBadRequest || !strings.HasSuffix(p.Type, "#invalid-text") {
			t.Errorf("%s: %d %s, want 400 of type #invalid-text", name, got.Code, got.Body)
		}
	}
}
