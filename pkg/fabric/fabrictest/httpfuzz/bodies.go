package httpfuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// problemTypes is where the platform's problem types are described; the
// URIs are a contract with clients, so they are written out here rather
// than taken from the code that answers them.
const problemTypes = "https://github.com/agora-platform/agora/blob/main/docs/problems.md#"

// badBody is one malformed request body and the answer every JSON route
// of every service must give it (pkg/fabric/httpjson.ReadStrict; NUL and
// invalid UTF-8 are refused by the host's edge checks, before the route).
type badBody struct {
	name        string
	contentType string
	body        []byte
	status      int
	problemType string // the anchor under problemTypes
}

// oversized is larger than any JSON route accepts (the largest, a request
// submission, takes 256 KiB) and than the edge checks before the route.
const oversized = 1 << 20

var badBodies = []badBody{
	{"wrong media type", "text/plain", []byte(`{}`), http.StatusUnsupportedMediaType, "unsupported-media-type"},
	{"oversized", "application/json", []byte(`{"x":"` + strings.Repeat("a", oversized) + `"}`), http.StatusRequestEntityTooLarge, "body-too-large"},
	{"unknown field", "application/json", []byte(`{"noRouteHasThisField":true}`), http.StatusBadRequest, "unknown-field"},
	{"trailing data", "application/json", []byte(`{} {}`), http.StatusBadRequest, "trailing-data"},
	{"NUL byte", "application/json", []byte("{\"x\":\"a\x00b\"}"), http.StatusBadRequest, "invalid-text"},
	{"invalid UTF-8", "application/json", []byte("{\"x\":\"a\xffb\"}"), http.StatusBadRequest, "invalid-text"},
	{"malformed JSON", "application/json", []byte(`{"x":`), http.StatusBadRequest, "malformed-json"},
}

// CheckMalformedBodies sends each malformed body of badBodies to every
// operation the service's document (GET /openapi.json) says takes an
// application/json body, as a caller holding every role of the target's
// tenant, and fails t, one subtest per route and body, unless the answer
// is the status and problem type the platform gives that body. Path
// parameters are the first value of their enum, 1 for an integer, a UUID
// otherwise: the body is read before the thing they name is looked up.
func (ft *target) CheckMalformedBodies(t *testing.T) {
	t.Helper()
	ops, err := ft.jsonOperations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) == 0 {
		t.Fatal("the service's document has no operation with an application/json body")
	}
	for _, op := range ops {
		for _, bb := range badBodies {
			t.Run(op.method+" "+op.template+"/"+bb.name, func(t *testing.T) {
				if err := ft.checkBadBody(op, bb); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// checkBadBody sends bb to op and says what is wrong with the answer.
func (ft *target) checkBadBody(op jsonOperation, bb badBody) error {
	status, header, data := ft.send(Input{Method: op.method, Authn: AuthnAll, ContentType: bb.contentType, Body: bb.body}, op.path)
	if status != bb.status {
		return fmt.Errorf("%s %s with a body of %s: %d %.300s, want %d", op.method, op.path, bb.name, status, data, bb.status)
	}
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("%s %s with a body of %s: %d with Content-Type %q, want a problem", op.method, op.path, bb.name, status, ct)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(data, &p); err != nil || p.Status != status {
		return fmt.Errorf("%s %s with a body of %s: problem %.300s, want one of status %d", op.method, op.path, bb.name, data, status)
	}
	if want := problemTypes + bb.problemType; p.Type != want {
		return fmt.Errorf("%s %s with a body of %s: problem type %q, want %q", op.method, op.path, bb.name, p.Type, want)
	}
	return nil
}

// jsonOperation is an operation that takes a JSON body, and a path that
// reaches it.
type jsonOperation struct {
	method, template, path string
}

// jsonOperations reads the service's document and returns its operations
// that take an application/json body, sorted by path then method.
func (ft *target) jsonOperations() ([]jsonOperation, error) {
	resp, err := ft.client.Get(ft.base + "/openapi.json")
	if err != nil {
		return nil, fmt.Errorf("httpfuzz: fetch the document: %w", err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("httpfuzz: GET /openapi.json = %d: %v", resp.StatusCode, err)
	}
	return jsonOperationsOf(doc)
}

var bodyMethods = []string{"post", "put", "patch", "delete"}

func jsonOperationsOf(doc map[string]any) ([]jsonOperation, error) {
	paths, _ := doc["paths"].(map[string]any)
	var ops []jsonOperation
	for _, tmpl := range slices.Sorted(maps.Keys(paths)) {
		item, _ := paths[tmpl].(map[string]any)
		for _, m := range bodyMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			body, err := resolve(doc, op["requestBody"])
			if err != nil {
				return nil, fmt.Errorf("httpfuzz: %s %s: %w", m, tmpl, err)
			}
			content, _ := body["content"].(map[string]any)
			if _, ok := content["application/json"]; !ok {
				continue
			}
			params, err := pathParameters(doc, item["parameters"], op["parameters"])
			if err != nil {
				return nil, fmt.Errorf("httpfuzz: %s %s: %w", m, tmpl, err)
			}
			path, err := fill(tmpl, params)
			if err != nil {
				return nil, fmt.Errorf("httpfuzz: %s %s: %w", m, tmpl, err)
			}
			ops = append(ops, jsonOperation{method: strings.ToUpper(m), template: tmpl, path: path})
		}
	}
	return ops, nil
}

// resolve follows v's $ref within doc, if it has one; nil resolves to an
// empty object.
func resolve(doc map[string]any, v any) (map[string]any, error) {
	obj, _ := v.(map[string]any)
	ref, ok := obj["$ref"].(string)
	if !ok {
		return obj, nil
	}
	name, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not within the document", ref)
	}
	var cur any = doc
	for _, key := range strings.Split(name, "/") {
		m, _ := cur.(map[string]any)
		if cur = m[key]; cur == nil {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return resolve(doc, cur)
}

// pathParameters returns a value for each path parameter of an operation
// (its own parameters over its path's).
func pathParameters(doc map[string]any, lists ...any) (map[string]string, error) {
	values := map[string]string{}
	for _, list := range lists {
		params, _ := list.([]any)
		for _, p := range params {
			param, err := resolve(doc, p)
			if err != nil {
				return nil, err
			}
			if param["in"] != "path" {
				continue
			}
			name, _ := param["name"].(string)
			schema, err := resolve(doc, param["schema"])
			if err != nil {
				return nil, err
			}
			values[name] = sample(schema)
		}
	}
	return values, nil
}

// sample is a value of schema that routes read past, to their body.
func sample(schema map[string]any) string {
	if enum, _ := schema["enum"].([]any); len(enum) > 0 {
		return fmt.Sprint(enum[0])
	}
	if schema["type"] == "integer" {
		return "1"
	}
	return "0190a0b0-0000-7000-8000-000000000000"
}

// fill puts values into template's {parameters}.
func fill(template string, values map[string]string) (string, error) {
	var b bytes.Buffer
	rest := template
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", errors.New("an unclosed { in the path")
		}
		name := rest[i+1 : i+j]
		v, ok := values[name]
		if !ok {
			return "", fmt.Errorf("path parameter %q is not described", name)
		}
		b.WriteString(rest[:i] + v)
		rest = rest[i+j+1:]
	}
}
