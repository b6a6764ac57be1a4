// Package wire names what the fabric writes on a message besides its body:
// the AMQP headers it sets and the dead-letter reasons it records. They are
// the fabric's wire contract with itself (consumer, DLQ, replay, inbox), not
// an API: services read a dead letter's reason through the DLQ API, and
// tests that assert the wire spell the header out, as a peer on the broker
// would.
package wire

// Header names the fabric sets on messages.
const (
	HeaderTenant       = "x-tenant-id"
	HeaderCorrelation  = "x-correlation-id"
	HeaderAttempts     = "x-fabric-attempts"
	HeaderEventID      = "x-fabric-event-id"
	HeaderConsumer     = "x-fabric-consumer"
	HeaderError        = "x-fabric-error"
	HeaderErrorClass   = "x-fabric-error-class"
	HeaderReason       = "x-fabric-reason"
	HeaderLastAttempt  = "x-fabric-last-attempt"
	HeaderOrigExchange = "x-fabric-original-exchange"
	HeaderOrigRouting  = "x-fabric-original-routing-key"
	HeaderReplayedBy   = "x-fabric-replayed-by"
	HeaderReplayedAt   = "x-fabric-replayed-at"
)

// Dead-letter reasons recorded in HeaderReason.
const (
	ReasonInvalidEnvelope  = "INVALID_ENVELOPE"
	ReasonUnknownType      = "UNKNOWN_TYPE"
	ReasonSchema           = "SCHEMA_INVALID"
	ReasonTenantMissing    = "TENANT_MISSING"
	ReasonTenantMismatch   = "TENANT_MISMATCH"
	ReasonDepth            = "REACTION_DEPTH_EXCEEDED"
	ReasonCycle            = "CAUSATION_CYCLE"
	ReasonHandlerInvalid   = "HANDLER_INVALID"
	ReasonPermanent        = "PERMANENT_FAILURE"
	ReasonRetriesExhausted = "RETRIES_EXHAUSTED"
	ReasonDeliveryLimit    = "DELIVERY_LIMIT"
	ReasonInboxConflict    = "INBOX_CONFLICT"
)

// OutboxChannel is the LISTEN/NOTIFY channel on which an outbox tells its
// schema's relay that rows were committed.
func OutboxChannel(schema string) string { return "fabric_outbox_" + schema }

// Stored header keys carrying a codec's AMQP properties from the outbox to
// the relay, which sends them as properties, not headers. Rows without
// them (the platform's envelope) are sent as they always were.
const (
	StoredType        = "amqp:type"
	StoredCorrelation = "amqp:correlation-id"
)
