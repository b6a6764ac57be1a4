// Package wire names what the fabric writes on a message besides its body:
// the AMQP headers it sets and the dead-letter reasons it records. They are
// the fabric's wire contract with itself (consumer, DLQ, replay, inbox), not
// an API: services read a dead letter's reason through the DLQ API, and
// tests that assert the wire spell the header out, as a peer on the broker
// would.
package wire

import (
	amqp "github.com/rabbitmq/amqp091-go"
)

// Header names the fabric sets on messages.
const (
	HeaderTenant       = "x-tenant-id"
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
	ReasonInvalidEnvelope = "INVALID_ENVELOPE"
	ReasonUnknownType     = "UNKNOWN_TYPE"
	ReasonSchema          = "SCHEMA_INVALID"
	ReasonTenantMissing   = "TENANT_MISSING"
	ReasonTenantMismatch  = "TENANT_MISMATCH"
	// ReasonTypeNotRouted: the body claims a type other than the routing
	// key the broker authorised the publisher for (a forged label).
	ReasonTypeNotRouted    = "TYPE_NOT_ROUTED"
	ReasonDepth            = "REACTION_DEPTH_EXCEEDED"
	ReasonCycle            = "CAUSATION_CYCLE"
	ReasonHandlerInvalid   = "HANDLER_INVALID"
	ReasonPermanent        = "PERMANENT_FAILURE"
	ReasonRetriesExhausted = "RETRIES_EXHAUSTED"
	ReasonDeliveryLimit    = "DELIVERY_LIMIT"
	ReasonInboxConflict    = "INBOX_CONFLICT"
)

// PlatformScope opts the open transaction into platform scope: until the
// transaction ends or a tenant is set (tenant.Set clears it), the
// row-level security policies of the fabric's tables, and of the tables a
// service sweeps across tenants (timers, holds), admit every tenant's rows.
// A statement of its own, so the relay can queue it with BEGIN.
const PlatformScope = "SELECT set_config('" + ScopeSetting + "', 'platform', true)"

// EndPlatformScope ends what PlatformScope opened, leaving the
// transaction's tenant as it was.
const EndPlatformScope = "SELECT set_config('" + ScopeSetting + "', '', true)"

// ScopeSetting is the PostgreSQL setting the policies read besides the
// tenant's: 'platform' admits every tenant's rows.
const ScopeSetting = "app.scope"

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

// Attempts returns how many times the fabric has retried a delivery (its
// x-fabric-attempts header; 0 when absent).
func Attempts(h amqp.Table) int {
	switch v := h[HeaderAttempts].(type) {
	case int32:
		return int(v)
	case int64:
		return int(v)
	case int:
		return v
	case int16:
		return int(v)
	case int8:
		return int(v)
	}
	return 0
}
