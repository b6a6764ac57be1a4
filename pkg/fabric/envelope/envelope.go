package envelope

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
)

// DefaultMaxSize is the largest encoded envelope Decode accepts unless told
// otherwise. Binaries never travel on the broker, so 1 MiB is generous.
const DefaultMaxSize = 1 << 20

// DefaultMaxDepth is the reaction depth (ancestors in the causation chain)
// above which a message is refused before its handler runs.
const DefaultMaxDepth = 16

// Envelope is the platform's message envelope (docs/architecture.md).
type Envelope struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	Version        string    `json:"version"`
	OccurredAt     time.Time `json:"occurredAt"`
	TenantID       string    `json:"tenantId,omitempty"`
	CorrelationID  string    `json:"correlationId"`
	CausationID    string    `json:"causationId,omitempty"`
	CausationChain []Ref     `json:"causationChain,omitempty"`
	Producer       string    `json:"producer"`
	// Actor is who acted (seed 004 §6): USER (a person, by the subject of
	// their token), SYSTEM (a service acting on its own, by its name) or
	// AGENT (a model's decision, by the subscription that asked it).
	// Optional under the compatibility rules: a reader older than the
	// field keeps it as an extension. The outbox sets it when the
	// producer did not (ActorFrom the context, else SYSTEM).
	Actor *Ref `json:"actor,omitempty"`
	// Entity is the business object the event is about (a request, a
	// document), by type and id. The outbox sets it from the item's
	// aggregate when the producer did not.
	Entity        *Ref            `json:"entity,omitempty"`
	SchemaVersion string          `json:"schemaVersion"`
	Payload       json.RawMessage `json:"payload"`
	// Extensions holds top-level fields this build does not know, exactly
	// as received. Producers may add envelope metadata
	// without a new version, so a reader keeps it and Encode writes it
	// back: a forwarded, replayed or archived message loses nothing.
	Extensions map[string]json.RawMessage `json:"-"`
}

// Ref names something by type and id: an ancestor in a causation chain
// (oldest first), the actor, the entity.
type Ref struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// The actor types (Envelope.Actor).
const (
	actorUser   = "USER"
	actorSystem = "SYSTEM"
	actorAgent  = "AGENT"
)

// maxRefID bounds an actor's or entity's id: it is copied into stores and
// headers downstream.
const maxRefID = 200

// actorKey carries the actor of the work a context belongs to.
type actorKey struct{}

// WithActor returns ctx carrying actor, the one who acts in the work ctx
// belongs to: the HTTP edge sets the token's subject as a USER
// (Ref{Type: "USER", ID: subject}), an agent step an AGENT. Envelopes
// enqueued under ctx get it unless their producer set one
// (outbox.Enqueue); without one they are the producing service's SYSTEM.
func WithActor(ctx context.Context, actor Ref) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor WithActor put in ctx.
func ActorFrom(ctx context.Context) (Ref, bool) {
	a, ok := ctx.Value(actorKey{}).(Ref)
	return a, ok
}

// Errors returned by Decode, Validate and CheckCausation. Callers test them
// with errors.Is; the consumer maps them to dead-letter reasons.
var (
	ErrMalformed      = errors.New("malformed envelope")
	ErrMissingField   = errors.New("missing required field")
	ErrInvalidField   = errors.New("invalid field")
	ErrReactionDepth  = errors.New("REACTION_DEPTH_EXCEEDED")
	ErrCausationCycle = errors.New("CAUSATION_CYCLE")
)

// errTooLarge is an oversize document. No caller acts on it apart from
// any other refusal (the consumer dead-letters both as an invalid
// envelope), so it is not exported; its message says what was wrong.
var errTooLarge = errors.New("envelope too large")

// FieldError is a missing or invalid envelope field. It wraps
// ErrMissingField or ErrInvalidField; callers that act on which field it
// was (a missing tenant is dead-lettered as TENANT_MISSING) take it with
// errors.As rather than reading the message.
type FieldError struct {
	Field string // the JSON name, e.g. "tenantId"
	Err   error  // ErrMissingField or ErrInvalidField
	Why   string // what is wrong with an invalid field
}

func (e *FieldError) Error() string {
	if e.Why == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Field)
	}
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Field, e.Why)
}

func (e *FieldError) Unwrap() error { return e.Err }

// typePattern is `<domain>.<name>[.<name>…].v<N>`: lowercase dotted words,
// hyphens allowed inside words, and a mandatory version suffix.
var typePattern = regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+\.v[1-9][0-9]*$`)

// tenantPattern keeps tenant ids safe to use in object keys, partition names
// and broker headers.
var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// VersionOf returns the version number encoded in a type name
// ("request.submitted.v1" → "1"), or "" when the name has none.
func VersionOf(typ string) string {
	i := strings.LastIndex(typ, ".v")
	if i < 0 {
		return ""
	}
	return typ[i+2:]
}

// ValidType reports whether typ is a well-formed versioned type name.
func ValidType(typ string) bool { return typePattern.MatchString(typ) }

// ValidTenant reports whether id is an acceptable tenant identifier.
func ValidTenant(id string) bool { return tenantPattern.MatchString(id) }

// New returns a root envelope: a fresh UUIDv7 id that is also its
// correlation id, the current UTC time, and payload marshalled to JSON.
func New(typ, tenantID, producer string, payload any) (Envelope, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Envelope{}, fmt.Errorf("new envelope id: %w", err)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return Envelope{}, fmt.Errorf("marshal %s payload: %w", typ, err)
	}
	v := VersionOf(typ)
	return Envelope{
		ID:            id.String(),
		Type:          typ,
		Version:       v,
		OccurredAt:    time.Now().UTC().Truncate(time.Millisecond),
		TenantID:      tenantID,
		CorrelationID: id.String(),
		Producer:      producer,
		SchemaVersion: v,
		Payload:       raw,
	}, nil
}

// Derive returns a child of parent: a new id, the parent's tenant and
// correlation id, causationId set to the parent's id, and the parent appended
// to the causation chain. It is how a handler emits a reaction.
func Derive(parent Envelope, typ, producer string, payload any) (Envelope, error) {
	child, err := New(typ, parent.TenantID, producer, payload)
	if err != nil {
		return Envelope{}, err
	}
	child.CorrelationID = parent.CorrelationID
	child.CausationID = parent.ID
	chain := make([]Ref, 0, len(parent.CausationChain)+1)
	chain = append(chain, parent.CausationChain...)
	child.CausationChain = append(chain, Ref{Type: parent.Type, ID: parent.ID})
	return child, nil
}

// Alongside returns the same fact as e in another version of its contract,
// for a version migration (docs/contract-evolution.md): during a transition the
// producer publishes v1 and v2 side by side. The sibling has its own id
// (each version is a message of its own, deduplicated on its own), and
// shares e's tenant, time, correlation and causation, so both trace back
// to the same cause. typ must be another version of e's type.
func Alongside(e Envelope, typ string, payload any) (Envelope, error) {
	if !ValidType(typ) || base(typ) != base(e.Type) || typ == e.Type {
		return Envelope{}, fmt.Errorf("alongside %s: %s is not another version of it", e.Type, typ)
	}
	s, err := New(typ, e.TenantID, e.Producer, payload)
	if err != nil {
		return Envelope{}, err
	}
	s.OccurredAt = e.OccurredAt
	s.CorrelationID = e.CorrelationID
	s.CausationID = e.CausationID
	s.CausationChain = append([]Ref(nil), e.CausationChain...)
	s.Actor, s.Entity = e.Actor, e.Entity
	return s, nil
}

// base is a type name without its version: "request.submitted.v1" →
// "request.submitted".
func base(typ string) string {
	if i := strings.LastIndex(typ, ".v"); i >= 0 {
		return typ[:i]
	}
	return typ
}

// Decode parses one JSON object of at most maxSize bytes (DefaultMaxSize
// when ≤ 0). It is a tolerant reader: top-level fields it does not know are
// kept in Extensions rather than refused. It is strict about the document
// itself: a known field of the wrong JSON type, a field named twice (two
// parsers could disagree on which one counts), trailing data and oversize
// documents are ErrMalformed or too large. What it keeps is bounded: a
// document nested deeper than maxNesting, or with more than maxExtensions
// unknown fields, is ErrMalformed, so a consumer never stores (nor hands a
// parser) a value built to exhaust it. It does not validate; call Validate
// or ValidateIncoming.
func Decode(data []byte, maxSize int) (Envelope, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if len(data) > maxSize {
		return Envelope{}, fmt.Errorf("%w: %d bytes, limit %d", errTooLarge, len(data), maxSize)
	}
	if n := nesting(data); n > maxNesting {
		return Envelope{}, fmt.Errorf("%w: nested %d deep, limit %d", ErrMalformed, n, maxNesting)
	}
	e, err := decode(data)
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return e, nil
}

// decode reads the envelope with a streaming tokenizer that refuses a
// member named twice and invalid UTF-8 itself. The known string fields are
// read as tokens; the structured ones and the extensions as raw values,
// copied, since the tokenizer's values alias its buffer.
func decode(data []byte) (Envelope, error) {
	var e Envelope
	dec := jsontext.NewDecoder(bytes.NewBuffer(data))
	if tok, err := dec.ReadToken(); err != nil {
		return e, err
	} else if tok.Kind() != '{' {
		return e, errors.New("not a JSON object")
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return e, err
		}
		key := tok.String() // inside an object the tokenizer only yields string names here
		if err := decodeField(dec, &e, key); err != nil {
			return e, fmt.Errorf("field %s: %w", key, err)
		}
	}
	if _, err := dec.ReadToken(); err != nil { // the closing brace
		return e, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return e, errors.New("trailing data after envelope")
	}
	return e, nil
}

func decodeField(dec *jsontext.Decoder, e *Envelope, key string) error {
	switch key {
	case "id":
		return readString(dec, &e.ID)
	case "type":
		return readString(dec, &e.Type)
	case "version":
		return readString(dec, &e.Version)
	case "tenantId":
		return readString(dec, &e.TenantID)
	case "correlationId":
		return readString(dec, &e.CorrelationID)
	case "causationId":
		return readString(dec, &e.CausationID)
	case "producer":
		return readString(dec, &e.Producer)
	case "schemaVersion":
		return readString(dec, &e.SchemaVersion)
	case "occurredAt":
		return readTime(dec, &e.OccurredAt)
	case "causationChain":
		return readChain(dec, &e.CausationChain)
	case "actor":
		return readRefPtr(dec, &e.Actor)
	case "entity":
		return readRefPtr(dec, &e.Entity)
	case "payload":
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		e.Payload = bytes.Clone(v)
		return nil
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if e.Extensions == nil {
		e.Extensions = make(map[string]json.RawMessage, 2)
	}
	if len(e.Extensions) == maxExtensions {
		return fmt.Errorf("more than %d fields the envelope does not define", maxExtensions)
	}
	e.Extensions[key] = bytes.Clone(v)
	return nil
}

// readString reads a string into s; null leaves s as it is, as
// encoding/json does.
func readString(dec *jsontext.Decoder, s *string) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case '"':
		*s = tok.String()
	case 'n':
	default:
		return fmt.Errorf("want a string, got %s", tok.Kind())
	}
	return nil
}

// readTime reads an RFC 3339 string into t, by the rules of
// time.Time's own JSON decoding; null leaves t as it is.
func readTime(dec *jsontext.Decoder, t *time.Time) error {
	var s string
	if dec.PeekKind() == 'n' {
		return readString(dec, &s)
	}
	if err := readString(dec, &s); err != nil {
		return err
	}
	return t.UnmarshalText([]byte(s))
}

// readChain reads an array of references; null leaves chain nil.
func readChain(dec *jsontext.Decoder, chain *[]Ref) error {
	if ok, err := opening(dec, '[', "an array"); !ok {
		return err
	}
	for dec.PeekKind() != ']' {
		var r Ref
		if err := readRef(dec, &r); err != nil {
			return err
		}
		*chain = append(*chain, r)
	}
	_, err := dec.ReadToken()
	return err
}

// opening reads the token that opens a container of kind ('[' or '{'). It
// reports false for null (no container: nothing more to read) and for an
// error, which is any other token.
func opening(dec *jsontext.Decoder, kind jsontext.Kind, what string) (bool, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return false, err
	}
	switch tok.Kind() {
	case kind:
		return true, nil
	case 'n':
		return false, nil
	}
	return false, fmt.Errorf("want %s, got %s", what, tok.Kind())
}

// readRefPtr reads a reference into a new Ref; null leaves ref nil.
func readRefPtr(dec *jsontext.Decoder, ref **Ref) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	r := new(Ref)
	if err := readRef(dec, r); err != nil {
		return err
	}
	*ref = r
	return nil
}

// readRef reads {"type": …, "id": …} into r. As encoding/json would, it
// matches the two names without regard to case and skips members it does
// not know; null leaves r as it is.
func readRef(dec *jsontext.Decoder, r *Ref) error {
	if ok, err := opening(dec, '{', "an object"); !ok {
		return err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		switch name := tok.String(); {
		case strings.EqualFold(name, "type"):
			err = readString(dec, &r.Type)
		case strings.EqualFold(name, "id"):
			err = readString(dec, &r.ID)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// knownField reports whether name is a field of the envelope itself, which
// an extension must not shadow.
func knownField(name string) bool {
	switch name {
	case "id", "type", "version", "occurredAt", "tenantId", "correlationId", "causationId",
		"causationChain", "producer", "actor", "entity", "schemaVersion", "payload":
		return true
	}
	return false
}

// MarshalJSON encodes e with Encode, extensions included.
func (e Envelope) MarshalJSON() ([]byte, error) { return e.Encode() }

// UnmarshalJSON decodes data as Decode does, without a size limit (the
// caller already holds the bytes).
func (e *Envelope) UnmarshalJSON(data []byte) error {
	d, err := decode(data)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	*e = d
	return nil
}

// Validate checks e as a producer must write it: required fields and their
// formats, and an id that is a UUIDv7 (the fabric's own ids sort by time).
// tenantRequired is false only for types registered with GLOBAL scope.
func (e Envelope) Validate(tenantRequired bool) error { return e.validate(tenantRequired, true) }

// ValidateIncoming checks e as a consumer reads it. It differs from Validate
// only where the contract allows other producers latitude: the id may be any
// RFC 9562 UUID (a producer in another language may emit v4).
func (e Envelope) ValidateIncoming(tenantRequired bool) error {
	return e.validate(tenantRequired, false)
}

func (e Envelope) validate(tenantRequired, ownID bool) error {
	missing := func(name string) error { return &FieldError{Field: name, Err: ErrMissingField} }
	invalid := func(name, why string) error { return &FieldError{Field: name, Err: ErrInvalidField, Why: why} }
	switch {
	case e.ID == "":
		return missing("id")
	case e.Type == "":
		return missing("type")
	case e.Version == "":
		return missing("version")
	case e.OccurredAt.IsZero():
		return missing("occurredAt")
	case e.CorrelationID == "":
		return missing("correlationId")
	case e.Producer == "":
		return missing("producer")
	case e.SchemaVersion == "":
		return missing("schemaVersion")
	case len(e.Payload) == 0 || string(e.Payload) == "null":
		return missing("payload")
	}
	if err := checkID(e.ID, ownID); err != nil {
		return invalid("id", err.Error())
	}
	if !ValidType(e.Type) {
		return invalid("type", fmt.Sprintf("%q is not <domain>.<name>.v<N>", e.Type))
	}
	v := VersionOf(e.Type)
	if e.Version != v {
		return invalid("version", fmt.Sprintf("%q does not match type suffix v%s", e.Version, v))
	}
	if !validSchemaVersion(e.Type, e.SchemaVersion) {
		return invalid("schemaVersion", fmt.Sprintf("%q is not a schema version of %s (%s or %s.<revision>)", e.SchemaVersion, e.Type, v, v))
	}
	if e.OccurredAt.Location() != time.UTC {
		return invalid("occurredAt", "not UTC")
	}
	if e.TenantID == "" && tenantRequired {
		return missing("tenantId")
	}
	if e.TenantID != "" && !ValidTenant(e.TenantID) {
		return invalid("tenantId", fmt.Sprintf("%q is not a tenant id", e.TenantID))
	}
	if e.Payload[0] != '{' {
		return invalid("payload", "not a JSON object")
	}
	if e.Actor != nil {
		switch {
		case e.Actor.Type != actorUser && e.Actor.Type != actorSystem && e.Actor.Type != actorAgent:
			return invalid("actor", fmt.Sprintf("type %q is not USER, SYSTEM or AGENT", e.Actor.Type))
		case e.Actor.ID == "" || len(e.Actor.ID) > maxRefID:
			return invalid("actor", fmt.Sprintf("id must have 1 to %d characters", maxRefID))
		}
	}
	if e.Entity != nil && (e.Entity.Type == "" || len(e.Entity.Type) > maxRefID || e.Entity.ID == "" || len(e.Entity.ID) > maxRefID) {
		return invalid("entity", fmt.Sprintf("type and id must have 1 to %d characters", maxRefID))
	}
	for name := range e.Extensions {
		if knownField(name) {
			return invalid(name, "extension shadows an envelope field")
		}
	}
	return nil
}

// checkID accepts the canonical 36-character form of an RFC 9562 UUID of
// versions 1–8 with the RFC variant; v7 only when v7only. The nil and max
// UUIDs carry no identity and are refused.
func checkID(id string, v7only bool) error {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return errors.New("not a UUID in canonical form")
	}
	if u.Variant() != uuid.RFC4122 {
		return errors.New("not an RFC 9562 UUID (wrong variant)")
	}
	switch v := u.Version(); {
	case v7only && v != 7:
		return fmt.Errorf("UUID version %d, the fabric writes UUIDv7", v)
	case v < 1 || v > 8:
		return fmt.Errorf("UUID version %d is not defined by RFC 9562", v)
	}
	return nil
}

// validSchemaVersion reports whether sv names a schema of typ: its own
// version ("1" for a .v1 type) or a compatible revision of it ("1.3").
// Revisions are compatible by the catalog's rules, so a reader accepts any
// revision of its major version; another major version is another type.
// It runs on every message, so it compares strings instead of matching a
// pattern.
func validSchemaVersion(typ, sv string) bool {
	major, rev, hasRev := strings.Cut(sv, ".")
	if !digits(major, 9) || major != VersionOf(typ) {
		return false
	}
	return !hasRev || digits(rev, 9)
}

// digits reports whether s is 1 to max ASCII digits.
func digits(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CheckCausation refuses a message whose chain is deeper than maxDepth
// (DefaultMaxDepth when ≤ 0), that causes itself, names an ancestor twice, or
// whose chain does not end in its causationId. Legacy messages without a
// chain pass. It runs before any handler.
func (e Envelope) CheckCausation(maxDepth int) error {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if e.CausationID != "" && e.CausationID == e.ID {
		return fmt.Errorf("%w: %s causes itself", ErrCausationCycle, e.ID)
	}
	if len(e.CausationChain) == 0 {
		return nil
	}
	if len(e.CausationChain) > maxDepth {
		return fmt.Errorf("%w: depth %d, limit %d", ErrReactionDepth, len(e.CausationChain), maxDepth)
	}
	seen := make(map[string]bool, len(e.CausationChain)+1)
	seen[e.ID] = true
	for _, l := range e.CausationChain {
		if seen[l.ID] {
			return fmt.Errorf("%w: %s/%s appears twice", ErrCausationCycle, l.Type, l.ID)
		}
		seen[l.ID] = true
	}
	if last := e.CausationChain[len(e.CausationChain)-1]; last.ID != e.CausationID {
		return fmt.Errorf("%w: causationChain ends in %s, causationId is %s", ErrInvalidField, last.ID, e.CausationID)
	}
	return nil
}

// Bounds on what the tolerant reader keeps. An envelope nests a few
// levels (the payload's own, inside "payload") and a compatible producer
// adds a field or two; these leave room for both and none for a document
// built to exhaust a parser or the store.
const (
	maxNesting    = 64
	maxExtensions = 32
)

// nesting returns how deep data's arrays and objects nest, outside its
// strings; malformed input is the decoder's to refuse.
func nesting(data []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	return deepest
}
