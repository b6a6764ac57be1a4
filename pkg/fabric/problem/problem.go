// Package problem writes RFC 9457 problem details, the platform's one
// error format for HTTP.
package problem

import (
	"encoding/json"
	"net/http"
)

// Details is an RFC 9457 problem object.
type Details struct {
	Type     string         `json:"type,omitempty"`
	Title    string         `json:"title"`
	Status   int            `json:"status"`
	Detail   string         `json:"detail,omitempty"`
	Instance string         `json:"instance,omitempty"`
	Errors   map[string]any `json:"errors,omitempty"`
}

// Write sends p with status p.Status and content type application/problem+json.
func Write(w http.ResponseWriter, r *http.Request, p Details) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Error writes a problem with status and a detail message.
func Error(w http.ResponseWriter, r *http.Request, status int, detail string) {
	Write(w, r, Details{Status: status, Detail: detail})
}
