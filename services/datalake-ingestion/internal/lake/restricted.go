package lake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// What the lake does with a type's restricted fields (the catalog's lake:,
// registry.Definition.Lake).
const (
	lakeEncrypt = "encrypt"
	lakeDrop    = "drop"
)

// Sealer seals one field's value of one event of one tenant and opens it
// again; *seal.Sealer is one.
type Sealer interface {
	Seal(tenantID, eventID, field string, value []byte) (string, error)
	Open(tenantID, eventID, field, sealed string) ([]byte, error)
}

// ErrNoSealer is NewRestrictions' error when the catalog has a type whose
// restricted fields must be sealed and there is no Sealer (no key).
var ErrNoSealer = errors.New("the catalog has types whose restricted fields the lake seals, and there is no seal key")

// rule is what the lake does with one type's restricted fields.
type rule struct {
	fields []string
	drop   bool
}

// Restrictions applies the catalog's rule for restricted fields: each one
// is sealed (lake: encrypt) or left out (lake: drop) before an event is
// stored, and sealed values are opened when the event is read back.
type Restrictions struct {
	rules  map[string]rule
	sealer Sealer
}

// NewRestrictions returns the rules of defs. sealer may be nil only when no
// type of defs seals a field.
func NewRestrictions(defs []registry.Definition, sealer Sealer) (*Restrictions, error) {
	r := &Restrictions{rules: map[string]rule{}, sealer: sealer}
	var sealed []string
	for _, d := range defs {
		if len(d.RestrictedFields) == 0 {
			continue
		}
		switch d.Lake {
		case lakeDrop:
			r.rules[d.Type] = rule{fields: d.RestrictedFields, drop: true}
		case lakeEncrypt:
			r.rules[d.Type] = rule{fields: d.RestrictedFields}
			sealed = append(sealed, d.Type)
		default: // the registry refuses any other rule; a newer one must not mean "store in clear"
			return nil, fmt.Errorf("lake: %s: unknown lake rule %q for its restricted fields", d.Type, d.Lake)
		}
	}
	if len(sealed) > 0 && sealer == nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoSealer, strings.Join(sealed, ", "))
	}
	return r, nil
}

// Protect returns env as the lake stores it: each restricted field of its
// type sealed or left out, every other byte of the payload as it was.
func (r *Restrictions) Protect(env envelope.Envelope) (envelope.Envelope, error) {
	ru, ok := r.rules[env.Type]
	if !ok {
		return env, nil
	}
	p, err := rewriteFields(env.Payload, ru.fields, func(field string, v json.RawMessage) (json.RawMessage, error) {
		if ru.drop {
			return nil, nil
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v); err != nil {
			return nil, err
		}
		s, err := r.sealer.Seal(env.TenantID, env.ID, field, compact.Bytes())
		if err != nil {
			return nil, err
		}
		return json.Marshal(s)
	})
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("lake: restricted fields of event %s (%s): %w", env.ID, env.Type, err)
	}
	env.Payload = p
	return env, nil
}

// Reveal returns env's payload with its sealed fields opened: the payload
// that was published. A sealed value that does not open (moved from
// another tenant, event or field, altered, or sealed under another key) is
// an error naming the event and the field. A field a drop rule left out
// stays out. A field stored in clear (written before sealing existed)
// comes back as it is.
func (r *Restrictions) Reveal(env envelope.Envelope) (json.RawMessage, error) {
	ru, ok := r.rules[env.Type]
	if !ok || ru.drop {
		return env.Payload, nil
	}
	p, err := rewriteFields(env.Payload, ru.fields, func(field string, v json.RawMessage) (json.RawMessage, error) {
		var s string
		if json.Unmarshal(v, &s) != nil || !strings.HasPrefix(s, sealPrefix) {
			return v, nil
		}
		value, err := r.sealer.Open(env.TenantID, env.ID, field, s)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", field, err)
		}
		if !json.Valid(value) {
			return nil, fmt.Errorf("field %s: opened value is not JSON", field)
		}
		return value, nil
	})
	if err != nil {
		return nil, fmt.Errorf("event %s of tenant %s (%s): %w", env.ID, env.TenantID, env.Type, err)
	}
	return p, nil
}

// sealPrefix is how a stored value shows it is sealed (seal.Prefix; the
// lake tells sealed from clear values by it, whatever the Sealer).
const sealPrefix = "sealed:"

// Row is RowOf(env) for an env Protect returned: a typed column (request_id,
// service_id, channel, status) never holds a restricted field's value, not
// even sealed, as analysts read those columns without opening anything.
func (r *Restrictions) Row(env envelope.Envelope) Row {
	row := RowOf(env)
	for _, f := range r.rules[env.Type].fields {
		if c := row.typedColumn(f); c != nil {
			*c = ""
		}
	}
	return row
}

// typedColumn is the column a payload field is copied to, nil when none.
func (row *Row) typedColumn(field string) *string {
	switch field {
	case "requestId":
		return &row.RequestID
	case "serviceId":
		return &row.ServiceID
	case "channel":
		return &row.Channel
	case "status":
		return &row.Status
	}
	return nil
}

// rewriteFields returns the JSON object payload with each member named in
// fields replaced by what edit returns for it (left out when edit returns
// nil), keeping every other member and the members' order. A name given
// twice is edited each time, so a duplicate never slips through in clear.
func rewriteFields(payload json.RawMessage, fields []string, edit func(field string, v json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("payload is not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		name, _ := t.(string) // an object's members start with their name
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("payload member %q: %w", name, err)
		}
		if slices.Contains(fields, name) {
			if v, err = edit(name, v); err != nil {
				return nil, err
			}
			if v == nil {
				continue
			}
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		key, _ := json.Marshal(name) // a string always marshals
		out.Write(key)
		out.WriteByte(':')
		out.Write(v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("payload: data after the object")
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
