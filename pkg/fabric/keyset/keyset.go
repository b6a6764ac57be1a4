// Package keyset writes and reads the cursor of a keyset-paged listing:
// the position of a page's last row, (a time, a UUID), opaque to clients as
// base64url of {"t": time, "id": uuid}.
package keyset

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Position is where a page ended: its last row's time and id.
type Position struct {
	At time.Time
	ID string
}

type wire struct {
	T  time.Time `json:"t"`
	ID string    `json:"id"`
}

// errCursor: a cursor this package did not write.
var errCursor = errors.New("not a cursor this API returned")

// Encode returns p's cursor.
func Encode(p Position) string {
	b, _ := json.Marshal(wire{T: p.At.UTC(), ID: p.ID}) // a time and a string always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the position of a cursor Encode wrote (its id in the
// canonical UUID spelling, its time in UTC), or errCursor: not base64url
// JSON of exactly {t, id}, data after it, a zero time, an id that is not a
// UUID.
func Decode(s string) (Position, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Position{}, errCursor
	}
	var c wire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return Position{}, errCursor
	}
	id, err := uuid.Parse(c.ID)
	if err != nil || c.T.IsZero() {
		return Position{}, errCursor
	}
	return Position{At: c.T.UTC(), ID: id.String()}, nil
}
