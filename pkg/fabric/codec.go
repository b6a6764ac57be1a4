package fabric

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
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

// EncodeEnvelope validates e against the registry and builds its AMQP
// message with codec c on exchange. A nil c is EnvelopeMessage (with
// exchange, when set, in place of the one of the type's kind); with a
// codec, the routing key, body, properties and headers are the codec's and
// the exchange is exchange, or the kind's when empty.
func EncodeEnvelope(reg *registry.Registry, c Codec, exchange string, e envelope.Envelope) (Message, error) {
	if c == nil {
		m, err := EnvelopeMessage(reg, e)
		if err == nil && exchange != "" {
			m.Exchange = exchange
		}
		return m, err
	}
	def, err := reg.Check(e)
	if err != nil {
		return Message{}, fmt.Errorf("publish %s %s: %w", e.Type, e.ID, err)
	}
	key, p, err := c.Encode(e)
	if err != nil {
		return Message{}, fmt.Errorf("publish %s %s: %w", e.Type, e.ID, err)
	}
	if exchange == "" {
		exchange, _ = topology.Route(def)
	}
	h := p.Headers
	if h == nil {
		h = amqp.Table{}
	}
	return Message{
		Exchange: exchange, RoutingKey: key, Body: p.Body, MessageID: p.MessageId,
		CorrelationID: p.CorrelationId, Type: p.Type, Headers: h, Timestamp: p.Timestamp,
	}, nil
}
