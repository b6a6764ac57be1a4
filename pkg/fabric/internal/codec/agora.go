package codec

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

// Agora is the platform's own envelope: the body is the envelope itself
// (camelCase, package envelope), keyed by its type on the exchange of its
// kind, with the x-tenant-id header.
// It writes exactly what a publisher without a codec writes
// (broker.EnvelopeMessage) and reads what a consumer without one reads,
// but for one thing: a body in another system's format (no id, no type)
// is refused as not an agora envelope, naming that format, where a
// consumer without a codec reports an unknown type.
type Agora struct{}

// Decode reads the envelope of d's body (a tolerant reader: unknown fields
// are kept as extensions); it returns a *FormatError for another system's
// envelope and an error wrapping envelope.ErrMalformed for a body that is
// no envelope at all.
func (Agora) Decode(d amqp.Delivery) (envelope.Envelope, error) {
	e, err := envelope.Decode(d.Body, max(len(d.Body), 1)) // the consumer bounded the size
	if err != nil {
		return e, err
	}
	if e.ID == "" && e.Type == "" {
		if looks := Describe(d.Body); looks != "" {
			return e, &FormatError{Codec: "agora", Why: "no id and no type", Looks: looks}
		}
	}
	return e, nil
}

// Encode writes e as the platform does: the envelope as the body, key =
// type, message id, correlation id, type, timestamp, and the tenant
// header.
func (Agora) Encode(e envelope.Envelope) (string, amqp.Publishing, error) {
	body, err := e.EncodeValidated() // the registry parsed the payload
	if err != nil {
		return "", amqp.Publishing{}, err
	}
	h := amqp.Table{}
	if e.TenantID != "" {
		h[wire.HeaderTenant] = e.TenantID
	}
	p := publishing(e, body, e.Type, h)
	p.Timestamp = e.OccurredAt
	return e.Type, p, nil
}
