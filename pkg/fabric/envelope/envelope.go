// Package envelope defines the JSON envelope every platform message travels
// in: identity (UUIDv7), type and version, tenant, correlation and causation.
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
)

// DefaultMaxSize is the largest encoded envelope Decode accepts unless told
// otherwise. Binaries never travel on the broker, so 1 MiB is generous.
const DefaultMaxSize = 1 << 20

// DefaultMaxDepth is the reaction depth (ancestors in the causation chain)
// above which a message is refused before its handler runs.
const DefaultMaxDepth = 16

// Envelope is the platform's message envelope (ARCHITECTURE.md §3).
type Envelope struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Version        string          `json:"version"`
	OccurredAt     time.Time       `json:"occurredAt"`
	TenantID       string          `json:"tenantId,omitempty"`
	CorrelationID  string          `json:"correlationId"`
	CausationID    string          `json:"causationId,omitempty"`
	CausationChain []Link          `json:"causationChain,omitempty"`
	Producer       string          `json:"producer"`
	SchemaVersion  string          `json:"schemaVersion"`
	Payload        json.RawMessage `json:"payload"`
}

// Link is one ancestor in a causation chain, oldest first.
type Link struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Errors returned by Decode, Validate and CheckCausation. Callers test them
// with errors.Is; the consumer maps them to dead-letter reasons.
var (
	ErrTooLarge       = errors.New("envelope too large")
	ErrMalformed      = errors.New("malformed envelope")
	ErrMissingField   = errors.New("missing required field")
	ErrInvalidField   = errors.New("invalid field")
	ErrReactionDepth  = errors.New("REACTION_DEPTH_EXCEEDED")
	ErrCausationCycle = errors.New("CAUSATION_CYCLE")
)

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
	chain := make([]Link, 0, len(parent.CausationChain)+1)
	chain = append(chain, parent.CausationChain...)
	child.CausationChain = append(chain, Link{Type: parent.Type, ID: parent.ID})
	return child, nil
}

// Decode parses data strictly: unknown fields, trailing data and documents
// larger than maxSize (DefaultMaxSize when ≤ 0) are errors. It does not
// validate; call Validate.
func Decode(data []byte, maxSize int) (Envelope, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if len(data) > maxSize {
		return Envelope{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), maxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var e Envelope
	if err := dec.Decode(&e); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Envelope{}, fmt.Errorf("%w: trailing data after envelope", ErrMalformed)
	}
	return e, nil
}

// Validate checks the required fields and their formats. tenantRequired is
// false only for types registered with GLOBAL scope.
func (e Envelope) Validate(tenantRequired bool) error {
	missing := func(name string) error { return fmt.Errorf("%w: %s", ErrMissingField, name) }
	invalid := func(name, why string) error { return fmt.Errorf("%w: %s: %s", ErrInvalidField, name, why) }
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
	if id, err := uuid.Parse(e.ID); err != nil || id.Version() != 7 || len(e.ID) != 36 {
		return invalid("id", "not a UUIDv7")
	}
	if !ValidType(e.Type) {
		return invalid("type", fmt.Sprintf("%q is not <domain>.<name>.v<N>", e.Type))
	}
	if v := VersionOf(e.Type); e.Version != v {
		return invalid("version", fmt.Sprintf("%q does not match type suffix v%s", e.Version, v))
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
	return nil
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
