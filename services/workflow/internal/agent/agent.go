// Package agent runs a subscription's agent step: the tenant's knowledge
// (passages of its own documents, through the AI builder), then a model
// behind an OpenAI-compatible chat API asked for a structured decision,
// validated against the subscription's JSON Schema. The step only
// proposes: the policy bounds the proposal and only ALLOW acts (package
// postgres, React). Whatever goes wrong (no model, a timeout, knowledge
// unavailable, output that is not valid) is a failure that a person
// resolves: REQUIRE_HUMAN_REVIEW with the reason, never an action.
package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/text"
	"github.com/agora-platform/agora/services/workflow/internal/knowledge"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// Knowledge finds passages of one tenant's documents for a question
// (knowledge.Client).
type Knowledge interface {
	Ask(ctx context.Context, tenantID, question string, topK int) (knowledge.Answer, error)
}

// Model completes a chat: body is the request body of an OpenAI-compatible
// POST /chat/completions, sent as it is (so its digest is the digest of
// what was sent); the answer is the first choice's message content
// (openai.Client).
type Model interface {
	Complete(ctx context.Context, body []byte) (string, error)
}

// Decider runs agent steps. Model nil: no model is configured, and every
// step becomes REQUIRE_HUMAN_REVIEW (the default platform has none).
type Decider struct {
	Knowledge Knowledge
	Model     Model
	// ModelName is the model asked for (AGENT_MODEL).
	ModelName string
	// Catalog says which payload fields are sensitive: masked or never
	// sent (Project).
	Catalog *registry.Registry
	// Tracer records each step as a span, a child of the event's
	// consumer span, with the knowledge search and the model call as its
	// children; nil records nothing.
	Tracer trace.Tracer
}

// maxQuestion is the AI builder's bound on a question.
const maxQuestion = 2000

// Decide runs c's agent step on env and returns what it did. It never
// fails: a failure is recorded in the record's Failure, and its outcome
// (AgentRecord.Outcome) is then REQUIRE_HUMAN_REVIEW.
func (d *Decider) Decide(ctx context.Context, c *subscription.Compiled, env envelope.Envelope) subscription.AgentRecord {
	ctx, span := d.start(ctx, "agent step", attribute.String("agora.subscription.id", c.ID),
		attribute.Int("agora.subscription.version", c.Version.Version), attribute.String("messaging.message.id", env.ID))
	defer span.End()
	rec := d.decide(ctx, c, env)
	d.endStep(span, rec)
	return rec
}

// endStep records what a step did on its span.
func (d *Decider) endStep(span trace.Span, rec subscription.AgentRecord) {
	span.SetAttributes(attribute.String("agora.agent.outcome", string(rec.Outcome())), attribute.String("agora.agent.model", rec.Model),
		attribute.String("agora.agent.prompt_digest", rec.PromptDigest), attribute.Int("agora.agent.passages", len(rec.Passages)),
		attribute.String("agora.agent.knowledge_version", rec.KnowledgeVersion), attribute.String("agora.release", rec.Release))
	if rec.Failure != "" {
		// Not an error of the service: the step handed the event to a
		// person, as it must whenever it cannot decide.
		span.AddEvent("agent.failure", trace.WithAttributes(attribute.String("reason", rec.Failure)))
	}
}

func (d *Decider) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	t := d.Tracer
	if t == nil {
		t = noop.NewTracerProvider().Tracer("")
	}
	return t.Start(ctx, name, trace.WithAttributes(attrs...))
}

// DecideRequest runs c's agent step about one request a mass reaction on
// an event affects (review-affected-requests): event is the event's
// projection (Projection), taken when the event was decided; nil, the
// event was not projected then. Like Decide it never fails.
func (d *Decider) DecideRequest(ctx context.Context, c *subscription.Compiled, tenantID string, event json.RawMessage, req subscription.AffectedRequest) subscription.AgentRecord {
	ctx, span := d.start(ctx, "agent step", attribute.String("agora.subscription.id", c.ID),
		attribute.Int("agora.subscription.version", c.Version.Version), attribute.String("agora.request.id", req.ID))
	defer span.End()
	rec := d.base(ctx, c)
	if rec.Failure == "" && event == nil {
		rec.Failure = "the event was not projected when it was decided: a person decides"
	}
	if rec.Failure == "" {
		rec = d.ask(ctx, c, tenantID, event, &req, rec)
	}
	d.endStep(span, rec)
	return rec
}

// Projection returns what c's agent step may send of env (Project, with
// the catalog's sensitive fields of env's type).
func (d *Decider) Projection(c *subscription.Compiled, env envelope.Envelope) (json.RawMessage, error) {
	if c.Agent == nil {
		return nil, errors.New("the subscription has no agent step")
	}
	var def registry.Definition
	ok := d.Catalog != nil
	if ok {
		def, ok = d.Catalog.Lookup(env.Type)
	}
	if !ok {
		return nil, errors.New("the event's type " + env.Type + " is not in the catalog: its sensitive fields are unknown")
	}
	projected, err := Project(c.Agent.Project, env, def)
	if err != nil {
		return nil, fmt.Errorf("the event cannot be projected: %w", err)
	}
	return projected, nil
}

// base is a step's record before it asks anything: a failure already when
// no model is configured. The release is the execution's (RELEASE_ID, the
// host's): the one the service runs when the step is taken, whether a
// consumer or the job sweep takes it.
func (d *Decider) base(ctx context.Context, c *subscription.Compiled) subscription.AgentRecord {
	rec := subscription.AgentRecord{Model: d.ModelName, Release: fabric.ExecutionOf(ctx).Release, Passages: []subscription.Passage{}}
	if d.Model == nil || c.Agent == nil || c.Decision == nil {
		rec.Model = ""
		rec.Failure = "no model is configured (AGENT_MODEL_URL, AGENT_MODEL): a person decides"
	}
	return rec
}

func (d *Decider) decide(ctx context.Context, c *subscription.Compiled, env envelope.Envelope) subscription.AgentRecord {
	rec := d.base(ctx, c)
	if rec.Failure != "" {
		return rec
	}
	projected, err := d.Projection(c, env)
	if err != nil {
		rec.Failure = err.Error()
		return rec
	}
	return d.ask(ctx, c, env.TenantID, projected, nil, rec)
}

// ask searches tenantID's knowledge and asks the model about the projected
// event (and req, for a request a mass reaction affects).
func (d *Decider) ask(ctx context.Context, c *subscription.Compiled, tenantID string, projected []byte, req *subscription.AffectedRequest, rec subscription.AgentRecord) subscription.AgentRecord {
	step := *c.Agent
	var about []byte
	if req != nil {
		var err error
		if about, err = json.Marshal(req); err != nil {
			rec.Failure = "the request cannot be written: " + err.Error()
			return rec
		}
	}
	ctx, cancel := context.WithTimeout(ctx, step.Deadline())
	defer cancel()
	timedOut := func(what string, err error) bool {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			rec.Failure = fmt.Sprintf("timeout: %s did not answer within the step's %s", what, step.Deadline())
			return true
		}
		return false
	}

	// Knowledge: the tenant's own documents, asked with the instruction
	// and the projected fields only.
	kctx, kspan := d.start(ctx, "knowledge search", attribute.Int("agora.agent.top_k", step.K()))
	question := step.Instruction + "\n" + string(projected)
	if about != nil {
		question += "\n" + string(about)
	}
	found, err := d.Knowledge.Ask(kctx, tenantID, truncate(question, maxQuestion), step.K())
	endSpan(kspan, err)
	if err != nil {
		if !timedOut("the knowledge search", err) {
			rec.Failure = "knowledge unavailable: " + err.Error()
		}
		return rec
	}
	rec.Passages, rec.KnowledgeVersion = found.Passages, found.Version

	body, err := request(d.ModelName, step, c.Agent.Schema(), projected, about, found)
	if err != nil {
		rec.Failure = "the prompt cannot be written: " + err.Error()
		return rec
	}
	sum := sha256.Sum256(body)
	rec.PromptDigest = "sha256:" + hex.EncodeToString(sum[:])
	mctx, mspan := d.start(ctx, "model call", attribute.String("gen_ai.request.model", d.ModelName))
	out, err := d.Model.Complete(mctx, body)
	endSpan(mspan, err)
	if err != nil {
		if !timedOut("the model", err) {
			rec.Failure = "the model failed: " + err.Error()
		}
		return rec
	}
	proposal, err := validate(c.Decision, out)
	if err != nil {
		rec.Failure = fmt.Sprintf("invalid output: %v; the model answered: %s", err, text.Truncate(out, 500))
		return rec
	}
	rec.Proposal = proposal
	return rec
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// validate checks the model's answer against the decision schema and the
// outcomes a model may propose, and returns it compacted.
func validate(schema *jsonschema.Schema, out string) (json.RawMessage, error) {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	if err := schema.Validate(v); err != nil {
		return nil, fmt.Errorf("not valid against the decision schema: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(out)); err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	rec := subscription.AgentRecord{Proposal: buf.Bytes()}
	if _, ok := rec.Proposed(); !ok {
		// The schema should have said so (CompileDecisionSchema checks
		// its enum), but this is what decides whether anything acts.
		return nil, fmt.Errorf("no outcome among %v", subscription.AgentOutcomes)
	}
	return buf.Bytes(), nil
}

// systemPrompt frames the model as subordinate: it proposes, the policy
// and people decide.
const systemPrompt = "You are one step of a public-service workflow platform. You propose a decision about an event; " +
	"a policy and, when in doubt, a person decide. Use only the event fields and the passages of the organisation's documents given. " +
	"Answer with one JSON object and nothing else, valid against this JSON Schema:\n"

// request writes the chat-completions request body: the instruction, the
// projected event fields (no other field of the event) and the passages.
func request(model string, step subscription.Agent, schema json.RawMessage, projected, about []byte, found knowledge.Answer) ([]byte, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		return nil, err
	}
	var user strings.Builder
	fmt.Fprintf(&user, "Instruction: %s\n\nEvent (only these fields are shared):\n%s\n\n", step.Instruction, projected)
	if about != nil {
		// A mass reaction asks about each request the event affects: the
		// decision is about this request.
		fmt.Fprintf(&user, "Open request the event affects (decide about this request):\n%s\n\n", about)
	}
	if len(found.Passages) == 0 {
		user.WriteString("The organisation's documents have nothing on this.\n")
	} else {
		fmt.Fprintf(&user, "What the organisation's documents say (numbers are passages):\n%s\n\nPassages:\n", found.Text)
		for i, p := range found.Passages {
			fmt.Fprintf(&user, "[%d] document %s, chunk %s\n", i+1, p.DocumentID, p.ChunkID)
		}
	}
	return json.Marshal(map[string]any{
		"model": model,
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt + compact.String()},
			{"role": "user", "content": user.String()},
		},
		"temperature":     0,
		"response_format": map[string]string{"type": "json_object"},
	})
}

// Masked stands for a sensitive field's value in a prompt: the model
// learns that the field is there, not what it holds.
const Masked = "[masked]"

// Project returns the JSON object of env's fields that paths name
// ("event.type", "payload.a.b"), nested as in the event; a field the
// event lacks is left out. Nothing else of the event is in it: this is
// all a model or the knowledge search learns of the event. Of def's
// payload fields, a RESTRICTED one is left out even when named (the step
// was checked when created; the catalog may have changed since) and any
// other sensitive one is replaced by Masked.
func Project(paths []string, env envelope.Envelope, def registry.Definition) ([]byte, error) {
	var payload any
	if len(env.Payload) > 0 {
		dec := json.NewDecoder(bytes.NewReader(env.Payload))
		dec.UseNumber()
		if err := dec.Decode(&payload); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
	}
	event := map[string]any{"type": env.Type, "source": env.Producer, "occurredAt": env.OccurredAt}
	out := map[string]any{}
	for _, p := range paths {
		segs := strings.Split(p, ".")
		var v any
		switch segs[0] {
		case "event":
			v = event
		case "payload":
			v = payload
		default:
			return nil, fmt.Errorf("%s: not an event or payload field", p)
		}
		if segs[0] == "payload" && slices.Contains(def.RestrictedFields, segs[1]) {
			continue
		}
		found := true
		for _, s := range segs[1:] {
			m, ok := v.(map[string]any)
			if !ok {
				found = false
				break
			}
			if v, ok = m[s]; !ok {
				found = false
				break
			}
		}
		if found && segs[0] == "payload" && slices.Contains(def.SensitiveFields, segs[1]) {
			v = Masked
		}
		if found {
			put(out, segs, v)
		}
	}
	return json.Marshal(out)
}

// put sets v at path in m, creating the objects on the way.
func put(m map[string]any, path []string, v any) {
	for _, s := range path[:len(path)-1] {
		next, ok := m[s].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[s] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
