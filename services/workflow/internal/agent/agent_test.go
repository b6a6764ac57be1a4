package agent

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/workflow/internal/knowledge"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

type fakeKnowledge struct {
	err       error
	questions []string
}

func (k *fakeKnowledge) Ask(ctx context.Context, tenantID, question string, topK int) (knowledge.Answer, error) {
	k.questions = append(k.questions, question)
	if k.err != nil {
		return knowledge.Answer{}, k.err
	}
	return knowledge.Answer{Text: "RG or CNH [1]", Version: "chunks:sha256:x",
		Passages: []subscription.Passage{{DocumentID: "d1", ChunkID: "c1", Score: 0.9}}}, nil
}

// fakeModel answers answer, or fails with err, or (block) waits for its
// context to end.
type fakeModel struct {
	answer string
	err    error
	block  bool
	bodies [][]byte
}

func (m *fakeModel) Complete(ctx context.Context, body []byte) (string, error) {
	m.bodies = append(m.bodies, body)
	if m.block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return m.answer, m.err
}

func TestDecide(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	step := subscription.Agent{Instruction: "Is it an identity document?", Project: []string{"payload.kind", "event.type"}, Timeout: "50ms"}
	c, err := subscription.Compile(nil, subscription.Version{Spec: subscription.Spec{Agent: &step}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.New("document.validated.v1", "org-a", "document-worker", map[string]any{
		"documentId": "SECRET-DOCUMENT", "kind": "identity", "checks": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		model     *fakeModel // nil: no model configured
		knowledge error
		want      subscription.Outcome
		failure   string
	}{
		{"allow", &fakeModel{answer: `{"outcome":"ALLOW","reason":"an RG"}`}, nil, subscription.Allow, ""},
		{"approval", &fakeModel{answer: ` {"outcome":"REQUIRE_APPROVAL","reason":"unsure"} `}, nil, subscription.RequireApproval, ""},
		{"no model", nil, nil, subscription.RequireHumanReview, "no model is configured"},
		{"not JSON", &fakeModel{answer: `Sure! {"outcome":"ALLOW"}`}, nil, subscription.RequireHumanReview, "invalid output"},
		{"against the schema", &fakeModel{answer: `{"outcome":"ALLOW"}`}, nil, subscription.RequireHumanReview, "invalid output"},
		{"an outcome a model may not give", &fakeModel{answer: `{"outcome":"DENY","reason":"x"}`}, nil, subscription.RequireHumanReview, "invalid output"},
		{"model fails", &fakeModel{err: errors.New("503")}, nil, subscription.RequireHumanReview, "the model failed"},
		{"model too slow", &fakeModel{block: true}, nil, subscription.RequireHumanReview, "timeout"},
		{"knowledge unavailable", &fakeModel{answer: `{"outcome":"ALLOW","reason":"x"}`}, errors.New("503"), subscription.RequireHumanReview, "knowledge unavailable"},
		{"a type the catalog lacks", &fakeModel{answer: `{"outcome":"ALLOW","reason":"x"}`}, nil, subscription.RequireHumanReview, "not in the catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &fakeKnowledge{err: tc.knowledge}
			if tc.name == "a type the catalog lacks" {
				env.Type = "document.unknown.v1"
				defer func() { env.Type = "document.validated.v1" }()
			}
			d := &Decider{Knowledge: k, ModelName: "m", Catalog: reg}
			if tc.model != nil {
				d.Model = tc.model
			}
			rec := d.Decide(context.Background(), c, env)
			if got := rec.Outcome(); got != tc.want || !strings.Contains(rec.Failure, tc.failure) || (tc.failure == "") != (rec.Failure == "") {
				t.Fatalf("outcome %s, failure %q; want %s, %q", got, rec.Failure, tc.want, tc.failure)
			}
			if tc.model == nil || tc.knowledge != nil {
				return
			}
			if env.Type != "document.validated.v1" {
				if len(tc.model.bodies)+len(k.questions) != 0 {
					t.Errorf("an event whose sensitive fields are unknown was sent: %d prompts, %d questions", len(tc.model.bodies), len(k.questions))
				}
				return
			}
			if len(tc.model.bodies) != 1 || !strings.HasPrefix(rec.PromptDigest, "sha256:") || len(rec.Passages) != 1 || rec.KnowledgeVersion == "" {
				t.Errorf("record %+v", rec)
			}
			for _, sent := range append([]string{string(tc.model.bodies[0])}, k.questions...) {
				if strings.Contains(sent, "SECRET-DOCUMENT") || strings.Contains(sent, "org-a") {
					t.Errorf("sent outside the projection: %s", sent)
				}
			}
		})
	}
}

func TestProject(t *testing.T) {
	env, err := envelope.New("workflow.stuck.v1", "org-a", "workflow-service", map[string]any{
		"step": "triage", "nested": map[string]any{"a": 1, "b": "secret"}, "other": "secret"})
	if err != nil {
		t.Fatal(err)
	}
	// "nested" is sensitive (masked whole), "other" RESTRICTED (never sent).
	def := registry.Definition{SensitiveFields: []string{"nested", "other"}, RestrictedFields: []string{"other"}}
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"payload.step"}, `{"payload":{"step":"triage"}}`},
		{[]string{"payload.nested.a", "event.type"}, `{"event":{"type":"workflow.stuck.v1"},"payload":{"nested":{"a":"[masked]"}}}`},
		{[]string{"payload.nested"}, `{"payload":{"nested":"[masked]"}}`},
		{[]string{"payload.other", "payload.step"}, `{"payload":{"step":"triage"}}`},
		{[]string{"payload.missing", "payload.step.deeper"}, `{}`},
		{[]string{"event.source"}, `{"event":{"source":"workflow-service"}}`},
	} {
		got, err := Project(tc.paths, env, def)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal([]byte(tc.want), &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("Project(%v) = %s, want %s", tc.paths, got, tc.want)
		}
		if strings.Contains(string(got), "secret") {
			t.Errorf("Project(%v) = %s: a sensitive value reached the prompt", tc.paths, got)
		}
	}
}

// TestDecideRecordsSpans: a step is a span under the event's (here, a
// parent the test starts), with the knowledge search and the model call
// as its children and the outcome among its attributes.
func TestDecideRecordsSpans(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	step := subscription.Agent{Instruction: "Is it an identity document?", Project: []string{"payload.kind"}}
	c, err := subscription.Compile(nil, subscription.Version{ID: "sub-1", Version: 2, Spec: subscription.Spec{Agent: &step}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := envelope.New("document.validated.v1", "org-a", "document-worker", map[string]any{"documentId": "d", "kind": "identity", "checks": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "process document.validated.v1")
	d := &Decider{Knowledge: &fakeKnowledge{}, Model: &fakeModel{answer: `{"outcome":"ALLOW","reason":"an RG"}`},
		ModelName: "m", Catalog: reg, Tracer: tp.Tracer("agent")}
	if got := d.Decide(ctx, c, env).Outcome(); got != subscription.Allow {
		t.Fatalf("outcome %s", got)
	}
	parent.End()

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	stepSpan, ok := spans["agent step"]
	if !ok {
		t.Fatalf("no agent step span among %v", slices.Collect(maps.Keys(spans)))
	}
	if stepSpan.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the agent step's parent is %s, want the event's span", stepSpan.Parent().SpanID())
	}
	for _, child := range []string{"knowledge search", "model call"} {
		if s, ok := spans[child]; !ok || s.Parent().SpanID() != stepSpan.SpanContext().SpanID() {
			t.Errorf("%s: not a child of the agent step (%v)", child, ok)
		}
	}
	attrs := map[string]string{}
	for _, a := range stepSpan.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["agora.agent.outcome"] != "ALLOW" || attrs["agora.subscription.id"] != "sub-1" || !strings.HasPrefix(attrs["agora.agent.prompt_digest"], "sha256:") {
		t.Errorf("agent step attributes = %v", attrs)
	}
}

// TestDecideRequest: a mass reaction's step about one request sends the
// event's projection and the request (to the knowledge search and the
// model) and nothing else; without a projection, or a model, or with
// output that is not valid, it fails, and a failure is a human review.
func TestDecideRequest(t *testing.T) {
	step := subscription.Agent{Instruction: "Does the new requirement apply?", Project: []string{"payload.serviceId"}, Timeout: "1s"}
	c, err := subscription.Compile(nil, subscription.Version{Spec: subscription.Spec{Agent: &step}})
	if err != nil {
		t.Fatal(err)
	}
	req := subscription.AffectedRequest{ID: "0f9a1c52-6d1c-4b0e-9f3e-5a2b1c0d9e11", ServiceID: "alvara", DefinitionID: "standard-review", Step: "triage"}
	event := json.RawMessage(`{"payload":{"serviceId":"alvara"}}`)
	for _, tc := range []struct {
		name    string
		model   Model
		event   json.RawMessage
		want    subscription.Outcome
		failure string
	}{
		{"a valid decision", &fakeModel{answer: `{"outcome":"ALLOW","reason":"the decree [1]"}`}, event, subscription.Allow, ""},
		{"garbage", &fakeModel{answer: `Sure, it applies.`}, event, subscription.RequireHumanReview, "invalid output"},
		{"no projection kept", &fakeModel{answer: `{"outcome":"ALLOW","reason":"x"}`}, nil, subscription.RequireHumanReview, "not projected"},
		{"no model", nil, event, subscription.RequireHumanReview, "no model is configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &fakeKnowledge{}
			d := &Decider{Knowledge: k, ModelName: "m"}
			if tc.model != nil {
				d.Model = tc.model
			}
			rec := d.DecideRequest(context.Background(), c, "org-a", tc.event, req)
			if rec.Outcome() != tc.want || !strings.Contains(rec.Failure, tc.failure) || (tc.failure == "") != (rec.Failure == "") {
				t.Fatalf("outcome %s failure %q, want %s %q", rec.Outcome(), rec.Failure, tc.want, tc.failure)
			}
			if tc.failure != "" && tc.failure != "invalid output" {
				if len(k.questions) != 0 {
					t.Errorf("the knowledge was asked %d times by a step that could not run", len(k.questions))
				}
				return
			}
			if len(k.questions) != 1 || !strings.Contains(k.questions[0], req.ID) || !strings.Contains(k.questions[0], `"serviceId":"alvara"`) {
				t.Errorf("knowledge questions %q, want the projection and the request", k.questions)
			}
			body := string(tc.model.(*fakeModel).bodies[0])
			if !strings.Contains(body, "Open request the event affects") || !strings.Contains(body, `\"step\":\"triage\"`) {
				t.Errorf("the prompt lacks the request: %s", body)
			}
		})
	}
}
