package httpjson_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/httpjson"
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
