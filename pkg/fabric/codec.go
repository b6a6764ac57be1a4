package fabric

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Codec maps one wire format to and from the envelope, the fabric's
// internal model (package codec: agora, car, imoveis; docs/topologies.md).
// A consumer, publisher or outbox without one speaks the platform's own
// envelope, exactly as before codecs existed.
//
// A codec whose format carries no tenant supplies a fixed one and says so
// with a method FixedTenant() string: the consumer then does not check the
// x-tenant-id header, which such messages lack.
type Codec interface {
	// Decode reads a delivery (body, properties, headers) into an
	// envelope. An error says what the message is not; the consumer
	// dead-letters it as INVALID_ENVELOPE with that detail. The consumer
	// has checked the body's size.
	Decode(d amqp.Delivery) (envelope.Envelope, error)
	// Encode writes e, which the registry has checked: the routing key and
	// the message (body, message id, correlation id, type, timestamp,
	// headers). The fabric always sends application/json, persistent.
	Encode(e envelope.Envelope) (key string, m amqp.Publishing, err error)
}
