package openapitest

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// strayKeys returns, as "pointer: key" lines, every key of doc (JSON or
// YAML) that the OpenAPI 3.1 object it sits in does not define, "x-"
// extensions aside. The OpenAPI 3.1 JSON Schema lets a Schema Object hold
// any key (JSON Schema 2020-12 ignores unknown keywords), so a document can
// be valid against it and still carry keys no reader understands: the
// usual one is a description that YAML cut short, `{type: string,
// description: The id, else the name.}` being a description "The id" and
// a key "else the name." with no value. Only what the document walks is
// checked: links, callbacks and the values of example, default, const and
// the like are taken as they are.
func strayKeys(doc []byte) ([]string, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	w := &keyWalker{}
	w.object(stringKeys(v), "", kindDocument)
	sort.Strings(w.stray)
	return w.stray, nil
}

// objectKind is an OpenAPI 3.1 object whose keys are known.
type objectKind int

const (
	kindDocument objectKind = iota
	kindInfo
	kindPathItem
	kindOperation
	kindParameter
	kindRequestBody
	kindMediaType
	kindEncoding
	kindResponse
	kindHeader
	kindExample
	kindTag
	kindComponents
	kindSecurityScheme
	kindSchema
)

// A field's value is one object of a kind, a map of them, a list of
// them, or taken as it is (leaf).
type shape int

const (
	leaf shape = iota
	one
	mapOf
	listOf
)

type field struct {
	shape shape
	kind  objectKind
}

var (
	leafField = field{}
	schema    = field{one, kindSchema}
	schemas   = field{mapOf, kindSchema}
)

// fields are the keys each kind defines (OpenAPI 3.1.1 §4.8, JSON Schema
// 2020-12 core, applicator, validation, format, content, meta-data and
// unevaluated vocabularies, and OpenAPI's own schema keywords).
var fields = map[objectKind]map[string]field{
	kindDocument: {"openapi": leafField, "info": {one, kindInfo}, "jsonSchemaDialect": leafField, "servers": leafField,
		"paths": {mapOf, kindPathItem}, "webhooks": {mapOf, kindPathItem}, "components": {one, kindComponents},
		"security": leafField, "tags": {listOf, kindTag}, "externalDocs": leafField},
	kindInfo: {"title": leafField, "summary": leafField, "description": leafField, "termsOfService": leafField,
		"contact": leafField, "license": leafField, "version": leafField},
	kindPathItem: {"$ref": leafField, "summary": leafField, "description": leafField, "servers": leafField,
		"parameters": {listOf, kindParameter}, "get": {one, kindOperation}, "put": {one, kindOperation},
		"post": {one, kindOperation}, "delete": {one, kindOperation}, "options": {one, kindOperation},
		"head": {one, kindOperation}, "patch": {one, kindOperation}, "trace": {one, kindOperation}},
	kindOperation: {"tags": leafField, "summary": leafField, "description": leafField, "externalDocs": leafField,
		"operationId": leafField, "parameters": {listOf, kindParameter}, "requestBody": {one, kindRequestBody},
		"responses": {mapOf, kindResponse}, "callbacks": leafField, "deprecated": leafField, "security": leafField,
		"servers": leafField},
	kindParameter: {"name": leafField, "in": leafField, "description": leafField, "required": leafField,
		"deprecated": leafField, "allowEmptyValue": leafField, "style": leafField, "explode": leafField,
		"allowReserved": leafField, "schema": schema, "example": leafField, "examples": {mapOf, kindExample},
		"content": {mapOf, kindMediaType}},
	kindRequestBody: {"description": leafField, "content": {mapOf, kindMediaType}, "required": leafField},
	kindMediaType: {"schema": schema, "example": leafField, "examples": {mapOf, kindExample},
		"encoding": {mapOf, kindEncoding}},
	kindEncoding: {"contentType": leafField, "headers": {mapOf, kindHeader}, "style": leafField,
		"explode": leafField, "allowReserved": leafField},
	kindResponse: {"description": leafField, "headers": {mapOf, kindHeader}, "content": {mapOf, kindMediaType},
		"links": leafField},
	kindHeader: {"description": leafField, "required": leafField, "deprecated": leafField,
		"allowEmptyValue": leafField, "style": leafField, "explode": leafField, "allowReserved": leafField,
		"schema": schema, "example": leafField, "examples": {mapOf, kindExample}, "content": {mapOf, kindMediaType}},
	kindExample: {"summary": leafField, "description": leafField, "value": leafField, "externalValue": leafField},
	kindTag:     {"name": leafField, "description": leafField, "externalDocs": leafField},
	kindComponents: {"schemas": schemas, "responses": {mapOf, kindResponse}, "parameters": {mapOf, kindParameter},
		"examples": {mapOf, kindExample}, "requestBodies": {mapOf, kindRequestBody}, "headers": {mapOf, kindHeader},
		"securitySchemes": {mapOf, kindSecurityScheme}, "links": leafField, "callbacks": leafField,
		"pathItems": {mapOf, kindPathItem}},
	kindSecurityScheme: {"type": leafField, "description": leafField, "name": leafField, "in": leafField,
		"scheme": leafField, "bearerFormat": leafField, "flows": leafField, "openIdConnectUrl": leafField},
	kindSchema: {
		// core
		"$schema": leafField, "$id": leafField, "$ref": leafField, "$anchor": leafField, "$dynamicRef": leafField,
		"$dynamicAnchor": leafField, "$vocabulary": leafField, "$comment": leafField, "$defs": schemas,
		// applicator
		"allOf": {listOf, kindSchema}, "anyOf": {listOf, kindSchema}, "oneOf": {listOf, kindSchema}, "not": schema,
		"if": schema, "then": schema, "else": schema, "dependentSchemas": schemas, "prefixItems": {listOf, kindSchema},
		"items": schema, "contains": schema, "properties": schemas, "patternProperties": schemas,
		"additionalProperties": schema, "propertyNames": schema,
		// unevaluated
		"unevaluatedItems": schema, "unevaluatedProperties": schema,
		// validation
		"type": leafField, "enum": leafField, "const": leafField, "multipleOf": leafField, "maximum": leafField,
		"exclusiveMaximum": leafField, "minimum": leafField, "exclusiveMinimum": leafField, "maxLength": leafField,
		"minLength": leafField, "pattern": leafField, "maxItems": leafField, "minItems": leafField,
		"uniqueItems": leafField, "maxContains": leafField, "minContains": leafField, "maxProperties": leafField,
		"minProperties": leafField, "required": leafField, "dependentRequired": leafField,
		// format, content, meta-data
		"format": leafField, "contentEncoding": leafField, "contentMediaType": leafField, "contentSchema": schema,
		"title": leafField, "description": leafField, "default": leafField, "deprecated": leafField,
		"readOnly": leafField, "writeOnly": leafField, "examples": leafField,
		// OpenAPI's
		"discriminator": leafField, "xml": leafField, "externalDocs": leafField, "example": leafField},
}

// refFields are the keys beside $ref of a Reference Object (OpenAPI 3.1
// §4.8.23); a Schema Object's $ref takes any keyword beside it.
var refFields = []string{"$ref", "summary", "description"}

type keyWalker struct{ stray []string }

func (w *keyWalker) object(v any, ptr string, kind objectKind) {
	m, ok := v.(map[string]any)
	if !ok {
		return // a boolean schema, or a wrong type the OpenAPI schema reports
	}
	_, isRef := m["$ref"]
	for _, k := range sortedKeys(m) {
		if strings.HasPrefix(k, "x-") {
			continue
		}
		if isRef && kind != kindSchema && kind != kindPathItem {
			if !slices.Contains(refFields, k) {
				w.stray = append(w.stray, fmt.Sprintf("%s: %q", ptr, k))
			}
			continue
		}
		f, ok := fields[kind][k]
		if !ok {
			w.stray = append(w.stray, fmt.Sprintf("%s: %q", ptr, k))
			continue
		}
		at := ptr + "/" + escapePointer(k)
		switch f.shape {
		case one:
			w.object(m[k], at, f.kind)
		case mapOf:
			entries, _ := m[k].(map[string]any)
			for _, name := range sortedKeys(entries) {
				// A Schema's properties may be named x-…; elsewhere x-… is an extension.
				if f.kind == kindSchema || !strings.HasPrefix(name, "x-") {
					w.object(entries[name], at+"/"+escapePointer(name), f.kind)
				}
			}
		case listOf:
			items, _ := m[k].([]any)
			for i, e := range items {
				w.object(e, fmt.Sprintf("%s/%d", at, i), f.kind)
			}
		}
	}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stringKeys turns the maps yaml.v3 decodes with other keys than strings
// (a response code written 200) into maps keyed by strings, as JSON has
// them.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = stringKeys(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = stringKeys(e)
		}
	}
	return v
}
