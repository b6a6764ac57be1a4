// Package envelope defines the JSON envelope every platform message travels
// in: identity (a UUIDv7), type with its version ("request.submitted.v1"),
// tenant, producer, time, correlation and causation, and the payload.
//
// A message starts a chain with New, and a message caused by another
// continues it with Derive, which keeps the correlation id, sets the
// causation to the cause's id and extends the chain, so the fabric can stop
// reaction loops (a depth limit, a cycle check):
//
//	e, err := envelope.New("request.submitted.v1", tenantID, "request", payload)
//	next, err := envelope.Derive(cause, "workflow.process-started.v1", "workflow", payload)
//
// Producers are strict and consumers tolerant: Validate checks an envelope
// as a producer must write it, ValidateIncoming as a consumer reads it
// (added envelope fields are accepted and kept, within bounds). Decode
// reads a body with a size and depth limit and reports which field is
// wrong (FieldError), which the consumer turns into a dead letter naming
// the reason.
package envelope
