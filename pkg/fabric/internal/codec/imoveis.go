package codec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Imoveis is seed 003's header/data envelope:
//
//	{"header":{"eventId":"…","type":"imovel.recebido","version":1,
//	  "occurredAt":"…Z","correlationId":"…","source":"api-ingestao","loteId":"…"},
//	 "data":{…}}
//
// header.type carries no version; the envelope's type is header.type plus
// ".v" + header.version (imovel.recebido.v1), and the routing key and the
// AMQP type are header.type. header.source is the envelope's producer;
// loteId and any other header field are kept as the envelope's extensions
// and written back into the header. The format has no tenant: every
// message is the topology's Tenant's. header.causationId (optional) and the
// x-causation-chain header are the fabric's additions. AMQP: message_id =
// eventId, correlation_id = correlationId, type = type, header
// x-schema-version = version.
type Imoveis struct {
	Tenant string
}

const imoveisName = "imoveis"

// FixedTenant is the tenant every imóveis message belongs to.
func (c Imoveis) FixedTenant() string { return c.Tenant }

// Decode reads an imóveis envelope. A body in another format, a missing or
// mistyped header field, a type that carries a version, or an
// x-schema-version header that disagrees with header.version is a
// *FormatError.
func (c Imoveis) Decode(d amqp.Delivery) (envelope.Envelope, error) {
	var e envelope.Envelope
	fields, err := members(d.Body)
	if err != nil {
		return e, refuse(imoveisName, d.Body, "%v", err)
	}
	var header []field
	got := map[string]bool{}
	for _, f := range fields {
		got[f.name] = true
		switch f.name {
		case "header":
			if header, err = members(f.raw); err != nil {
				return e, refuse(imoveisName, d.Body, "header: %v", err)
			}
		case "data":
			e.Payload = f.raw
		default:
			return e, refuse(imoveisName, d.Body, "unexpected field %q (the envelope is header and data)", f.name)
		}
	}
	for _, name := range []string{"header", "data"} {
		if !got[name] {
			return e, refuse(imoveisName, d.Body, "missing %s", name)
		}
	}
	var typ string
	version := 0
	got = map[string]bool{}
	for _, f := range header {
		got[f.name] = true
		var err error
		switch f.name {
		case "eventId":
			e.ID, err = str(f)
		case "type":
			typ, err = str(f)
		case "version":
			if json.Unmarshal(f.raw, &version) != nil || version < 1 {
				return e, refuse(imoveisName, d.Body, "header.version %s is not a positive integer", f.raw)
			}
		case "occurredAt":
			var s string
			if s, err = str(f); err == nil {
				t, perr := time.Parse(time.RFC3339Nano, s)
				if perr != nil {
					return e, refuse(imoveisName, d.Body, "header.occurredAt %q is not an RFC 3339 time", s)
				}
				e.OccurredAt = t.UTC()
			}
		case "correlationId":
			e.CorrelationID, err = str(f)
		case "causationId":
			e.CausationID, err = str(f)
		case "source":
			e.Producer, err = str(f)
		default:
			if e.Extensions == nil {
				e.Extensions = map[string]json.RawMessage{}
			}
			e.Extensions[f.name] = f.raw
		}
		if err != nil {
			return e, refuse(imoveisName, d.Body, "header.%v", err)
		}
	}
	for _, name := range []string{"eventId", "type", "version", "occurredAt", "correlationId", "source"} {
		if !got[name] {
			return e, refuse(imoveisName, d.Body, "missing header.%s", name)
		}
	}
	if envelope.ValidType(typ) {
		return e, refuse(imoveisName, d.Body, "header.type %q carries a version; the contract keeps it in header.version", typ)
	}
	e.Version = strconv.Itoa(version)
	e.Type = typ + ".v" + e.Version
	if !envelope.ValidType(e.Type) {
		return e, refuse(imoveisName, d.Body, "header.type %q is not <domain>.<name>", typ)
	}
	if v, ok := d.Headers[HeaderSchemaVersion]; ok && fmt.Sprint(v) != e.Version {
		return e, refuse(imoveisName, d.Body, "header %s=%v disagrees with header.version %d", HeaderSchemaVersion, v, version)
	}
	if e.CausationChain, err = readChain(imoveisName, d.Body, d.Headers); err != nil {
		return e, err
	}
	e.SchemaVersion = e.Version
	e.TenantID = c.Tenant
	return e, nil
}

// Encode writes e as an imóveis envelope keyed by header.type. An envelope
// of another tenant than the topology's is refused: the format could not
// say whose it is.
func (c Imoveis) Encode(e envelope.Envelope) (string, amqp.Publishing, error) {
	if err := fixedTenant(imoveisName, c.Tenant, e); err != nil {
		return "", amqp.Publishing{}, err
	}
	version, err := strconv.Atoi(envelope.VersionOf(e.Type))
	if err != nil {
		return "", amqp.Publishing{}, fmt.Errorf("codec imoveis: type %q has no version", e.Type)
	}
	typ := base(e.Type)
	b := make([]byte, 0, 256+len(e.Payload))
	b = append(b, `{"header":{"eventId":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(version), 10)
	b = append(b, `,"occurredAt":`...)
	b = appendString(b, e.OccurredAt.UTC().Format(time.RFC3339Nano))
	b = append(b, `,"correlationId":`...)
	b = appendString(b, e.CorrelationID)
	if e.CausationID != "" {
		b = append(b, `,"causationId":`...)
		b = appendString(b, e.CausationID)
	}
	b = append(b, `,"source":`...)
	b = appendString(b, e.Producer)
	if b, err = appendExtensions(b, e.Extensions); err != nil {
		return "", amqp.Publishing{}, err
	}
	b = append(b, `},"data":`...)
	b = append(b, e.Payload...)
	b = append(b, '}')
	h := amqp.Table{HeaderSchemaVersion: int32(version)}
	chainHeader(h, e)
	return typ, publishing(e, b, typ, h), nil
}
