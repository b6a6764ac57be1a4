package subscription

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agora-platform/agora/pkg/fabric/filter"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// Agent is a subscription's agent step (seed 004: Event → Deterministic
// Resolution → Knowledge → LLM → Structured Decision → Policy →
// Workflow). It is asked only when the subscription's filter matched and
// no policy rule decided: the rules are the deterministic resolution. The
// model sees Instruction, the event fields named in Project (no other) and
// passages of the tenant's own documents, and answers a JSON object valid
// against DecisionSchema, whose "outcome" the policy then bounds: the
// policy's default is the most an agent's decision can reach, and only
// ALLOW acts.
type Agent struct {
	// Instruction is the question put to the model (and to the knowledge
	// search), 1 to 2000 characters.
	Instruction string `json:"instruction"`
	// Project lists the event fields sent: "event.type", "event.source",
	// "event.occurredAt" or a payload path "payload.a.b" that every event
	// type's schema has. A RESTRICTED field is refused; a sensitive one
	// (x-sensitive in the catalog) is sent masked.
	Project []string `json:"project"`
	// DecisionSchema is the JSON Schema (draft 2020-12) of the decision
	// the model must return; absent, DefaultDecisionSchema. It must
	// require "outcome", a string among AgentOutcomes.
	DecisionSchema json.RawMessage `json:"decisionSchema,omitempty"`
	// Timeout bounds the whole step, knowledge and model (a Go duration,
	// at most MaxAgentTimeout; default DefaultAgentTimeout).
	Timeout string `json:"timeout,omitempty"`
	// TopK is how many passages of the tenant's documents are retrieved
	// (1 to 20; default 5).
	TopK int `json:"topK,omitempty"`
}

// Limits and defaults of an agent step.
const (
	// The step runs inside the reactions consumer's inbox transaction:
	// its timeout is how long a transaction may stay open on it.
	DefaultAgentTimeout = 10 * time.Second
	MaxAgentTimeout     = 60 * time.Second
	DefaultAgentTopK    = 5
	maxAgentTopK        = 20
	maxInstruction      = 2000
	maxProjection       = 20
	maxDecisionSchema   = 16 << 10
)

// AgentOutcomes are the outcomes a model may propose. DENY is not one: a
// model that doubts hands the event to a person, it never closes it.
var AgentOutcomes = []Outcome{Allow, RequireApproval, RequireHumanReview}

// DefaultDecisionSchema is the decision of a step that embeds none: an
// outcome and the reason for it.
var DefaultDecisionSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["outcome","reason"],
"properties":{"outcome":{"enum":["ALLOW","REQUIRE_APPROVAL","REQUIRE_HUMAN_REVIEW"]},"reason":{"type":"string","minLength":1,"maxLength":2000}}}`)

// EventFields are the envelope fields a projection may name.
var EventFields = []string{"type", "source", "occurredAt"}

var pathSegment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Schema returns the step's decision schema, the default when it embeds none.
func (a Agent) Schema() json.RawMessage {
	if len(bytes.TrimSpace(a.DecisionSchema)) == 0 {
		return DefaultDecisionSchema
	}
	return a.DecisionSchema
}

// Deadline is the step's timeout.
func (a Agent) Deadline() time.Duration {
	d, err := time.ParseDuration(a.Timeout)
	if err != nil || d <= 0 {
		return DefaultAgentTimeout
	}
	return d
}

// K is how many passages the step retrieves.
func (a Agent) K() int {
	if a.TopK <= 0 {
		return DefaultAgentTopK
	}
	return a.TopK
}

// check validates the step for event types types.
func (a *Agent) check(reg *registry.Registry, types []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: agent."+format, append([]any{ErrInvalid}, args...)...)
	}
	a.Instruction = strings.TrimSpace(a.Instruction)
	if a.Instruction == "" || utf8.RuneCountInString(a.Instruction) > maxInstruction {
		return bad("instruction: 1 to %d characters", maxInstruction)
	}
	if len(a.Project) == 0 || len(a.Project) > maxProjection {
		return bad("project: 1 to %d fields", maxProjection)
	}
	for i, p := range a.Project {
		if err := checkPath(reg, types, p); err != nil {
			return bad("project[%d] %q: %v", i, p, err)
		}
	}
	if a.Timeout != "" {
		d, err := time.ParseDuration(a.Timeout)
		if err != nil || d <= 0 || d > MaxAgentTimeout {
			return bad("timeout %q: want a positive Go duration up to %s", a.Timeout, MaxAgentTimeout)
		}
	}
	if a.TopK < 0 || a.TopK > maxAgentTopK {
		return bad("topK %d: want 1 to %d (0: %d)", a.TopK, maxAgentTopK, DefaultAgentTopK)
	}
	if len(a.DecisionSchema) > maxDecisionSchema {
		return bad("decisionSchema: at most %d bytes", maxDecisionSchema)
	}
	if _, err := CompileDecisionSchema(a.Schema()); err != nil {
		return bad("decisionSchema: %v", err)
	}
	return nil
}

// checkPath accepts an envelope field or a payload path every type has.
func checkPath(reg *registry.Registry, types []string, p string) error {
	segs := strings.Split(p, ".")
	if len(segs) < 2 {
		return fmt.Errorf("want event.<field> or payload.<path>")
	}
	for _, s := range segs {
		if !pathSegment.MatchString(s) {
			return fmt.Errorf("segment %q is not a field name", s)
		}
	}
	switch segs[0] {
	case "event":
		if len(segs) != 2 || !slices.Contains(EventFields, segs[1]) {
			return fmt.Errorf("event fields are %v", EventFields)
		}
		return nil
	case "payload":
		// RESTRICTED fields never reach a model (seed 004 §44-46): a step
		// that asks for one is refused now. CONFIDENTIAL ones are masked
		// when the prompt is written (agent.Project).
		for _, t := range types {
			if def, ok := reg.Lookup(t); ok && slices.Contains(def.RestrictedFields, segs[1]) {
				return fmt.Errorf("%s is RESTRICTED in %s: it is never sent to a model", segs[1], t)
			}
		}
		// The filter checker knows every type's schema: a field it does
		// not find there is refused now, not sent empty for ever.
		_, err := filter.Compile(reg, types, "has("+p+")")
		return err
	}
	return fmt.Errorf("want event.<field> or payload.<path>")
}

// CompileDecisionSchema compiles a decision schema (draft 2020-12, formats
// asserted, no reference outside the document: the compiler has no
// loader) and checks that it requires a string "outcome" among
// AgentOutcomes.
func CompileDecisionSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON Schema object")
	}
	required, _ := obj["required"].([]any)
	if obj["type"] != "object" || !slices.Contains(required, any("outcome")) {
		return nil, fmt.Errorf(`want "type": "object" with "outcome" required`)
	}
	props, _ := obj["properties"].(map[string]any)
	outcome, _ := props["outcome"].(map[string]any)
	enum, _ := outcome["enum"].([]any)
	if len(enum) == 0 {
		return nil, fmt.Errorf("properties.outcome: want an enum of some of %v", AgentOutcomes)
	}
	for _, e := range enum {
		s, _ := e.(string)
		if !slices.Contains(AgentOutcomes, Outcome(s)) {
			return nil, fmt.Errorf("properties.outcome: %v is not one of %v", e, AgentOutcomes)
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("mem:///decision.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("mem:///decision.json")
}

// strictness orders outcomes from the one that lets most happen.
var strictness = []Outcome{Allow, RequireApproval, RequireHumanReview, Deny}

// Stricter returns the stricter of a and b: how the policy bounds an
// agent's proposal.
func Stricter(a, b Outcome) Outcome {
	if slices.Index(strictness, a) >= slices.Index(strictness, b) {
		return a
	}
	return b
}

// AgentRecord is what the agent step of a decision did, kept for the
// person who resolves the review and for "why did the platform do this?".
type AgentRecord struct {
	// Model is the model asked ("" when none is configured).
	Model string `json:"model"`
	// PromptDigest is "sha256:" and the hex digest of the request body
	// sent to the model ("" when nothing was sent).
	PromptDigest string `json:"promptDigest"`
	// Proposal is the model's decision, valid against the schema; absent
	// when there was none (Failure says why).
	Proposal json.RawMessage `json:"proposal,omitempty"`
	// Passages are the tenant's document chunks the model was given.
	Passages []Passage `json:"passages"`
	// KnowledgeVersion identifies the knowledge the passages came from.
	KnowledgeVersion string `json:"knowledgeVersion"`
	// Release is the release the workflow service ran when the step was
	// taken (RELEASE_ID, from the step's fabric.ExecutionOf).
	Release string `json:"release"`
	// Failure is why the agent's answer was not used: no model, a
	// timeout, invalid output, knowledge unavailable.
	Failure string `json:"failure,omitempty"`
	// RequestID is the request a mass reaction's step was about, and
	// Result the outcome the policy made of it for that request (a
	// per-event step's outcome is its decision's).
	RequestID string  `json:"requestId,omitempty"`
	Result    Outcome `json:"outcome,omitempty"`
}

// Passage is a cited chunk of a tenant's document.
type Passage struct {
	DocumentID string  `json:"documentId"`
	ChunkID    string  `json:"chunkId"`
	Score      float64 `json:"score"`
}

// Proposed returns the outcome the model proposed, if its proposal has one
// a model may propose.
func (r AgentRecord) Proposed() (Outcome, bool) {
	var p struct {
		Outcome Outcome `json:"outcome"`
	}
	if len(r.Proposal) == 0 || json.Unmarshal(r.Proposal, &p) != nil || !slices.Contains(AgentOutcomes, p.Outcome) {
		return "", false
	}
	return p.Outcome, true
}

// Outcome is what the step asks of the policy: the proposal's outcome, or
// REQUIRE_HUMAN_REVIEW when the step failed (no model, a timeout, invalid
// output): a failure never acts.
func (r AgentRecord) Outcome() Outcome {
	if o, ok := r.Proposed(); ok && r.Failure == "" {
		return o
	}
	return RequireHumanReview
}

// Note is the line a reviewer reads first: what the agent proposed and
// why, or why it could not, and the passages it cited.
func (r AgentRecord) Note() string {
	var b strings.Builder
	if r.Failure != "" {
		fmt.Fprintf(&b, "the agent did not decide: %s", r.Failure)
	} else {
		o, _ := r.Proposed()
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(r.Proposal, &p)
		fmt.Fprintf(&b, "the agent (model %s) proposed %s", r.Model, o)
		if p.Reason != "" {
			fmt.Fprintf(&b, ": %s", p.Reason)
		}
	}
	if len(r.Passages) > 0 {
		b.WriteString("; cited passages:")
		for _, p := range r.Passages {
			fmt.Fprintf(&b, " %s#%s", p.DocumentID, p.ChunkID)
		}
	}
	return b.String()
}

// AffectedRequest is one open request a mass reaction affects, as its
// agent step sees it: which request, of which service and workflow, where
// its process stands and since when; nothing of the citizen or the form.
type AffectedRequest struct {
	ID           string    `json:"requestId"`
	ServiceID    string    `json:"serviceId"`
	DefinitionID string    `json:"definitionId"`
	Step         string    `json:"step"`
	StartedAt    time.Time `json:"startedAt"`
}
