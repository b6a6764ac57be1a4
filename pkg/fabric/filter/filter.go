// Package filter compiles and evaluates subscription filters (seed 004
// §17-18): deterministic expressions over an event's envelope and payload,
// written in CEL (cel-go). A filter runs no code of ours, reaches no
// network, and is bounded in cost: the checker refuses a non-boolean
// expression, and evaluation stops at CostLimit. At creation a filter is
// also checked against the JSON Schema of every event type it is meant
// for: each payload field it names must exist there, so a typo is refused
// then, not silently false for ever.
//
// Variables: event (map: type, tenantId, source, correlationId,
// causationId, occurredAt as RFC 3339 text) and payload (the event's
// payload, dynamic).
package filter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// costLimit bounds one evaluation (CEL's cost units: about one per
// operation and per element a macro visits).
const costLimit = 10_000

// maxLength bounds a filter's source.
const maxLength = 2_000

// errInvalid is a filter that does not compile, is not boolean, names a
// payload field an event type does not have, or is too long: input that
// breaks a rule, of the fabric's kind fabric.ErrInvalid.
var errInvalid = fmt.Errorf("%w filter", fabric.ErrInvalid)

// Filter is a compiled filter.
type Filter struct {
	src string
	prg cel.Program
}

func env() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("payload", cel.DynType),
	)
}

// Compile checks src against the schemas of types in reg and returns the
// filter. An empty src matches every event.
func Compile(reg *registry.Registry, types []string, src string) (*Filter, error) {
	src = strings.TrimSpace(src)
	if src == "" {
		src = "true"
	}
	if len(src) > maxLength {
		return nil, fmt.Errorf("%w: longer than %d characters", errInvalid, maxLength)
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%w: %v", errInvalid, iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("%w: the expression is %s, want a bool", errInvalid, ast.OutputType())
	}
	defs := make([]registry.Definition, len(types))
	for i, typ := range types {
		def, ok := reg.Lookup(typ)
		if !ok {
			return nil, fmt.Errorf("%w: unknown event type %s", errInvalid, typ)
		}
		defs[i] = def
	}
	for _, path := range payloadPaths(ast.NativeRep().Expr()) {
		for i, def := range defs {
			typ := types[i]
			if !schemaHas(def.Schema, path) {
				return nil, fmt.Errorf("%w: %s has no payload field %s", errInvalid, typ, strings.Join(path, "."))
			}
		}
	}
	prg, err := e.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalid, err)
	}
	return &Filter{src: src, prg: prg}, nil
}

// Match evaluates the filter on env. An error (a field the event lacks, a
// cost over the limit) is returned, never taken as a match.
func (f *Filter) Match(env envelope.Envelope) (bool, error) {
	var payload any
	if err := json.Unmarshal(env.Payload, &payload); err != nil {
		return false, fmt.Errorf("filter: payload of %s: %w", env.ID, err)
	}
	out, _, err := f.prg.Eval(map[string]any{
		"event": map[string]any{"type": env.Type, "tenantId": env.TenantID, "source": env.Producer,
			"correlationId": env.CorrelationID, "causationId": env.CausationID, "occurredAt": env.OccurredAt.UTC().Format(time.RFC3339Nano)},
		"payload": payload,
	})
	if err != nil {
		return false, fmt.Errorf("filter %q on %s: %w", f.src, env.ID, err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("filter %q on %s: not a bool", f.src, env.ID)
	}
	return bool(b), nil
}

// payloadPaths returns every field path the expression selects from
// payload (payload.a.b → [a b]; payload["a"] too).
func payloadPaths(root celast.Expr) [][]string {
	var out [][]string
	celast.PostOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		path, ok := pathOf(e)
		if !ok || len(path) == 0 {
			return
		}
		for _, p := range out {
			if slices.Equal(p, path) {
				return
			}
		}
		out = append(out, path)
	}))
	// Keep only maximal paths: payload.a.b covers payload.a.
	var maximal [][]string
	for _, p := range out {
		covered := false
		for _, q := range out {
			if len(q) > len(p) && slices.Equal(q[:len(p)], p) {
				covered = true
			}
		}
		if !covered {
			maximal = append(maximal, p)
		}
	}
	return maximal
}

// pathOf reads a select or string-index chain rooted at payload.
func pathOf(e celast.Expr) ([]string, bool) {
	switch e.Kind() {
	case celast.IdentKind:
		return nil, e.AsIdent() == "payload"
	case celast.SelectKind:
		s := e.AsSelect()
		p, ok := pathOf(s.Operand())
		if !ok {
			return nil, false
		}
		return append(slices.Clone(p), s.FieldName()), true
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != "_[_]" || len(c.Args()) != 2 || c.Args()[1].Kind() != celast.LiteralKind {
			return nil, false
		}
		key, ok := c.Args()[1].AsLiteral().Value().(string)
		if !ok {
			return nil, false
		}
		p, ok := pathOf(c.Args()[0])
		if !ok {
			return nil, false
		}
		return append(slices.Clone(p), key), true
	}
	return nil, false
}

// schemaHas reports whether the JSON Schema document declares path under
// its properties (through nested objects; an object without declared
// properties, or open to any, admits anything below it).
func schemaHas(schema []byte, path []string) bool {
	var node map[string]any
	if err := json.Unmarshal(schema, &node); err != nil {
		return false
	}
	for _, field := range path {
		props, ok := node["properties"].(map[string]any)
		if !ok {
			// No declared properties: an open object (a free-form
			// payload field) admits any name below it.
			return node["type"] == "object" || node["type"] == nil
		}
		next, ok := props[field].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}
