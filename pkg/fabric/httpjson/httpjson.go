// Package httpjson writes the JSON body of a successful HTTP response, as
// package problem writes the body of a failed one, so every service answers
// in the same form.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write sends v as JSON with status. An encoding error is dropped: the
// status line is already on its way, so the client can only see a
// truncated body, and v is the handler's own value, never client input.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
