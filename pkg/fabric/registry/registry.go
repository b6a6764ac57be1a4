package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/agora-platform/agora/pkg/fabric/catalog"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Kind says which exchange a message travels on.
type Kind string

// Kinds of message.
const (
	KindEvent   Kind = "event"
	KindCommand Kind = "command"
	KindJob     Kind = "job"
)

// scope says what a message is about; GLOBAL messages carry no tenant.
type scope string

// Scopes.
const (
	scopeGlobal   scope = "GLOBAL"
	scopeTenant   scope = "TENANT"
	scopeUser     scope = "USER"
	scopeResource scope = "RESOURCE"
	scopeWorkflow scope = "WORKFLOW"
)

// sensitivity drives masking in DLQ inspection and logs, what may reach a
// model, how the data lake stores a field, and who may consume a type
// (Service.Clearance).
type sensitivity string

// Sensitivities, from least to most sensitive.
const (
	public       sensitivity = "PUBLIC"
	internal     sensitivity = "INTERNAL"
	confidential sensitivity = "CONFIDENTIAL"
	Restricted   sensitivity = "RESTRICTED"
)

// What the data lake does with a type's RestrictedFields (Definition.Lake).
const (
	lakeEncrypt = "encrypt"
	lakeDrop    = "drop"
)

var sensitivityRank = map[sensitivity]int{public: 0, internal: 1, confidential: 2, Restricted: 3}

// Above reports whether s is more sensitive than o.
func (s sensitivity) Above(o sensitivity) bool { return sensitivityRank[s] > sensitivityRank[o] }

// Definition describes one versioned message type.
type Definition struct {
	Type        string      `yaml:"type" json:"type"`
	Version     string      `yaml:"-" json:"version"`
	Kind        Kind        `yaml:"kind" json:"kind"`
	Domain      string      `yaml:"domain" json:"domain"`
	Owner       string      `yaml:"owner" json:"owner"`
	Scope       scope       `yaml:"scope" json:"scope"`
	Sensitivity sensitivity `yaml:"sensitivity" json:"sensitivity"`
	Replayable  bool        `yaml:"replayable" json:"replayable"`
	Description string      `yaml:"description" json:"description"`
	// SchemaFile is the schema's path inside the catalogue.
	SchemaFile string `yaml:"-" json:"schemaFile"`
	// Schema is the raw JSON Schema document.
	Schema []byte `yaml:"-" json:"-"`
	// SensitiveFields are the payload properties marked "x-sensitive":
	// masked in DLQ views and before a model sees them.
	SensitiveFields []string `yaml:"-" json:"sensitiveFields,omitempty"`
	// RestrictedFields are the SensitiveFields of a RESTRICTED type (a
	// type is as sensitive as its most sensitive field). They never reach
	// a model, and the data lake stores them as Lake says.
	RestrictedFields []string `yaml:"-" json:"restrictedFields,omitempty"`
	// Lake is what the data lake does with RestrictedFields: "encrypt"
	// (the default: sealed with the tenant's key, opened only for an
	// authorised replay) or "drop" (never stored; the type must then not
	// be replayable from history, as its events could not be rebuilt).
	Lake string `yaml:"lake,omitempty" json:"lake,omitempty"`
	// ExtensibleEnums maps the path of every enumeration marked
	// "x-extensible" (e.g. "/channel") to the values this build knows.
	// Readers must accept other values there (docs/contract-evolution.md).
	ExtensibleEnums map[string][]string `yaml:"-" json:"extensibleEnums,omitempty"`
	// Consumers are the queues the catalog's services bind this type to
	// ("<service>/<queue>"), by its name, a pattern (events) or a priority
	// lane: who receives it on this platform ("what happens when X?").
	Consumers []string `yaml:"-" json:"consumers,omitempty"`
	// Successor names the next version of this type while producers publish
	// both (docs/contract-evolution.md); empty outside a transition.
	Successor string `yaml:"successor,omitempty" json:"successor,omitempty"`

	// writer is the schema as written, closed: what a producer must send.
	// reader is the view a consumer checks: objects open, extensible
	// enumerations open (see readerView).
	writer, reader *jsonschema.Schema
}

// TenantRequired reports whether envelopes of this type must carry a tenant.
func (d Definition) TenantRequired() bool { return d.Scope != scopeGlobal }

// Errors returned by Check and ValidatePayload.
var (
	ErrUnknownType   = errors.New("unknown message type")
	ErrSchema        = errors.New("payload fails its schema")
	errBadDefinition = errors.New("bad catalogue definition")
)

// Registry is an immutable set of definitions, safe for concurrent use.
type Registry struct {
	defs     map[string]Definition
	services []Service
}

// Default loads the catalogue embedded in the fabric.
func Default() (*Registry, error) { return Load(catalog.FS) }

// Load reads catalog.yaml and the schema files from fsys and compiles every
// schema. It fails on the first malformed definition or schema.
func Load(fsys fs.FS) (*Registry, error) {
	raw, err := fs.ReadFile(fsys, "catalog.yaml")
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	var doc struct {
		Definitions []Definition `yaml:"definitions"`
		Services    []Service    `yaml:"services"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("registry: parse catalog.yaml: %w", err)
	}
	for i := range doc.Services {
		if doc.Services[i].Clearance == "" {
			doc.Services[i].Clearance = internal
		}
	}
	r := &Registry{defs: make(map[string]Definition, len(doc.Definitions)), services: doc.Services}
	for _, d := range doc.Definitions {
		d.SchemaFile = path.Join(d.Domain, d.Type+".json")
		if d.Schema, err = fs.ReadFile(fsys, d.SchemaFile); err != nil {
			return nil, fmt.Errorf("registry: %s: %w", d.Type, err)
		}
		if err := r.add(d); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
	}
	if err := r.checkSuccessors(); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if err := r.checkServices(); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	r.findConsumers()
	return r, nil
}

// checkSuccessors refuses a transition to a version nobody defined: its
// producer could not publish it.
func (r *Registry) checkSuccessors() error {
	for _, d := range r.defs {
		if s, ok := r.defs[d.Successor]; d.Successor != "" && (!ok || s.Kind != d.Kind) {
			return fmt.Errorf("%w %q: successor %q is not defined as a %s", errBadDefinition, d.Type, d.Successor, d.Kind)
		}
	}
	return nil
}

// laterVersion reports whether next is the same type as typ with a higher
// version number.
func laterVersion(typ, next string) bool {
	base := func(t string) string { return strings.TrimSuffix(t, ".v"+envelope.VersionOf(t)) }
	n1, err1 := strconv.Atoi(envelope.VersionOf(typ))
	n2, err2 := strconv.Atoi(envelope.VersionOf(next))
	return err1 == nil && err2 == nil && base(typ) == base(next) && n2 > n1
}

func (r *Registry) add(d Definition) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", errBadDefinition, d.Type, why) }
	if !envelope.ValidType(d.Type) {
		return bad("type is not <domain>.<name>.v<N>")
	}
	if _, dup := r.defs[d.Type]; dup {
		return bad("defined twice")
	}
	d.Version = envelope.VersionOf(d.Type)
	switch d.Kind {
	case KindEvent, KindCommand, KindJob:
	default:
		return bad(fmt.Sprintf("kind %q is not event|command|job", d.Kind))
	}
	switch d.Scope {
	case scopeGlobal, scopeTenant, scopeUser, scopeResource, scopeWorkflow:
	default:
		return bad(fmt.Sprintf("scope %q is not GLOBAL|TENANT|USER|RESOURCE|WORKFLOW", d.Scope))
	}
	switch d.Sensitivity {
	case public, internal, confidential, Restricted:
	default:
		return bad(fmt.Sprintf("sensitivity %q is not PUBLIC|INTERNAL|CONFIDENTIAL|RESTRICTED", d.Sensitivity))
	}
	if d.Owner == "" || d.Domain == "" || d.Description == "" {
		return bad("owner, domain and description are required")
	}
	if d.Successor != "" && (!envelope.ValidType(d.Successor) || !laterVersion(d.Type, d.Successor)) {
		return bad(fmt.Sprintf("successor %q is not a later version of the same type", d.Successor))
	}
	var err error
	if d.writer, err = compile(d.Type, d.Schema, func(any) {}); err != nil {
		return bad(err.Error())
	}
	enums := map[string][]string{}
	if d.reader, err = compile(d.Type, d.Schema, func(doc any) { readerView(doc, enums) }); err != nil {
		return bad(err.Error())
	}
	for p, values := range enums {
		if values == nil {
			return bad(fmt.Sprintf("%s is marked x-extensible but has no enum of strings", p))
		}
	}
	if len(enums) > 0 {
		d.ExtensibleEnums = enums
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(d.Schema)) // compile has parsed it already
	if obj, ok := doc.(map[string]any); ok {
		props, _ := obj["properties"].(map[string]any)
		for name, p := range props {
			pm, _ := p.(map[string]any)
			switch mark := pm["x-sensitive"]; mark {
			case nil, false:
				continue
			case true:
			default:
				return bad(fmt.Sprintf("property %s: x-sensitive is %v; want true", name, mark))
			}
			d.SensitiveFields = append(d.SensitiveFields, name)
			if d.Sensitivity == Restricted {
				d.RestrictedFields = append(d.RestrictedFields, name)
			}
		}
		sort.Strings(d.SensitiveFields)
		sort.Strings(d.RestrictedFields)
	}
	switch {
	case d.Lake == "" && len(d.RestrictedFields) > 0:
		d.Lake = lakeEncrypt
	case d.Lake == "" || d.Lake == lakeEncrypt:
	case d.Lake == lakeDrop && d.Replayable:
		return bad("lake: drop loses fields a replay from history needs; the type must not be replayable")
	case d.Lake != lakeDrop:
		return bad(fmt.Sprintf("lake %q is not encrypt|drop", d.Lake))
	}
	r.defs[d.Type] = d
	return nil
}

// Lookup returns the definition of typ.
func (r *Registry) Lookup(typ string) (Definition, bool) {
	d, ok := r.defs[typ]
	return d, ok
}

// All returns every definition ordered by type.
func (r *Registry) All() []Definition {
	out := make([]Definition, 0, len(r.defs))
	for _, d := range r.defs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// ValidatePayload checks payload as a producer must write it: against the
// schema of typ as written, closed to fields and values it does not list.
// It returns ErrUnknownType or an error wrapping ErrSchema that names the
// failing path.
func (r *Registry) ValidatePayload(typ string, payload []byte) error {
	return r.validatePayload(typ, payload, func(d Definition) *jsonschema.Schema { return d.writer })
}

// validateIncomingPayload checks payload as a consumer reads it: fields the
// schema does not list, and unknown values of extensible enumerations, are
// accepted (docs/contract-evolution.md); everything the schema does say still holds. Errors
// are those of ValidatePayload.
func (r *Registry) validateIncomingPayload(typ string, payload []byte) error {
	return r.validatePayload(typ, payload, func(d Definition) *jsonschema.Schema { return d.reader })
}

func (r *Registry) validatePayload(typ string, payload []byte, view func(Definition) *jsonschema.Schema) error {
	d, ok := r.defs[typ]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownType, typ)
	}
	v, err := parseValue(payload)
	if err != nil {
		return fmt.Errorf("%w: %s: not JSON: %v", ErrSchema, typ, err)
	}
	if err := view(d).Validate(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSchema, typ, err)
	}
	return nil
}

// Check validates an envelope a producer is about to send (strict writer):
// known type, required fields (tenant unless GLOBAL), a UUIDv7 id and the
// payload against the closed schema. It returns the type's definition, and
// ErrUnknownType, an envelope error or an error wrapping ErrSchema.
func (r *Registry) Check(e envelope.Envelope) (Definition, error) {
	return r.check(e, e.Validate, r.ValidatePayload)
}

// CheckIncoming validates an envelope a consumer received (tolerant
// reader): as Check, but any RFC 9562 UUID is an id, and fields or
// extensible enumeration values the catalog does not list are accepted.
func (r *Registry) CheckIncoming(e envelope.Envelope) (Definition, error) {
	return r.check(e, e.ValidateIncoming, r.validateIncomingPayload)
}

func (r *Registry) check(e envelope.Envelope, validate func(tenantRequired bool) error, payload func(string, []byte) error) (Definition, error) {
	d, ok := r.defs[e.Type]
	if !ok {
		return Definition{}, fmt.Errorf("%w: %s", ErrUnknownType, e.Type)
	}
	if err := validate(d.TenantRequired()); err != nil {
		return d, err
	}
	if d.Scope == scopeGlobal && e.TenantID != "" {
		return d, &envelope.FieldError{Field: "tenantId", Err: envelope.ErrInvalidField, Why: e.Type + " is GLOBAL and must not carry a tenant"}
	}
	if err := payload(e.Type, e.Payload); err != nil {
		return d, err
	}
	return d, nil
}
