package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// One schema file serves both sides of a contract. The file is written the
// way a producer must write the payload: closed objects
// ("additionalProperties": false) and closed enumerations, so a typo in the
// producer's own code is caught before the message leaves. A consumer checks
// a view derived from the same file when it loads (readerView): every
// object opened, every enumeration marked "x-extensible" reduced to "a
// string", and nothing else changed. Deriving the reader from the writer,
// rather than writing schemas open and closing them on publish, keeps the
// committed file the strictest statement of the contract, and the
// compatibility gate compares exactly what producers promise.

// int64 bounds: a JSON number such as 1e400 is an integer to JSON Schema
// but fits no Go integer; every "integer" without bounds of its own is held
// to int64 on both sides.
const (
	maxInt64 = json.Number("9223372036854775807")
	minInt64 = json.Number("-9223372036854775808")
)

// maxOpenEnumLength bounds an unknown value of an extensible enumeration:
// a new value is a name, not a document.
const maxOpenEnumLength = 200

// compile parses schema, lets adapt rewrite the parsed document, bounds its
// integers and compiles it as draft 2020-12 with formats asserted.
func compile(typ string, schema []byte, adapt func(doc any)) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	adapt(doc)
	walkSchemas(doc, "", func(s map[string]any, _ string) { boundIntegers(s) })
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	url := "mem:///" + typ + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return compiled, nil
}

// readerView opens doc for a tolerant reader and records, in enums, each
// extensible enumeration's path and known values (nil values when the
// marker sits on something that is not an enumeration of strings).
func readerView(doc any, enums map[string][]string) {
	walkSchemas(doc, "", func(s map[string]any, path string) {
		if s["additionalProperties"] == false {
			delete(s, "additionalProperties")
		}
		if s["unevaluatedProperties"] == false {
			delete(s, "unevaluatedProperties")
		}
		if s["x-extensible"] != true {
			return
		}
		values := stringEnum(s["enum"])
		enums[path] = values
		if values == nil {
			return
		}
		delete(s, "enum")
		s["type"] = "string"
		if _, ok := s["maxLength"]; !ok {
			s["maxLength"] = json.Number(strconv.Itoa(maxOpenEnumLength))
		}
	})
}

func stringEnum(v any) []string {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// boundIntegers holds an integer schema without its own bounds to int64.
func boundIntegers(s map[string]any) {
	integer := s["type"] == "integer"
	if types, ok := s["type"].([]any); ok {
		integer = slices.Contains(types, any("integer"))
	}
	if !integer {
		return
	}
	if _, ok := s["maximum"]; !ok {
		if _, ok := s["exclusiveMaximum"]; !ok {
			s["maximum"] = maxInt64
		}
	}
	if _, ok := s["minimum"]; !ok {
		if _, ok := s["exclusiveMinimum"]; !ok {
			s["minimum"] = minInt64
		}
	}
}

// Keywords whose values are schemas, maps of schemas or lists of schemas.
// Only these are walked: enum, const, default and examples hold data.
var (
	schemaKeywords     = []string{"items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "not", "if", "then", "else", "contains", "propertyNames"}
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "dependentSchemas"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// walkSchemas calls visit on every schema object in doc, with its path in
// the payload: "/a/b" for property b of property a, "/a/items" below an
// array. Boolean schemas are not visited.
func walkSchemas(doc any, path string, visit func(s map[string]any, path string)) {
	s, ok := doc.(map[string]any)
	if !ok {
		return
	}
	visit(s, path)
	for _, k := range schemaKeywords {
		if sub, ok := s[k]; ok {
			p := path
			if k == "items" {
				p += "/items"
			}
			walkSchemas(sub, p, visit)
		}
	}
	for _, k := range schemaMapKeywords {
		m, _ := s[k].(map[string]any)
		for name, sub := range m {
			p := path
			if k == "properties" {
				p += "/" + name
			}
			walkSchemas(sub, p, visit)
		}
	}
	for _, k := range schemaListKeywords {
		list, _ := s[k].([]any)
		for _, sub := range list {
			walkSchemas(sub, path, visit)
		}
	}
}
