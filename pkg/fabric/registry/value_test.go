package registry

import (
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestParseValueReadsAsTheValidatorsOwnReader: for every document the
// validator's own reader (jsonschema.UnmarshalJSON) accepts without
// ambiguity, parseValue gives the same value, numbers exact; what it
// refuses is what two parsers could read differently or not at all.
func TestParseValueReadsAsTheValidatorsOwnReader(t *testing.T) {
	same := []string{
		`{}`, `[]`, `null`, `true`, `"s"`, `0`, `-1.5e3`,
		`{"a":1,"b":[1,2.50,{"c":null}],"d":"é\u00e9\n","e":false,"f":{}}`,
		`{"big":9007199254740993,"neg":-0.000000000000000000001}`,
		` { "spaced" : [ 1 , 2 ] } `,
		`[[[[["deep"]]]]]`,
	}
	for _, doc := range same {
		want, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatalf("reference reader refused %s: %v", doc, err)
		}
		got, err := parseValue([]byte(doc))
		if err != nil {
			t.Errorf("parseValue(%s) = %v", doc, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("parseValue(%s) = %#v, want %#v", doc, got, want)
		}
	}
	refused := map[string]string{
		"a member named twice": `{"a":1,"a":2}`,
		"trailing data":        `{"a":1} {}`,
		"cut short":            `{"a":`,
		"invalid UTF-8":        "{\"a\":\"\xff\"}",
		"not JSON":             `{a:1}`,
		"empty":                ``,
	}
	for name, doc := range refused {
		if v, err := parseValue([]byte(doc)); err == nil {
			t.Errorf("%s: parseValue(%q) = %#v, want an error", name, doc, v)
		}
	}
}
