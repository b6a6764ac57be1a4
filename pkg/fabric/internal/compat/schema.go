package compat

import (
	"reflect"
	"sort"
	"strings"
)

// keywordRule is the rule a changed schema keyword falls under, for the
// keywords that need no structural comparison. Keywords not listed are
// unclassified.
func keywordRule(k string) (Rule, bool) {
	switch k {
	case "format", "$ref", "const":
		return RuleChangedType, true
	case "x-meaning":
		return RuleChangedMeaning, true
	case "x-unit":
		return RuleChangedUnit, true
	case "x-timezone":
		return RuleChangedTimezone, true
	// Loosening a constraint lets producers send what old readers refuse;
	// tightening it makes stored events fail validation on replay.
	case "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"minItems", "maxItems", "uniqueItems", "minContains", "maxContains", "minProperties", "maxProperties",
		"multipleOf":
		return RuleChangedConstraint, true
	case "description", "title", "$id", "$schema", "$comment", "examples", "deprecated", "x-sensitive":
		return RuleMetadata, true
	}
	return "", false
}

// node compares two schemas found at the JSON pointer at ("" for the root).
func (d *differ) node(at string, o, n any) {
	om, oOK := o.(map[string]any)
	nm, nOK := n.(map[string]any)
	if !oOK || !nOK {
		// Boolean schemas, or a schema replaced by a boolean: nothing to
		// compare keyword by keyword.
		if !reflect.DeepEqual(o, n) {
			d.add(at, RuleUnclassified, "schema changed from %s to %s; the gate cannot classify this change", show(o), show(n))
		}
		return
	}
	d.properties(at, om, nm)
	for _, k := range unionKeys(om, nm) {
		ov, inOld := om[k]
		nv, inNew := nm[k]
		if inOld == inNew && reflect.DeepEqual(ov, nv) {
			continue
		}
		kp := at + "/" + escape(k)
		switch k {
		case "properties", "required":
			// Compared name by name in properties.
		case "items":
			if inOld && inNew {
				d.node(kp, ov, nv)
			} else {
				d.add(kp, RuleChangedType, "array %s", describe("items schema", ov, inOld, nv, inNew))
			}
		case "type":
			if inOld != inNew || typeSet(ov) != typeSet(nv) {
				d.add(kp, RuleChangedType, "%s", describe("type", ov, inOld, nv, inNew))
			}
		case "enum":
			d.enum(kp, om, nm)
		case "x-extensible":
			d.extensible(kp, ov, inOld, nv, inNew)
		case "additionalProperties":
			d.additionalProperties(kp, ov, inOld, nv, inNew)
		default:
			rule, ok := keywordRule(k)
			if !ok {
				d.add(kp, RuleUnclassified, "%s; the gate cannot classify this change, so it must come as a new version", describe(k, ov, inOld, nv, inNew))
				continue
			}
			d.add(kp, rule, "%s", describe(k, ov, inOld, nv, inNew))
		}
	}
}

// properties compares the properties and required lists of two object
// schemas name by name, then recurses into the properties both sides have.
func (d *differ) properties(at string, om, nm map[string]any) {
	oProps, oOK := om["properties"].(map[string]any)
	nProps, nOK := nm["properties"].(map[string]any)
	oReq, oReqOK := stringSet(om["required"])
	nReq, nReqOK := stringSet(nm["required"])
	if (!oOK && om["properties"] != nil) || (!nOK && nm["properties"] != nil) || !oReqOK || !nReqOK {
		if !reflect.DeepEqual(om["properties"], nm["properties"]) || !reflect.DeepEqual(om["required"], nm["required"]) {
			d.add(at, RuleUnclassified, "properties or required is not of the expected shape; the gate cannot classify this change")
		}
		return
	}
	names := make(map[string]bool)
	for _, set := range []map[string]any{oProps, nProps} {
		for name := range set {
			names[name] = true
		}
	}
	for _, set := range []map[string]bool{oReq, nReq} {
		for name := range set {
			names[name] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		p := at + "/properties/" + escape(name)
		op, oHas := oProps[name]
		np, nHas := nProps[name]
		switch {
		case !oHas && nHas && nReq[name]:
			d.add(p, RuleAddedRequiredField, "required property %q added; producers built before do not send it", name)
		case !oHas && nHas:
			d.add(p, RuleAddedOptionalField, "optional property %q added", name)
		case oHas && !nHas:
			was := "optional"
			if oReq[name] {
				was = "required"
			}
			d.add(p, RuleRemovedField, "%s property %q removed; consumers and stored events still use it", was, name)
		default:
			if !oReq[name] && nReq[name] {
				d.add(p, RuleOptionalToRequired, "property %q became required; events sent without it fail validation", name)
			}
			if oReq[name] && !nReq[name] {
				d.add(p, RuleRequiredToOptional, "property %q is no longer required; consumers built before rely on it being present", name)
			}
			if oHas && nHas {
				d.node(p, op, np)
			}
		}
	}
}

// enum compares the enumerations of two schemas. Adding a value is only
// compatible when consumers on both sides were told to accept unknown values.
func (d *differ) enum(at string, om, nm map[string]any) {
	ov, inOld := om["enum"]
	nv, inNew := nm["enum"]
	oList, oOK := ov.([]any)
	nList, nOK := nv.([]any)
	if !inOld || !inNew || !oOK || !nOK {
		d.add(at, RuleChangedConstraint, "%s", describe("enumeration", ov, inOld, nv, inNew))
		return
	}
	oSet, nSet := valueSet(oList), valueSet(nList)
	for _, v := range oList {
		if !nSet[canon(v)] {
			d.add(at, RuleRemovedEnumValue, "value %s removed from the enumeration", show(v))
		}
	}
	extensible := om["x-extensible"] == true && nm["x-extensible"] == true
	for _, v := range nList {
		if oSet[canon(v)] {
			continue
		}
		if extensible {
			d.add(at, RuleAddedEnumValueExtensible, "value %s added to an extensible enumeration", show(v))
		} else {
			d.add(at, RuleAddedEnumValueClosed, "value %s added to a closed enumeration (not \"x-extensible\": true before and after); consumers may refuse it", show(v))
		}
	}
}

// extensible judges a change of x-extensible. Opening an enumeration is
// incompatible because consumers built before may not handle unknown values;
// closing one only narrows what producers promise.
func (d *differ) extensible(at string, ov any, inOld bool, nv any, inNew bool) {
	_, oBool := ov.(bool)
	_, nBool := nv.(bool)
	if (inOld && !oBool) || (inNew && !nBool) {
		d.add(at, RuleUnclassified, "%s; x-extensible must be a boolean", describe("x-extensible", ov, inOld, nv, inNew))
		return
	}
	switch was, is := ov == true, nv == true; {
	case !was && is:
		d.add(at, RuleEnumMadeExtensible, "enumeration made extensible; consumers built before may not support unknown values")
	case was && !is:
		d.add(at, RuleEnumMadeClosed, "enumeration made closed")
	}
}

// additionalProperties judges opening or closing an object to properties it
// does not declare. Absent means true.
func (d *differ) additionalProperties(at string, ov any, inOld bool, nv any, inNew bool) {
	oOpen, oBool := openness(ov, inOld)
	nOpen, nBool := openness(nv, inNew)
	if !oBool || !nBool {
		d.add(at, RuleUnclassified, "%s; the gate cannot classify a schema here", describe("additionalProperties", ov, inOld, nv, inNew))
		return
	}
	switch {
	case oOpen == nOpen:
	case nOpen:
		d.add(at, RuleAdditionalPropertiesOpened, "object opened to undeclared properties")
	default:
		d.add(at, RuleAdditionalPropertiesClosed, "object closed to undeclared properties; events carrying them fail validation")
	}
}

// openness reads additionalProperties: whether undeclared properties are
// allowed, and whether the value was a boolean (or absent) at all.
func openness(v any, present bool) (open, isBool bool) {
	if !present {
		return true, true
	}
	b, ok := v.(bool)
	return b, ok
}

// typeSet normalizes a type keyword so "string" and ["string"], or the same
// types in another order, compare equal.
func typeSet(v any) string {
	list, ok := v.([]any)
	if !ok {
		if s, ok := v.(string); ok {
			return s
		}
		return canon(v)
	}
	names := make([]string, 0, len(list))
	for _, t := range list {
		names = append(names, canon(t))
	}
	sort.Strings(names)
	if len(names) == 1 {
		return strings.Trim(names[0], `"`)
	}
	return strings.Join(names, ",")
}

// stringSet reads a required list; ok is false when it is present but not a
// list of strings.
func stringSet(v any) (set map[string]bool, ok bool) {
	set = make(map[string]bool)
	if v == nil {
		return set, true
	}
	list, isList := v.([]any)
	if !isList {
		return nil, false
	}
	for _, e := range list {
		s, isString := e.(string)
		if !isString {
			return nil, false
		}
		set[s] = true
	}
	return set, true
}

// valueSet indexes enumeration values by their canonical JSON, so 1 and 1.0
// or objects with keys in another order are the same value.
func valueSet(list []any) map[string]bool {
	set := make(map[string]bool, len(list))
	for _, v := range list {
		set[canon(v)] = true
	}
	return set
}

// escape makes a property name a JSON pointer token (RFC 6901).
func escape(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
