// Package httpjson writes the JSON body of a successful HTTP response, as
// package problem writes the body of a failed one, so every service answers
// in the same form.
package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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

// ReadStrict decodes r's body into v: application/json, at most limit
// bytes, one value with no field v does not have and nothing after it.
// On failure it returns the status to answer (415 for another media type,
// 400 otherwise) and an error that says what is wrong, for the problem's
// detail.
func ReadStrict(w http.ResponseWriter, r *http.Request, limit int64, v any) (int, error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, errors.New("the body must be application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return http.StatusBadRequest, errors.New("body: data after the JSON object")
	}
	return 0, nil
}
