// Package codec maps the wire formats of the systems on the fabric to and
// from its internal model, the envelope (docs/topologies.md):
//
//   - Agora, the platform's camelCase envelope, which carries its tenant;
//   - CAR (seed 001), a snake_case envelope (event_id, event_name,
//     occurred_at, correlation_id, payload) keyed by the event name
//     without its version;
//   - Imoveis (seed 003), a header/data envelope whose version travels in
//     header.version and the x-schema-version header, never in the type or
//     the routing key.
//
// A topology file names its codec (For). Each codec satisfies
// fabric.Codec: ConsumerOptions.Codec, PublisherOptions.Codec and
// outbox.WithCodec take one.
package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// HeaderCausationChain carries the envelope's causation chain (JSON, oldest
// first) for formats without a field for it, so the fabric's depth and
// cycle limits hold across them.
const HeaderCausationChain = "x-causation-chain"

// HeaderSchemaVersion is the imóveis contract's schema version header.
const HeaderSchemaVersion = "x-schema-version"

var (
	_ fabric.Codec = Agora{}
	_ fabric.Codec = CAR{}
	_ fabric.Codec = Imoveis{}
)

// For returns the codec a topology names (its Codec, with its Name and
// Tenant): Agora for "agora" or none, CAR for "car", Imoveis for
// "imoveis". An unknown name is an error.
func For(d topology.Description) (fabric.Codec, error) {
	switch d.Codec {
	case "", topology.CodecAgora:
		return Agora{}, nil
	case "car":
		return CAR{Tenant: d.Tenant, Producer: d.Name}, nil
	case "imoveis":
		return Imoveis{Tenant: d.Tenant}, nil
	}
	return nil, fmt.Errorf("codec: topology %s names codec %q; known: agora, car, imoveis", d.Name, d.Codec)
}

// FormatError says a body is not in a codec's format, and what it looks
// like instead when that is recognisable (another system's envelope). It
// wraps envelope.ErrMalformed; the consumer dead-letters the message as
// INVALID_ENVELOPE with this text.
type FormatError struct {
	Codec string // the codec that refused it
	Why   string // what is wrong
	Looks string // what the body is instead, or ""
}

func (e *FormatError) Error() string {
	s := "not " + article(e.Codec) + " " + e.Codec + " envelope: " + e.Why
	if e.Looks != "" {
		s += "; the body is " + e.Looks
	}
	return s
}

func (e *FormatError) Unwrap() error { return envelope.ErrMalformed }

func article(name string) string {
	if strings.ContainsRune("aeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}

// refuse returns a FormatError for body, naming the format it looks like
// when that is another codec's.
func refuse(codec string, body []byte, format string, a ...any) error {
	looks := Describe(body)
	if strings.Contains(looks, " "+codec+" ") {
		looks = ""
	}
	return &FormatError{Codec: codec, Why: fmt.Sprintf(format, a...), Looks: looks}
}

// Describe names the format body appears to be in: "an agora envelope
// (…)", "a car envelope (…)", "an imoveis envelope (…)", "not a JSON
// object", or "" when it is a JSON object of none of them.
func Describe(body []byte) string {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "not a JSON object"
	}
	has := func(k string) bool { _, ok := top[k]; return ok }
	switch {
	case has("header") && has("data"):
		return "an imoveis envelope (header/data)"
	case has("event_id") || has("event_name"):
		return "a car envelope (snake_case event_id/event_name/payload)"
	case has("id") && has("type") && (has("payload") || has("tenantId")):
		return "an agora envelope (camelCase id/type/tenantId/payload)"
	}
	return ""
}

// field is one member of a JSON object, its value raw.
type field struct {
	name string
	raw  json.RawMessage
}

// members reads a JSON object's members in order, refusing a name given
// twice (two parsers could disagree on which one counts) and trailing data.
func members(data []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return nil, errors.New("not JSON")
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("field %q appears twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("field %s: %w", name, err)
		}
		out = append(out, field{name, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	return out, nil
}

// str decodes a JSON string member.
func str(f field) (string, error) {
	var s string
	if err := json.Unmarshal(f.raw, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", f.name)
	}
	return s, nil
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendExtensions appends the envelope's extensions as members, in name
// order, each preceded by a comma.
func appendExtensions(b []byte, ext map[string]json.RawMessage) ([]byte, error) {
	names := make([]string, 0, len(ext))
	for k := range ext {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !json.Valid(ext[k]) {
			return nil, fmt.Errorf("extension %s is not valid JSON", k)
		}
		b = append(b, ',')
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, ext[k]...)
	}
	return b, nil
}

// base is a type without its version: "processo.submetido.v1" →
// "processo.submetido".
func base(typ string) string {
	return strings.TrimSuffix(typ, ".v"+envelope.VersionOf(typ))
}

// fixedTenant refuses an envelope of a tenant other than the topology's:
// the format cannot say whose it is, so it must be the one tenant's.
func fixedTenant(codec, tenant string, e envelope.Envelope) error {
	if tenant == "" {
		return fmt.Errorf("codec %s: no fixed tenant configured (the topology's tenant)", codec)
	}
	if e.TenantID != tenant {
		return fmt.Errorf("codec %s: the format carries no tenant; this topology's is %q, the envelope's %q", codec, tenant, e.TenantID)
	}
	return nil
}

// chainHeader sets the causation chain header when e has a chain.
func chainHeader(h amqp.Table, e envelope.Envelope) {
	if len(e.CausationChain) == 0 {
		return
	}
	raw, _ := json.Marshal(e.CausationChain) // links are strings
	h[HeaderCausationChain] = string(raw)
}

// readChain reads the causation chain header, when present.
func readChain(codec string, body []byte, h amqp.Table) ([]envelope.Ref, error) {
	v, ok := h[HeaderCausationChain]
	if !ok {
		return nil, nil
	}
	s, ok := v.(string)
	var chain []envelope.Ref
	if !ok || json.Unmarshal([]byte(s), &chain) != nil {
		return nil, refuse(codec, body, "header %s is not a JSON list of {type, id}", HeaderCausationChain)
	}
	return chain, nil
}

// publishing is the AMQP message every codec starts from.
func publishing(e envelope.Envelope, body []byte, typ string, h amqp.Table) amqp.Publishing {
	return amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent,
		MessageId: e.ID, CorrelationId: e.CorrelationID, Type: typ,
		Timestamp: e.OccurredAt.UTC(), Headers: h, Body: body,
	}
}
