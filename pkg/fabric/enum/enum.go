// Package enum reads extensible enumerations: catalog fields marked
// "x-extensible", whose values may grow without a new contract version
// (docs/contract-evolution.md). A consumer built before a value existed still receives it,
// and Go's type system makes the handler decide what an unknown value means
// to it instead of mistaking it for one it knows.
package enum

import (
	"encoding/json"
	"fmt"
)

// known is a string type that knows its own values: Known reports whether v
// is one the code was written for.
type known interface {
	~string
	Known() bool
}

// Open is a received value of an extensible enumeration of T. The only way
// to get a T out of it is Value, which says whether the value is known; an
// unknown value stays available, as received, through Raw.
type Open[T known] struct {
	raw string
}

// Of returns the Open holding v, for producers and tests.
func Of[T known](v T) Open[T] { return Open[T]{raw: string(v)} }

// Value returns the value and whether it is one of T's known values. When it
// is not, the T returned is the raw value, which T's methods do not know.
func (o Open[T]) Value() (T, bool) {
	v := T(o.raw)
	return v, v.Known()
}

// Raw returns the value exactly as received, known or not: for logs,
// projections keyed by value, and forwarding.
func (o Open[T]) Raw() string { return o.raw }

// String returns Raw.
func (o Open[T]) String() string { return o.raw }

// MarshalJSON writes the value as received.
func (o Open[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.raw) }

// UnmarshalJSON accepts any JSON string; anything else, null included, is
// an error, since extension adds values, never types.
func (o *Open[T]) UnmarshalJSON(data []byte) error {
	var s string
	if string(data) == "null" || json.Unmarshal(data, &s) != nil {
		return fmt.Errorf("extensible enumeration: %s is not a string", data)
	}
	o.raw = s
	return nil
}
