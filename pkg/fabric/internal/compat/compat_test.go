package compat_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agora-platform/agora/pkg/fabric/catalog"
	"github.com/agora-platform/agora/pkg/fabric/internal/compat"
)

// thing is the definition most cases use; its schema lives at a/a.thing.v1.json.
const thing = `  - type: a.thing.v1
    kind: event
    domain: a
    owner: svc
    scope: TENANT
    sensitivity: INTERNAL
    replayable: true
    description: A thing happened.
`

// other is a second definition, in another domain.
const other = `  - type: b.other.v1
    kind: command
    domain: b
    owner: svc
    scope: RESOURCE
    sensitivity: INTERNAL
    replayable: false
    description: Do the other thing.
`

// catalogFS builds an in-memory catalog from catalog.yaml definitions and
// schema files by path.
func catalogFS(defs string, schemas map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{"catalog.yaml": {Data: []byte("definitions:\n" + defs)}}
	for p, s := range schemas {
		fsys[p] = &fstest.MapFile{Data: []byte(s)}
	}
	return fsys
}

// schema wraps the body of an object schema in the usual header.
func schema(body string) string {
	return `{"type":"object"` + body + `}`
}

// thingFS is a catalog holding thing with the schema body given.
func thingFS(body string) fstest.MapFS {
	return catalogFS(thing, map[string]string{"a/a.thing.v1.json": schema(body)})
}

type want struct {
	typ, path string
	rule      compat.Rule
	verdict   compat.Verdict
}

func (w want) String() string { return fmt.Sprintf("%s %s %s %s", w.verdict, w.typ, w.path, w.rule) }

func c(path string, rule compat.Rule, verdict compat.Verdict) want {
	return want{"a.thing.v1", path, rule, verdict}
}

const (
	C = compat.Compatible
	I = compat.Incompatible
)

// check compares old and new and asserts the report holds exactly wants, in
// order, each with a detail sentence.
func check(t *testing.T, oldCat, newCat fstest.MapFS, wants ...want) {
	t.Helper()
	rep, err := compat.Compare(oldCat, newCat)
	if err != nil {
		t.Fatalf("Compare: %v", err)
	}
	var got []string
	for _, ch := range rep.Changes {
		got = append(got, want{ch.Type, ch.Path, ch.Rule, ch.Verdict}.String())
		if ch.Detail == "" {
			t.Errorf("change %s %s has no detail", ch.Path, ch.Rule)
		}
	}
	var exp []string
	for _, w := range wants {
		exp = append(exp, w.String())
	}
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Errorf("Compare changes =\n%s\nwant\n%s\ndetails: %+v", strings.Join(got, "\n"), strings.Join(exp, "\n"), rep.Changes)
	}
	incompatible := false
	for _, w := range wants {
		incompatible = incompatible || w.verdict == I
	}
	if rep.HasIncompatible() != incompatible {
		t.Errorf("HasIncompatible() = %v, want %v", rep.HasIncompatible(), incompatible)
	}
}

const base = `,"required":["id"],"properties":{"id":{"type":"string"}}`

func TestCompareSchemas(t *testing.T) {
	type schemaCase struct {
		name     string
		old, new string // schema bodies of a.thing.v1
		want     []want
	}
	tests := []schemaCase{
		{"unchanged", base, base, nil},
		{"reformatted and reordered is unchanged",
			`,"properties":{"id":{"type":"string"},"e":{"enum":["x","y"]}},"required":["id"]`,
			`,"required":["id"],  "properties": {"e":{"enum":["y","x"]},"id":{"type":["string"]}}`, nil},

		// Properties and required.
		{"added optional field", base,
			`,"required":["id"],"properties":{"id":{"type":"string"},"note":{"type":"string"}}`,
			[]want{c("/properties/note", compat.RuleAddedOptionalField, C)}},
		{"added required field", base,
			`,"required":["id","note"],"properties":{"id":{"type":"string"},"note":{"type":"string"}}`,
			[]want{c("/properties/note", compat.RuleAddedRequiredField, I)}},
		{"removed optional field",
			`,"required":["id"],"properties":{"id":{"type":"string"},"note":{"type":"string"}}`, base,
			[]want{c("/properties/note", compat.RuleRemovedField, I)}},
		{"removed required field", base, `,"properties":{}`,
			[]want{c("/properties/id", compat.RuleRemovedField, I)}},
		{"removed field still listed as required", base, `,"required":["id"],"properties":{}`,
			[]want{c("/properties/id", compat.RuleRemovedField, I)}},
		{"optional to required",
			`,"properties":{"id":{"type":"string"}}`, base,
			[]want{c("/properties/id", compat.RuleOptionalToRequired, I)}},
		{"required to optional", base,
			`,"properties":{"id":{"type":"string"}}`,
			[]want{c("/properties/id", compat.RuleRequiredToOptional, I)}},
		{"required name without a property schema", `,"properties":{}`, `,"required":["id"],"properties":{}`,
			[]want{c("/properties/id", compat.RuleOptionalToRequired, I)}},
		{"nested object: added optional field",
			`,"properties":{"addr":{"type":"object","properties":{"city":{"type":"string"}}}}`,
			`,"properties":{"addr":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}}}}`,
			[]want{c("/properties/addr/properties/zip", compat.RuleAddedOptionalField, C)}},
		{"nested object: field made required",
			`,"properties":{"addr":{"type":"object","properties":{"city":{"type":"string"}}}}`,
			`,"properties":{"addr":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}`,
			[]want{c("/properties/addr/properties/city", compat.RuleOptionalToRequired, I)}},
		{"array items: removed field",
			`,"properties":{"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}}}`,
			`,"properties":{"lines":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer"}}}}}`,
			[]want{c("/properties/lines/items/properties/sku", compat.RuleRemovedField, I)}},
		{"array items: changed type",
			`,"properties":{"ids":{"type":"array","items":{"type":"string"}}}`,
			`,"properties":{"ids":{"type":"array","items":{"type":"integer"}}}`,
			[]want{c("/properties/ids/items/type", compat.RuleChangedType, I)}},
		{"array items added",
			`,"properties":{"ids":{"type":"array"}}`,
			`,"properties":{"ids":{"type":"array","items":{"type":"string"}}}`,
			[]want{c("/properties/ids/items", compat.RuleChangedType, I)}},
		{"property name escaped as a JSON pointer token",
			`,"properties":{}`, `,"properties":{"a/b~c":{"type":"string"}}`,
			[]want{c("/properties/a~1b~0c", compat.RuleAddedOptionalField, C)}},

		// Types.
		{"changed type", base, `,"required":["id"],"properties":{"id":{"type":"integer"}}`,
			[]want{c("/properties/id/type", compat.RuleChangedType, I)}},
		{"type added where there was none", `,"properties":{"e":{"enum":["x"]}}`, `,"properties":{"e":{"type":"string","enum":["x"]}}`,
			[]want{c("/properties/e/type", compat.RuleChangedType, I)}},
		{"nullable type", base, `,"required":["id"],"properties":{"id":{"type":["string","null"]}}`,
			[]want{c("/properties/id/type", compat.RuleChangedType, I)}},
		{"root type", `,"properties":{}`, `,"type":"array"`,
			[]want{c("/type", compat.RuleChangedType, I)}},
		{"format added", base, `,"required":["id"],"properties":{"id":{"type":"string","format":"uuid"}}`,
			[]want{c("/properties/id/format", compat.RuleChangedType, I)}},
		{"format changed", `,"properties":{"at":{"type":"string","format":"date"}}`, `,"properties":{"at":{"type":"string","format":"date-time"}}`,
			[]want{c("/properties/at/format", compat.RuleChangedType, I)}},
		{"$ref changed", `,"properties":{"x":{"$ref":"#/$defs/a"}}`, `,"properties":{"x":{"$ref":"#/$defs/b"}}`,
			[]want{c("/properties/x/$ref", compat.RuleChangedType, I)}},
		{"const changed", `,"properties":{"v":{"const":1}}`, `,"properties":{"v":{"const":2}}`,
			[]want{c("/properties/v/const", compat.RuleChangedType, I)}},

		// Enumerations.
		{"removed enum value", `,"properties":{"ch":{"enum":["web","app"]}}`, `,"properties":{"ch":{"enum":["web"]}}`,
			[]want{c("/properties/ch/enum", compat.RuleRemovedEnumValue, I)}},
		{"removed enum value from an extensible enum",
			`,"properties":{"ch":{"enum":["web","app"],"x-extensible":true}}`, `,"properties":{"ch":{"enum":["web"],"x-extensible":true}}`,
			[]want{c("/properties/ch/enum", compat.RuleRemovedEnumValue, I)}},
		{"added enum value, extensible before and after",
			`,"properties":{"ch":{"enum":["web"],"x-extensible":true}}`, `,"properties":{"ch":{"enum":["web","sms"],"x-extensible":true}}`,
			[]want{c("/properties/ch/enum", compat.RuleAddedEnumValueExtensible, C)}},
		{"added enum value, closed", `,"properties":{"ch":{"enum":["web"]}}`, `,"properties":{"ch":{"enum":["web","sms"]}}`,
			[]want{c("/properties/ch/enum", compat.RuleAddedEnumValueClosed, I)}},
		{"added enum value, x-extensible false", `,"properties":{"ch":{"enum":["web"],"x-extensible":false}}`, `,"properties":{"ch":{"enum":["web","sms"],"x-extensible":false}}`,
			[]want{c("/properties/ch/enum", compat.RuleAddedEnumValueClosed, I)}},
		{"added enum value while making it extensible",
			`,"properties":{"ch":{"enum":["web"]}}`, `,"properties":{"ch":{"enum":["web","sms"],"x-extensible":true}}`,
			[]want{c("/properties/ch/enum", compat.RuleAddedEnumValueClosed, I), c("/properties/ch/x-extensible", compat.RuleEnumMadeExtensible, I)}},
		{"two values added and one removed",
			`,"properties":{"ch":{"enum":["web","app"]}}`, `,"properties":{"ch":{"enum":["web","sms","fax"]}}`,
			[]want{c("/properties/ch/enum", compat.RuleAddedEnumValueClosed, I), c("/properties/ch/enum", compat.RuleAddedEnumValueClosed, I), c("/properties/ch/enum", compat.RuleRemovedEnumValue, I)}},
		{"x-extensible false to true", `,"properties":{"ch":{"enum":["web"]}}`, `,"properties":{"ch":{"enum":["web"],"x-extensible":true}}`,
			[]want{c("/properties/ch/x-extensible", compat.RuleEnumMadeExtensible, I)}},
		{"x-extensible true to false", `,"properties":{"ch":{"enum":["web"],"x-extensible":true}}`, `,"properties":{"ch":{"enum":["web"],"x-extensible":false}}`,
			[]want{c("/properties/ch/x-extensible", compat.RuleEnumMadeClosed, C)}},
		{"x-extensible true to absent", `,"properties":{"ch":{"enum":["web"],"x-extensible":true}}`, `,"properties":{"ch":{"enum":["web"]}}`,
			[]want{c("/properties/ch/x-extensible", compat.RuleEnumMadeClosed, C)}},
		{"x-extensible absent to false is no change", `,"properties":{"ch":{"enum":["web"]}}`, `,"properties":{"ch":{"enum":["web"],"x-extensible":false}}`, nil},
		{"x-extensible not a boolean", `,"properties":{"ch":{"enum":["web"]}}`, `,"properties":{"ch":{"enum":["web"],"x-extensible":"yes"}}`,
			[]want{c("/properties/ch/x-extensible", compat.RuleUnclassified, I)}},
		{"enum added to a free property", `,"properties":{"ch":{"type":"string"}}`, `,"properties":{"ch":{"type":"string","enum":["web"]}}`,
			[]want{c("/properties/ch/enum", compat.RuleChangedConstraint, I)}},
		{"enum dropped from a property", `,"properties":{"ch":{"type":"string","enum":["web"]}}`, `,"properties":{"ch":{"type":"string"}}`,
			[]want{c("/properties/ch/enum", compat.RuleChangedConstraint, I)}},

		// Meaning, unit, timezone.
		{"x-meaning changed", `,"properties":{"t":{"type":"string","x-meaning":"when submitted"}}`, `,"properties":{"t":{"type":"string","x-meaning":"when received"}}`,
			[]want{c("/properties/t/x-meaning", compat.RuleChangedMeaning, I)}},
		{"x-meaning added", `,"properties":{"t":{"type":"string"}}`, `,"properties":{"t":{"type":"string","x-meaning":"when received"}}`,
			[]want{c("/properties/t/x-meaning", compat.RuleChangedMeaning, I)}},
		{"x-meaning removed", `,"properties":{"t":{"type":"string","x-meaning":"when submitted"}}`, `,"properties":{"t":{"type":"string"}}`,
			[]want{c("/properties/t/x-meaning", compat.RuleChangedMeaning, I)}},
		{"x-unit changed", `,"properties":{"d":{"type":"integer","x-unit":"s"}}`, `,"properties":{"d":{"type":"integer","x-unit":"ms"}}`,
			[]want{c("/properties/d/x-unit", compat.RuleChangedUnit, I)}},
		{"x-unit added", `,"properties":{"d":{"type":"integer"}}`, `,"properties":{"d":{"type":"integer","x-unit":"ms"}}`,
			[]want{c("/properties/d/x-unit", compat.RuleChangedUnit, I)}},
		{"x-unit removed", `,"properties":{"d":{"type":"integer","x-unit":"s"}}`, `,"properties":{"d":{"type":"integer"}}`,
			[]want{c("/properties/d/x-unit", compat.RuleChangedUnit, I)}},
		{"x-timezone changed", `,"properties":{"t":{"type":"string","x-timezone":"UTC"}}`, `,"properties":{"t":{"type":"string","x-timezone":"America/Sao_Paulo"}}`,
			[]want{c("/properties/t/x-timezone", compat.RuleChangedTimezone, I)}},
		{"x-timezone added", `,"properties":{"t":{"type":"string"}}`, `,"properties":{"t":{"type":"string","x-timezone":"UTC"}}`,
			[]want{c("/properties/t/x-timezone", compat.RuleChangedTimezone, I)}},
		{"x-timezone removed", `,"properties":{"t":{"type":"string","x-timezone":"UTC"}}`, `,"properties":{"t":{"type":"string"}}`,
			[]want{c("/properties/t/x-timezone", compat.RuleChangedTimezone, I)}},

		// additionalProperties.
		{"additionalProperties false to true", `,"additionalProperties":false` + base, `,"additionalProperties":true` + base,
			[]want{c("/additionalProperties", compat.RuleAdditionalPropertiesOpened, C)}},
		{"additionalProperties false to absent", `,"additionalProperties":false` + base, base,
			[]want{c("/additionalProperties", compat.RuleAdditionalPropertiesOpened, C)}},
		{"additionalProperties absent to false", base, `,"additionalProperties":false` + base,
			[]want{c("/additionalProperties", compat.RuleAdditionalPropertiesClosed, I)}},
		{"additionalProperties true to false", `,"additionalProperties":true` + base, `,"additionalProperties":false` + base,
			[]want{c("/additionalProperties", compat.RuleAdditionalPropertiesClosed, I)}},
		{"additionalProperties absent to true is no change", base, `,"additionalProperties":true` + base, nil},
		{"additionalProperties as a schema", base, `,"additionalProperties":{"type":"string"}` + base,
			[]want{c("/additionalProperties", compat.RuleUnclassified, I)}},
		{"nested additionalProperties closed",
			`,"properties":{"addr":{"type":"object"}}`, `,"properties":{"addr":{"type":"object","additionalProperties":false}}`,
			[]want{c("/properties/addr/additionalProperties", compat.RuleAdditionalPropertiesClosed, I)}},

		// Metadata keywords.
		{"description changed", `,"description":"a"` + base, `,"description":"b"` + base, []want{c("/description", compat.RuleMetadata, C)}},
		{"title added", base, `,"title":"t"` + base, []want{c("/title", compat.RuleMetadata, C)}},
		{"$id changed", `,"$id":"https://x/1"` + base, `,"$id":"https://x/2"` + base, []want{c("/$id", compat.RuleMetadata, C)}},
		{"$schema removed", `,"$schema":"https://json-schema.org/draft/2020-12/schema"` + base, base, []want{c("/$schema", compat.RuleMetadata, C)}},
		{"examples added", `,"properties":{"id":{"type":"string"}}`, `,"properties":{"id":{"type":"string","examples":["a"]}}`,
			[]want{c("/properties/id/examples", compat.RuleMetadata, C)}},
		{"x-sensitive added", `,"properties":{"id":{"type":"string"}}`, `,"properties":{"id":{"type":"string","x-sensitive":true}}`,
			[]want{c("/properties/id/x-sensitive", compat.RuleMetadata, C)}},
		{"x-sensitive removed", `,"properties":{"id":{"type":"string","x-sensitive":true}}`, `,"properties":{"id":{"type":"string"}}`,
			[]want{c("/properties/id/x-sensitive", compat.RuleMetadata, C)}},
		{"property description changed", `,"properties":{"id":{"type":"string","description":"a"}}`, `,"properties":{"id":{"type":"string","description":"b"}}`,
			[]want{c("/properties/id/description", compat.RuleMetadata, C)}},

		// Everything else is unclassified.
		{"oneOf added", base, `,"oneOf":[{"required":["id"]}]` + base, []want{c("/oneOf", compat.RuleUnclassified, I)}},
		{"anyOf changed", `,"properties":{"v":{"anyOf":[{"type":"string"}]}}`, `,"properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}`,
			[]want{c("/properties/v/anyOf", compat.RuleUnclassified, I)}},
		{"allOf removed", `,"allOf":[{"required":["id"]}]` + base, base, []want{c("/allOf", compat.RuleUnclassified, I)}},
		{"if/then added", base, `,"if":{"required":["id"]},"then":{"required":["id"]}` + base,
			[]want{c("/if", compat.RuleUnclassified, I), c("/then", compat.RuleUnclassified, I)}},
		{"patternProperties added", base, `,"patternProperties":{"^x-":{"type":"string"}}` + base,
			[]want{c("/patternProperties", compat.RuleUnclassified, I)}},
		{"default changed", `,"properties":{"n":{"type":"integer","default":1}}`, `,"properties":{"n":{"type":"integer","default":2}}`,
			[]want{c("/properties/n/default", compat.RuleUnclassified, I)}},
		{"$defs changed", `,"$defs":{"a":{"type":"string"}}` + base, `,"$defs":{"a":{"type":"integer"}}` + base,
			[]want{c("/$defs", compat.RuleUnclassified, I)}},
		{"property schema made boolean", `,"properties":{"v":{"type":"string"}}`, `,"properties":{"v":true}`,
			[]want{c("/properties/v", compat.RuleUnclassified, I)}},
	}
	// Every validation constraint, tightened, loosened, added and removed.
	for _, k := range []struct {
		keyword  string
		from, to string
	}{
		{"pattern", `"^[a-z]+$"`, `"^[a-z0-9]+$"`},
		{"minLength", "1", "2"},
		{"maxLength", "100", "200"},
		{"minimum", "1", "0"},
		{"maximum", "10", "5"},
		{"exclusiveMinimum", "0", "1"},
		{"exclusiveMaximum", "10", "11"},
		{"minItems", "1", "0"},
		{"maxItems", "5", "10"},
		{"multipleOf", "2", "4"},
		{"uniqueItems", "false", "true"},
		{"minProperties", "1", "2"},
		{"maxProperties", "5", "4"},
	} {
		prop := func(v string) string {
			if v == "" {
				return `,"properties":{"v":{"type":"string"}}`
			}
			return `,"properties":{"v":{"type":"string","` + k.keyword + `":` + v + `}}`
		}
		p := "/properties/v/" + k.keyword
		tests = append(tests,
			schemaCase{k.keyword + " changed", prop(k.from), prop(k.to), []want{c(p, compat.RuleChangedConstraint, I)}},
			schemaCase{k.keyword + " changed back", prop(k.to), prop(k.from), []want{c(p, compat.RuleChangedConstraint, I)}},
			schemaCase{k.keyword + " added", prop(""), prop(k.from), []want{c(p, compat.RuleChangedConstraint, I)}},
			schemaCase{k.keyword + " removed", prop(k.from), prop(""), []want{c(p, compat.RuleChangedConstraint, I)}},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, thingFS(tt.old), thingFS(tt.new), tt.want...)
		})
	}
}

func TestCompareDefinitions(t *testing.T) {
	thingSchema := map[string]string{"a/a.thing.v1.json": schema(base)}
	both := map[string]string{"a/a.thing.v1.json": schema(base), "b/b.other.v1.json": schema(base)}
	edit := func(from, to string) string { return strings.Replace(thing, from, to, 1) }
	def := func(path string, rule compat.Rule, verdict compat.Verdict) want {
		return c("catalog.yaml:"+path, rule, verdict)
	}
	tests := []struct {
		name     string
		old, new fstest.MapFS
		want     []want
	}{
		{"unchanged", catalogFS(thing, thingSchema), catalogFS(thing, thingSchema), nil},
		{"added type", catalogFS(thing, thingSchema), catalogFS(thing+other, both),
			[]want{{"b.other.v1", "catalog.yaml", compat.RuleAddedType, C}}},
		{"removed type", catalogFS(thing+other, both), catalogFS(thing, thingSchema),
			[]want{{"b.other.v1", "catalog.yaml", compat.RuleRemovedType, I}}},
		{"replaced by the next version", catalogFS(thing, thingSchema),
			catalogFS(strings.Replace(thing, "a.thing.v1", "a.thing.v2", 1), map[string]string{"a/a.thing.v2.json": schema(base)}),
			[]want{{"a.thing.v1", "catalog.yaml", compat.RuleRemovedType, I}, {"a.thing.v2", "catalog.yaml", compat.RuleAddedType, C}}},
		{"changed kind", catalogFS(thing, thingSchema), catalogFS(edit("kind: event", "kind: command"), thingSchema),
			[]want{def("kind", compat.RuleChangedKind, I)}},
		{"changed scope", catalogFS(thing, thingSchema), catalogFS(edit("scope: TENANT", "scope: GLOBAL"), thingSchema),
			[]want{def("scope", compat.RuleChangedScope, I)}},
		{"changed domain (schema moved with it)", catalogFS(thing, thingSchema),
			catalogFS(edit("domain: a", "domain: z"), map[string]string{"z/a.thing.v1.json": schema(base)}),
			[]want{def("domain", compat.RuleChangedDomain, I)}},
		{"changed owner", catalogFS(thing, thingSchema), catalogFS(edit("owner: svc", "owner: other"), thingSchema),
			[]want{def("owner", compat.RuleMetadata, C)}},
		{"changed sensitivity", catalogFS(thing, thingSchema), catalogFS(edit("sensitivity: INTERNAL", "sensitivity: RESTRICTED"), thingSchema),
			[]want{def("sensitivity", compat.RuleMetadata, C)}},
		{"changed replayable", catalogFS(thing, thingSchema), catalogFS(edit("replayable: true", "replayable: false"), thingSchema),
			[]want{def("replayable", compat.RuleMetadata, C)}},
		{"changed description", catalogFS(thing, thingSchema), catalogFS(edit("A thing happened.", "Something happened."), thingSchema),
			[]want{def("description", compat.RuleMetadata, C)}},
		{"unknown fields added (successor, deprecated)", catalogFS(thing, thingSchema),
			catalogFS(thing+"    successor: a.thing.v2\n    deprecated: true\n", thingSchema),
			[]want{def("deprecated", compat.RuleMetadata, C), def("successor", compat.RuleMetadata, C)}},
		{"unknown field removed", catalogFS(thing+"    colour: red\n", thingSchema), catalogFS(thing, thingSchema),
			[]want{def("colour", compat.RuleMetadata, C)}},
		{"unknown top-level key ignored", catalogFS(thing, thingSchema),
			fstest.MapFS{"catalog.yaml": {Data: []byte("version: 2\ndefinitions:\n" + thing)}, "a/a.thing.v1.json": {Data: []byte(schema(base))}},
			nil},
		{"schema files not in the catalog ignored", catalogFS(thing, thingSchema), catalogFS(thing, both), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, tt.old, tt.new, tt.want...)
		})
	}
}

func TestCompareOrdersByTypeThenPath(t *testing.T) {
	oldCat := catalogFS(other+thing, map[string]string{
		"a/a.thing.v1.json": schema(`,"properties":{"b":{"type":"string"},"a":{"type":"string"}}`),
		"b/b.other.v1.json": schema(base),
	})
	newCat := catalogFS(strings.Replace(thing, "owner: svc", "owner: x", 1)+other+strings.Replace(other, "b.other.v1", "b.another.v1", 1), map[string]string{
		"a/a.thing.v1.json":   schema(`,"properties":{"c":{"type":"string"}}`),
		"b/b.other.v1.json":   schema(`,"properties":{"id":{"type":"integer"}}`),
		"b/b.another.v1.json": schema(base),
	})
	check(t, oldCat, newCat,
		c("/properties/a", compat.RuleRemovedField, I),
		c("/properties/b", compat.RuleRemovedField, I),
		c("/properties/c", compat.RuleAddedOptionalField, C),
		c("catalog.yaml:owner", compat.RuleMetadata, C),
		want{"b.another.v1", "catalog.yaml", compat.RuleAddedType, C},
		want{"b.other.v1", "/properties/id", compat.RuleRequiredToOptional, I},
		want{"b.other.v1", "/properties/id/type", compat.RuleChangedType, I},
	)
	rep, err := compat.Compare(oldCat, newCat)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rep.IncompatibleTypes(), ","); got != "a.thing.v1,b.other.v1" {
		t.Errorf("IncompatibleTypes() = %s, want a.thing.v1,b.other.v1", got)
	}
}

func TestCompareRefusesUnreadableCatalogs(t *testing.T) {
	good := catalogFS(thing, map[string]string{"a/a.thing.v1.json": schema(base)})
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"no catalog.yaml", fstest.MapFS{}, "catalog.yaml"},
		{"catalog.yaml not YAML", fstest.MapFS{"catalog.yaml": {Data: []byte("definitions: [")}}, "parse catalog.yaml"},
		{"definition without type", catalogFS("  - kind: event\n    domain: a\n", nil), "has no type"},
		{"definition without domain", catalogFS("  - type: a.thing.v1\n", nil), "has no domain"},
		{"type defined twice", catalogFS(thing+thing, map[string]string{"a/a.thing.v1.json": schema(base)}), "defined twice"},
		{"schema file missing", catalogFS(thing, nil), "a.thing.v1"},
		{"schema not JSON", catalogFS(thing, map[string]string{"a/a.thing.v1.json": "{"}), "parse a/a.thing.v1.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := compat.Compare(tt.fsys, good); err == nil || !strings.Contains(err.Error(), "old catalog") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compare(bad, good) error = %v, want one naming the old catalog and %q", err, tt.want)
			}
			if _, err := compat.Compare(good, tt.fsys); err == nil || !strings.Contains(err.Error(), "new catalog") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compare(good, bad) error = %v, want one naming the new catalog and %q", err, tt.want)
			}
		})
	}
}

func TestCompareEmbeddedCatalogWithItself(t *testing.T) {
	rep, err := compat.Compare(catalog.FS, catalog.FS)
	if err != nil {
		t.Fatalf("Compare(catalog.FS, catalog.FS): %v", err)
	}
	if len(rep.Changes) != 0 || rep.HasIncompatible() {
		t.Errorf("Compare(catalog.FS, catalog.FS) = %+v, want no changes", rep.Changes)
	}
}

func TestRuleVerdict(t *testing.T) {
	compatible := map[compat.Rule]bool{
		compat.RuleAddedType: true, compat.RuleMetadata: true, compat.RuleAddedOptionalField: true,
		compat.RuleAddedEnumValueExtensible: true, compat.RuleEnumMadeClosed: true, compat.RuleAdditionalPropertiesOpened: true,
	}
	for _, r := range []compat.Rule{
		compat.RuleAddedType, compat.RuleRemovedType, compat.RuleChangedKind, compat.RuleChangedScope, compat.RuleChangedDomain,
		compat.RuleMetadata, compat.RuleAddedOptionalField, compat.RuleAddedRequiredField, compat.RuleRemovedField,
		compat.RuleOptionalToRequired, compat.RuleRequiredToOptional, compat.RuleChangedType, compat.RuleRemovedEnumValue,
		compat.RuleAddedEnumValueExtensible, compat.RuleAddedEnumValueClosed, compat.RuleEnumMadeExtensible, compat.RuleEnumMadeClosed,
		compat.RuleChangedMeaning, compat.RuleChangedUnit, compat.RuleChangedTimezone, compat.RuleChangedConstraint,
		compat.RuleAdditionalPropertiesOpened, compat.RuleAdditionalPropertiesClosed, compat.RuleUnclassified, "some-future-rule",
	} {
		t.Run(string(r), func(t *testing.T) {
			want := compat.Incompatible
			if compatible[r] {
				want = compat.Compatible
			}
			if got := r.Verdict(); got != want {
				t.Errorf("Rule(%q).Verdict() = %s, want %s", r, got, want)
			}
		})
	}
}

func TestNextVersion(t *testing.T) {
	tests := []struct {
		typ, want string
		ok        bool
	}{
		{"request.submitted.v1", "request.submitted.v2", true},
		{"ai.knowledge.index.v9", "ai.knowledge.index.v10", true},
		{"request.submitted", "", false},
		{"request.submitted.vx", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			got, err := compat.NextVersion(tt.typ)
			if got != tt.want || (err == nil) != tt.ok {
				t.Errorf("NextVersion(%q) = %q, %v; want %q, ok=%v", tt.typ, got, err, tt.want, tt.ok)
			}
		})
	}
}
