package envelope

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"
)

// Encode returns the JSON form of e. It appends fields directly instead of
// going through reflection: every published message is encoded once, and
// encoding/json's reflection and payload compaction cost as much as the
// publish itself. The payload and extensions are copied verbatim when they
// are valid JSON.
func (e Envelope) Encode() ([]byte, error) {
	if !json.Valid(e.Payload) {
		return nil, fmt.Errorf("encode envelope %s: payload is not valid JSON", e.ID)
	}
	return e.encode()
}

// EncodeValidated is Encode for an envelope whose payload a schema
// validator has just parsed (the publisher's path): the payload is not
// scanned a second time. Use Encode for anything else.
func (e Envelope) EncodeValidated() ([]byte, error) { return e.encode() }

func (e Envelope) encode() ([]byte, error) {
	b := make([]byte, 0, 256+len(e.Payload)+len(e.CausationChain)*96)
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"version":`...)
	b = appendString(b, e.Version)
	b = append(b, `,"occurredAt":"`...)
	b = e.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if e.TenantID != "" {
		b = append(b, `,"tenantId":`...)
		b = appendString(b, e.TenantID)
	}
	b = append(b, `,"correlationId":`...)
	b = appendString(b, e.CorrelationID)
	if e.CausationID != "" {
		b = append(b, `,"causationId":`...)
		b = appendString(b, e.CausationID)
	}
	if len(e.CausationChain) > 0 {
		b = append(b, `,"causationChain":[`...)
		for i, l := range e.CausationChain {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = appendString(b, l.Type)
			b = append(b, `,"id":`...)
			b = appendString(b, l.ID)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"producer":`...)
	b = appendString(b, e.Producer)
	for _, f := range [...]struct {
		name string
		ref  *Ref
	}{{`,"actor":`, e.Actor}, {`,"entity":`, e.Entity}} {
		if f.ref != nil {
			b = append(b, f.name...)
			b = append(b, `{"type":`...)
			b = appendString(b, f.ref.Type)
			b = append(b, `,"id":`...)
			b = appendString(b, f.ref.ID)
			b = append(b, '}')
		}
	}
	b = append(b, `,"schemaVersion":`...)
	b = appendString(b, e.SchemaVersion)
	if len(e.Extensions) > 0 {
		var err error
		if b, err = e.appendExtensions(b); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"payload":`...)
	b = append(b, e.Payload...)
	return append(b, '}'), nil
}

// appendExtensions writes the fields a reader kept but did not know, in
// name order so one envelope always encodes to the same bytes.
func (e Envelope) appendExtensions(b []byte) ([]byte, error) {
	names := make([]string, 0, len(e.Extensions))
	for name, v := range e.Extensions {
		if knownField(name) {
			return nil, fmt.Errorf("encode envelope %s: extension %q shadows an envelope field", e.ID, name)
		}
		if !json.Valid(v) {
			return nil, fmt.Errorf("encode envelope %s: extension %q is not valid JSON", e.ID, name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b = append(b, ',')
		b = appendString(b, name)
		b = append(b, ':')
		b = append(b, e.Extensions[name]...)
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping as encoding/json does
// (including <, >, & and U+2028/9), and replacing invalid UTF-8 with U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
