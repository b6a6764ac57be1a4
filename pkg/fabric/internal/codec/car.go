package codec

import (
	"encoding/json"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// CAR is seed 001's snake_case envelope:
//
//	{"event_id":"…","event_name":"processo.submetido.v1","occurred_at":"…Z",
//	 "correlation_id":"…","payload":{…}}
//
// event_name is the envelope's type, version included; the routing key is
// the type without its version (processo.submetido), the only key the
// seed's two-word bindings (processo.*) match. The format has no tenant
// and no producer: every message is the topology's Tenant's, read as
// produced by Producer (the topology's name). causation_id (optional) and
// the x-causation-chain header are the fabric's additions, so reactions
// keep their cause. Other top-level fields are kept as the envelope's
// extensions and written back. AMQP: message_id = event_id, correlation_id,
// type = event_name.
type CAR struct {
	Tenant   string
	Producer string
}

const carName = "car"

// FixedTenant is the tenant every CAR message belongs to.
func (c CAR) FixedTenant() string { return c.Tenant }

// Decode reads a CAR envelope. A body in another format, a missing or
// mistyped field, or an event_name without a version is a *FormatError.
func (c CAR) Decode(d amqp.Delivery) (envelope.Envelope, error) {
	fields, err := members(d.Body)
	if err != nil {
		return envelope.Envelope{}, refuse(carName, d.Body, "%v", err)
	}
	var e envelope.Envelope
	got := map[string]bool{}
	for _, f := range fields {
		got[f.name] = true
		var err error
		switch f.name {
		case "event_id":
			e.ID, err = str(f)
		case "event_name":
			e.Type, err = str(f)
		case "correlation_id":
			e.CorrelationID, err = str(f)
		case "causation_id":
			e.CausationID, err = str(f)
		case "occurred_at":
			var s string
			if s, err = str(f); err == nil {
				t, perr := time.Parse(time.RFC3339Nano, s)
				if perr != nil {
					return e, refuse(carName, d.Body, "occurred_at %q is not an RFC 3339 time", s)
				}
				e.OccurredAt = t.UTC()
			}
		case "payload":
			e.Payload = f.raw
		default:
			if e.Extensions == nil {
				e.Extensions = map[string]json.RawMessage{}
			}
			e.Extensions[f.name] = f.raw
		}
		if err != nil {
			return e, refuse(carName, d.Body, "%v", err)
		}
	}
	for _, name := range []string{"event_id", "event_name", "occurred_at", "correlation_id", "payload"} {
		if !got[name] {
			return e, refuse(carName, d.Body, "missing %s", name)
		}
	}
	if !envelope.ValidType(e.Type) {
		return e, refuse(carName, d.Body, "event_name %q is not <domain>.<name>.v<N>", e.Type)
	}
	if e.CausationChain, err = readChain(carName, d.Body, d.Headers); err != nil {
		return e, err
	}
	e.Version = envelope.VersionOf(e.Type)
	e.SchemaVersion = e.Version
	e.TenantID = c.Tenant
	e.Producer = c.Producer
	return e, nil
}

// Encode writes e as a CAR envelope keyed by its type without the version.
// An envelope of another tenant than the topology's is refused: the format
// could not say whose it is. The producer is not written (the format has
// no field for it).
func (c CAR) Encode(e envelope.Envelope) (string, amqp.Publishing, error) {
	if err := fixedTenant(carName, c.Tenant, e); err != nil {
		return "", amqp.Publishing{}, err
	}
	b := make([]byte, 0, 192+len(e.Payload))
	b = append(b, `{"event_id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"event_name":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"occurred_at":`...)
	b = appendString(b, e.OccurredAt.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"correlation_id":`...)
	b = appendString(b, e.CorrelationID)
	if e.CausationID != "" {
		b = append(b, `,"causation_id":`...)
		b = appendString(b, e.CausationID)
	}
	b, err := appendExtensions(b, e.Extensions)
	if err != nil {
		return "", amqp.Publishing{}, err
	}
	b = append(b, `,"payload":`...)
	b = append(b, e.Payload...)
	b = append(b, '}')
	h := amqp.Table{}
	chainHeader(h, e)
	return base(e.Type), publishing(e, b, e.Type, h), nil
}
