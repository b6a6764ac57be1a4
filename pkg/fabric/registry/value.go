package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// parseValue turns a payload into the value the schema validator walks:
// objects as map[string]any, arrays as []any, numbers as json.Number (the
// validator's own reader's shapes, so integers stay exact). It does what
// jsonschema.UnmarshalJSON does in a single streaming pass without
// reflection, which on the consumer's path is a third of the work a
// delivery costs. A member named twice, invalid UTF-8 and trailing data
// are errors: a payload two parsers could read differently is no payload.
func parseValue(data []byte) (any, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data))
	v, err := readValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	return v, nil
}

func readValue(dec *jsontext.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		obj := make(map[string]any)
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // before the next read voids tok
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			obj[name] = v
		}
		_, err := dec.ReadToken()
		return obj, err
	case '[':
		arr := []any{}
		for dec.PeekKind() != ']' {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.ReadToken()
		return arr, err
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected %s", tok.Kind())
}
