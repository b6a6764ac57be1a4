// Package compat decides whether a change to the message catalog can ship
// under the same type names or must come as new versions.
//
// Compare takes two catalogs (catalog.yaml plus <domain>/<type>.json JSON
// Schemas) and lists every difference as a Change with a Verdict and a stable
// Rule code, following the platform's event-versioning rules (docs/contract-evolution.md):
// adding an optional payload field, adding a value to an enumeration that
// consumers must treat as extensible ("x-extensible": true on both sides) and
// changing metadata are compatible; removing a field, changing its type,
// meaning ("x-meaning"), unit ("x-unit") or timezone ("x-timezone"), making
// an optional field required and changing a validation constraint are not.
//
// The gate is conservative. A required field that becomes optional is
// incompatible too, because consumers built against the old schema rely on it
// being present. Any keyword the gate cannot classify (oneOf, anyOf, allOf,
// if/then, patternProperties, default, …) is reported as "unclassified" and
// incompatible: a change nobody can reason about must come as a new version.
package compat

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Verdict says whether a change may ship under the same type name.
type Verdict string

// The two verdicts.
const (
	Compatible   Verdict = "compatible"
	Incompatible Verdict = "incompatible"
)

// Rule is a short, stable code naming why a change got its verdict. Tools and
// documentation may match on it; the codes do not change meaning.
type Rule string

// The rules, each with the verdict Rule.Verdict gives it.
const (
	RuleAddedType                  Rule = "added-type"                   // compatible
	RuleRemovedType                Rule = "removed-type"                 // incompatible
	RuleChangedKind                Rule = "changed-kind"                 // incompatible
	RuleChangedScope               Rule = "changed-scope"                // incompatible
	RuleChangedDomain              Rule = "changed-domain"               // incompatible
	RuleMetadata                   Rule = "metadata"                     // compatible
	RuleAddedOptionalField         Rule = "added-optional-field"         // compatible
	RuleAddedRequiredField         Rule = "added-required-field"         // incompatible
	RuleRemovedField               Rule = "removed-field"                // incompatible
	RuleOptionalToRequired         Rule = "optional-to-required"         // incompatible
	RuleRequiredToOptional         Rule = "required-to-optional"         // incompatible
	RuleChangedType                Rule = "changed-type"                 // incompatible
	RuleRemovedEnumValue           Rule = "removed-enum-value"           // incompatible
	RuleAddedEnumValueExtensible   Rule = "added-enum-value-extensible"  // compatible
	RuleAddedEnumValueClosed       Rule = "added-enum-value-closed"      // incompatible
	RuleEnumMadeExtensible         Rule = "enum-made-extensible"         // incompatible
	RuleEnumMadeClosed             Rule = "enum-made-closed"             // compatible
	RuleChangedMeaning             Rule = "changed-meaning"              // incompatible
	RuleChangedUnit                Rule = "changed-unit"                 // incompatible
	RuleChangedTimezone            Rule = "changed-timezone"             // incompatible
	RuleChangedConstraint          Rule = "changed-constraint"           // incompatible
	RuleAdditionalPropertiesOpened Rule = "additional-properties-opened" // compatible
	RuleAdditionalPropertiesClosed Rule = "additional-properties-closed" // incompatible
	RuleUnclassified               Rule = "unclassified"                 // incompatible
)

// Verdict returns the verdict every change under r gets. Unknown rules are
// incompatible, in keeping with the gate's conservatism.
func (r Rule) Verdict() Verdict {
	switch r {
	case RuleAddedType, RuleMetadata, RuleAddedOptionalField, RuleAddedEnumValueExtensible,
		RuleEnumMadeClosed, RuleAdditionalPropertiesOpened:
		return Compatible
	}
	return Incompatible
}

// Change is one difference between two catalogs.
type Change struct {
	// Type is the message type the change belongs to, e.g. request.submitted.v1.
	Type string
	// Path locates the change: a JSON pointer into the payload schema
	// (/properties/channel, /properties/channel/enum), "catalog.yaml:<field>"
	// for a field of the definition, or "catalog.yaml" for the whole type.
	Path    string
	Verdict Verdict
	Rule    Rule
	// Detail says what changed, in a sentence for the author.
	Detail string
}

// Report lists every change between two catalogs, ordered by type, then
// path, then rule and detail, so the same inputs always print the same way.
type Report struct {
	Changes []Change
}

// HasIncompatible reports whether any change needs a new version.
func (r Report) HasIncompatible() bool {
	for _, c := range r.Changes {
		if c.Verdict == Incompatible {
			return true
		}
	}
	return false
}

// IncompatibleTypes returns, sorted and without repeats, the types that have
// at least one incompatible change.
func (r Report) IncompatibleTypes() []string {
	seen := make(map[string]bool)
	var out []string
	for _, c := range r.Changes {
		if c.Verdict == Incompatible && !seen[c.Type] {
			seen[c.Type] = true
			out = append(out, c.Type)
		}
	}
	sort.Strings(out)
	return out
}

// NextVersion returns the type name an incompatible change of typ must be
// published under: request.submitted.v1 → request.submitted.v2. It fails when
// typ does not end in .v<N>.
func NextVersion(typ string) (string, error) {
	i := strings.LastIndex(typ, ".v")
	if i < 0 {
		return "", fmt.Errorf("type %q has no .v<N> suffix", typ)
	}
	n, err := strconv.Atoi(typ[i+2:])
	if err != nil || n < 1 {
		return "", fmt.Errorf("type %q has no .v<N> suffix", typ)
	}
	return typ[:i] + ".v" + strconv.Itoa(n+1), nil
}

// Compare lists every difference from the catalog in oldCat to the one in
// newCat. Each holds catalog.yaml and <domain>/<type>.json. Unknown keys in
// catalog.yaml are kept and compared as metadata, so fields added to the
// catalog format later need no change here. Compare fails when either
// catalog cannot be read: catalog.yaml missing or not YAML, a definition
// without type or domain, a type defined twice, a schema file missing or not
// JSON.
func Compare(oldCat, newCat fs.FS) (Report, error) {
	olds, err := load(oldCat)
	if err != nil {
		return Report{}, fmt.Errorf("compat: old catalog: %w", err)
	}
	news, err := load(newCat)
	if err != nil {
		return Report{}, fmt.Errorf("compat: new catalog: %w", err)
	}
	d := &differ{}
	for typ, o := range olds {
		n, ok := news[typ]
		if !ok {
			d.typ = typ
			d.add("catalog.yaml", RuleRemovedType, "type removed from the catalog; its consumers and replays of its stored events would break")
			continue
		}
		d.typ = typ
		d.definition(o.fields, n.fields)
		d.node("", o.schema, n.schema)
	}
	for typ := range news {
		if _, ok := olds[typ]; !ok {
			d.typ = typ
			d.add("catalog.yaml", RuleAddedType, "type added to the catalog")
		}
	}
	sort.Slice(d.changes, func(i, j int) bool {
		a, b := d.changes[i], d.changes[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Detail < b.Detail
	})
	return Report{Changes: d.changes}, nil
}

// definition is one entry of catalog.yaml with its decoded payload schema.
type definition struct {
	fields map[string]any // every key of the entry, known or not
	schema any
}

// load reads a catalog tolerantly: unlike the registry, it does not refuse
// keys it does not know, because the gate must judge a catalog whose format
// is growing (successor, deprecated, …).
func load(fsys fs.FS) (map[string]definition, error) {
	raw, err := fs.ReadFile(fsys, "catalog.yaml")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Definitions []map[string]any `yaml:"definitions"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse catalog.yaml: %w", err)
	}
	defs := make(map[string]definition, len(doc.Definitions))
	for i, fields := range doc.Definitions {
		typ, _ := fields["type"].(string)
		if typ == "" {
			return nil, fmt.Errorf("catalog.yaml: definition %d has no type", i+1)
		}
		if _, dup := defs[typ]; dup {
			return nil, fmt.Errorf("catalog.yaml: %s defined twice", typ)
		}
		domain, _ := fields["domain"].(string)
		if domain == "" {
			return nil, fmt.Errorf("catalog.yaml: %s has no domain", typ)
		}
		file := path.Join(domain, typ+".json")
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		var schema any
		if err := json.Unmarshal(b, &schema); err != nil {
			return nil, fmt.Errorf("%s: parse %s: %w", typ, file, err)
		}
		defs[typ] = definition{fields: fields, schema: schema}
	}
	return defs, nil
}

// differ collects the changes of one comparison.
type differ struct {
	typ     string // the type being compared
	changes []Change
}

func (d *differ) add(at string, rule Rule, format string, args ...any) {
	d.changes = append(d.changes, Change{
		Type: d.typ, Path: at, Verdict: rule.Verdict(), Rule: rule, Detail: fmt.Sprintf(format, args...),
	})
}

// definition compares the catalog.yaml entries of one type. Kind, scope and
// domain decide where and how the message travels and who may see it, so
// changing them breaks consumers; everything else describes the type.
func (d *differ) definition(o, n map[string]any) {
	for _, k := range unionKeys(o, n) {
		if k == "type" {
			continue
		}
		ov, inOld := o[k]
		nv, inNew := n[k]
		if inOld == inNew && reflect.DeepEqual(ov, nv) {
			continue
		}
		rule := RuleMetadata
		switch k {
		case "kind":
			rule = RuleChangedKind
		case "scope":
			rule = RuleChangedScope
		case "domain":
			rule = RuleChangedDomain
		}
		d.add("catalog.yaml:"+k, rule, "%s", describe(k, ov, inOld, nv, inNew))
	}
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys(a, b map[string]any) []string {
	seen := make(map[string]bool, len(a)+len(b))
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// describe says in words how a value changed between two sides.
func describe(name string, ov any, inOld bool, nv any, inNew bool) string {
	switch {
	case !inOld:
		return fmt.Sprintf("%s added (%s)", name, show(nv))
	case !inNew:
		return fmt.Sprintf("%s removed (was %s)", name, show(ov))
	}
	return fmt.Sprintf("%s changed from %s to %s", name, show(ov), show(nv))
}

// show renders a decoded JSON or YAML value for a Detail, shortened.
func show(v any) string {
	s := canon(v)
	if len(s) > 80 {
		// Cut between characters: an enumeration value may be any text.
		n := 77
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "..."
	}
	return s
}

// canon renders a decoded JSON or YAML value as JSON (object keys sorted),
// so equal values render equally.
func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
