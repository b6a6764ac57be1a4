// Package payload gives every catalog message a service sends or reads one
// Go type, defined once beside the schema it must satisfy: producers build
// these values and consumers decode into them, so the two sides cannot
// drift apart (payload_test.go marshals each one and validates it against
// the registry's schema for its type).
//
// A field the schema requires never has omitempty. An optional field has
// it where its zero value would break the schema ("" is no "uuid", 0 is
// below a minimum of 1), so an unset value is left out. An enumeration the
// schema marks "x-extensible" is an enum.Open, so a consumer has to say
// what a value newer than its build means (docs/contract-evolution.md).
package payload
