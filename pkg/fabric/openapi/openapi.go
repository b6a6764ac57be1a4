// Package openapi holds what every service's OpenAPI 3.1 document shares
// and merges it into each: the routes the host serves beside the service's
// own (/healthz, /readyz, /metrics, /openapi.json and, for a service that
// consumes, the DLQ API under /v1/dlq/), and the components a service's
// document refers to by $ref: the RFC 9457 Problem schema, the problem
// responses (#/components/responses/NotFound, …) and the bearer security
// scheme. Each service writes its own routes by hand, in a YAML or JSON
// file it embeds; the host merges them with this fragment at start-up
// (host.Options.OpenAPI) and serves the result at GET /openapi.json.
//
// Package openapitest checks real requests and responses against the
// merged document.
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

//go:embed host.yaml
var hostFragment []byte

// Path is where the host serves the merged document.
const Path = "/openapi.json"

// dlqPrefix is where the DLQ API lives (dlq.PathPrefix; not imported, so
// that this package stays free of the broker).
const dlqPrefix = "/v1/dlq/"

// replayPrefix is where replays from history live (replay.PathPrefix),
// served, like the DLQ API, by a service that consumes.
const replayPrefix = "/v1/replays"

// opsPrefix is ops.PathPrefix, for the same reason.
const opsPrefix = "/v1/ops/"

// Host describes the host's routes for one service.
type Host struct {
	// Queues are the service's consumer queues: the DLQ API is documented
	// for them (its {queue} parameter enumerates them), and left out of
	// the document when there are none, as the host then does not serve it.
	Queues []string
	// Ops: the service serves the operations views under /v1/ops/ (it
	// consumes or runs a relay); left out of the document otherwise.
	Ops bool
}

// Document returns service, the service's own OpenAPI 3.1 document (YAML
// or JSON), merged with the host's routes and the shared components it
// uses (pruneHostComponents), as JSON. A path, component or tag that both
// define is an error: a service neither redefines nor overrides what the
// fabric documents.
func Document(service []byte, h Host) ([]byte, error) {
	doc, err := decode(service)
	if err != nil {
		return nil, fmt.Errorf("openapi: service document: %w", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		return nil, fmt.Errorf("openapi: service document: openapi is %q, want 3.1.x", v)
	}
	host, err := decode(hostFragment)
	if err != nil {
		return nil, fmt.Errorf("openapi: host fragment: %w", err)
	}
	hostPaths, _ := host["paths"].(map[string]any)
	if !h.Ops {
		for p := range hostPaths {
			if strings.HasPrefix(p, opsPrefix) {
				delete(hostPaths, p)
			}
		}
	}
	if len(h.Queues) == 0 {
		for p := range hostPaths {
			if strings.HasPrefix(p, dlqPrefix) || strings.HasPrefix(p, replayPrefix) {
				delete(hostPaths, p)
			}
		}
	} else {
		params, _ := host["components"].(map[string]any)["parameters"].(map[string]any)
		queue, _ := params["DLQQueue"].(map[string]any)
		schema, _ := queue["schema"].(map[string]any)
		if schema == nil {
			return nil, errors.New("openapi: host fragment: no components.parameters.DLQQueue.schema")
		}
		schema["enum"] = slices.Sorted(slices.Values(h.Queues))
	}
	if err := mergeMap(doc, "paths", host); err != nil {
		return nil, err
	}
	comps, _ := doc["components"].(map[string]any)
	if comps == nil {
		comps = map[string]any{}
		doc["components"] = comps
	}
	hostComps, _ := host["components"].(map[string]any)
	for _, section := range sortedKeys(hostComps) {
		if err := mergeMap(comps, section, hostComps); err != nil {
			return nil, fmt.Errorf("%w (components)", err)
		}
	}
	pruneHostComponents(doc, hostComps)
	tags, _ := doc["tags"].([]any)
	names := map[string]bool{}
	for _, t := range tags {
		if m, ok := t.(map[string]any); ok {
			names[fmt.Sprint(m["name"])] = true
		}
	}
	for _, t := range host["tags"].([]any) {
		name := fmt.Sprint(t.(map[string]any)["name"])
		if names[name] {
			return nil, fmt.Errorf("openapi: tag %q is the host's; the service document defines it again", name)
		}
		tags = append(tags, t)
	}
	doc["tags"] = tags
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return out.Bytes(), nil
}

// mergeMap adds src[key]'s entries to dst[key], refusing any already there.
func mergeMap(dst map[string]any, key string, src map[string]any) error {
	from, _ := src[key].(map[string]any)
	if len(from) == 0 {
		return nil
	}
	to, _ := dst[key].(map[string]any)
	if to == nil {
		to = map[string]any{}
		dst[key] = to
	}
	for _, k := range sortedKeys(from) {
		if _, dup := to[k]; dup {
			return fmt.Errorf("openapi: %s %q is the host's; the service document defines it again", key, k)
		}
		to[k] = from[k]
	}
	return nil
}

// pruneHostComponents removes from doc the components the host's fragment
// added (host) that nothing in doc refers to, directly or through another
// component: a service that answers no 409 gets no Conflict response, one
// without queues no DeadLetter schema. The service's own components stay,
// used or not, for the API linter to report. Security schemes are named,
// not referred to, and stay.
func pruneHostComponents(doc, host map[string]any) {
	comps, _ := doc["components"].(map[string]any)
	used := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !used[ref] {
				used[ref] = true
				if target := resolveLocal(doc, ref); target != nil {
					walk(target)
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for k, v := range doc {
		if k != "components" {
			walk(v)
		}
	}
	// The service's own components are kept, so what they refer to is used.
	for section, entries := range comps {
		own, _ := entries.(map[string]any)
		fromHost, _ := host[section].(map[string]any)
		for name, c := range own {
			if _, ok := fromHost[name]; !ok {
				walk(c)
			}
		}
	}
	for section, entries := range host {
		if section == "securitySchemes" {
			continue
		}
		own, _ := comps[section].(map[string]any)
		for name := range entries.(map[string]any) {
			if !used["#/components/"+section+"/"+name] {
				delete(own, name)
			}
		}
		if len(own) == 0 {
			delete(comps, section)
		}
	}
}

// resolveLocal returns what ref ("#/components/schemas/X") points to in
// doc, or nil.
func resolveLocal(doc map[string]any, ref string) any {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var v any = doc
	for _, part := range strings.Split(path, "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		v = m[part]
	}
	return v
}

// Operation is one method on one path template of a document.
type Operation struct {
	Method string // upper case: GET, POST, …
	Path   string // the template, e.g. /v1/requests/{id}
}

func (o Operation) String() string { return o.Method + " " + o.Path }

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Operations lists the operations of doc (YAML or JSON), sorted by path
// then method. It reads the paths only: doc need not be merged.
func Operations(doc []byte) ([]Operation, error) {
	d, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	paths, _ := d["paths"].(map[string]any)
	var ops []Operation
	for _, p := range sortedKeys(paths) {
		item, _ := paths[p].(map[string]any)
		for _, m := range methods {
			if _, ok := item[m]; ok {
				ops = append(ops, Operation{Method: strings.ToUpper(m), Path: p})
			}
		}
	}
	return ops, nil
}

// HostOperations lists the host's own operations for h, as Document adds
// them.
func HostOperations(h Host) ([]Operation, error) {
	ops, err := Operations(hostFragment)
	if err != nil {
		return nil, err
	}
	if len(h.Queues) == 0 {
		ops = slices.DeleteFunc(ops, func(o Operation) bool {
			return strings.HasPrefix(o.Path, dlqPrefix) || strings.HasPrefix(o.Path, replayPrefix)
		})
	}
	if !h.Ops {
		ops = slices.DeleteFunc(ops, func(o Operation) bool { return strings.HasPrefix(o.Path, opsPrefix) })
	}
	return ops, nil
}

// decode reads YAML (JSON being YAML) into maps keyed by strings, as JSON
// has them.
func decode(data []byte) (map[string]any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	m, ok := jsonValue(v).(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// jsonValue turns what yaml.v3 decodes into what encoding/json encodes:
// keys as strings (a response code written 200 is "200"), timestamps as
// RFC 3339 text.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonValue(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonValue(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonValue(e)
		}
		return v
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
