package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/jackc/pgx/v5"
)

// agentView is a decision's or review's agent record.
type agentView struct {
	Model        string          `json:"model"`
	PromptDigest string          `json:"promptDigest"`
	Proposal     json.RawMessage `json:"proposal"`
	Passages     []struct {
		DocumentID string  `json:"documentId"`
		ChunkID    string  `json:"chunkId"`
		Score      float64 `json:"score"`
	} `json:"passages"`
	KnowledgeVersion string `json:"knowledgeVersion"`
	Release          string `json:"release"`
	Failure          string `json:"failure"`
	// RequestID and Outcome: a mass reaction's step about one request.
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"`
}

type agentDecisionView struct {
	Outcome   string `json:"outcome"`
	Rule      *int   `json:"rule"`
	ActorType string `json:"actorType"`
	Actor     string `json:"actor"`
	Status    string `json:"status"`
	Detail    string `json:"detail"`
	Reviews   []struct {
		Kind  string     `json:"kind"`
		Role  string     `json:"role"`
		Note  string     `json:"note"`
		Agent *agentView `json:"agent"`
	} `json:"reviews"`
	Agent *agentView `json:"agent"`
}

// modelStandIn is an OpenAI-compatible chat-completions server: for each
// request it answers what script says for the request id the prompt
// names, and records every body it received.
type modelStandIn struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	script map[string]string // requestId → answer ("" blocks: a model too slow)
}

func newModelStandIn(t *testing.T) *modelStandIn {
	m := &modelStandIn{script: map[string]string{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer model-key" {
			http.Error(w, "wrong path or key", http.StatusUnauthorized)
			return
		}
		m.mu.Lock()
		m.bodies = append(m.bodies, body)
		answer, found := "", false
		for id, a := range m.script {
			if strings.Contains(string(body), id) {
				answer, found = a, true
			}
		}
		m.mu.Unlock()
		if !found {
			http.Error(w, "no script for this prompt", http.StatusBadRequest)
			return
		}
		if answer == "" {
			select { // past the step's timeout
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []map[string]any{{"index": 0,
			"message": map[string]string{"role": "assistant", "content": answer}, "finish_reason": "stop"}}})
	}))
	t.Cleanup(m.Close)
	return m
}

// calls returns the bodies received that name id.
func (m *modelStandIn) calls(id string) [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]byte
	for _, b := range m.bodies {
		if strings.Contains(string(b), id) {
			out = append(out, b)
		}
	}
	return out
}

// knowledgeStandIn answers POST /v1/chat with the AI builder's request
// and response shape (docs/openapi/ai-builder.json), verifying the bearer
// token as the AI builder does (pkg/fabric/auth, role attendant), and
// records each question with the token's tenant.
type knowledgeStandIn struct {
	*httptest.Server
	mu        sync.Mutex
	questions map[string][]string // tenant → questions
}

func newKnowledgeStandIn(t *testing.T, jwks string) *knowledgeStandIn {
	keys, err := auth.LoadKeys(context.Background(), jwks)
	if err != nil {
		t.Fatal(err)
	}
	v := auth.NewVerifier(keys, auth.DevIssuer)
	k := &knowledgeStandIn{questions: map[string][]string{}}
	k.Server = httptest.NewServer(v.Require(auth.RoleAttendant)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		var req struct {
			Question string `json:"question"`
			TopK     *int   `json:"topK"`
		}
		if r.URL.Path != "/v1/chat" || json.NewDecoder(r.Body).Decode(&req) != nil || req.TopK == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		k.mu.Lock()
		k.questions[claims.TenantID] = append(k.questions[claims.TenantID], req.Question)
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"answer":"An identity document is an RG or CNH with a photograph. [1]","generated":false,
			"citations":[{"documentId":"0b7a3d4e-9a43-4c55-8d1e-2f0f4f2a1c01","chunkId":"7c1f0a52-6d1c-4b0e-9f3e-5a2b1c0d9e11","score":0.82}]}`)
	})))
	t.Cleanup(k.Close)
	return k
}

func (k *knowledgeStandIn) asked(tenant, id string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, q := range k.questions[tenant] {
		if strings.Contains(q, id) {
			n++
		}
	}
	return n
}

const agentSubscription = `{"name":"documents the agent checks","eventTypes":["document.validated.v1"],"filter":"payload.valid == true",
	"policy":{"default":"ALLOW","rules":[{"when":"payload.kind == 'proof-of-address'","outcome":"DENY"}]},
	"reaction":{"kind":"resume-workflow"},
	"agent":{"instruction":"Does this document satisfy the request's document check? Cite the rules that apply.",
		"project":["payload.requestId","payload.kind","payload.valid"],"timeout":"1s","topK":3}}`

// agentPlatform is a workflow instance whose definition waits for a
// document's verdict at its first step, with the agent subscription
// active.
type agentPlatform struct {
	*platform
	url, author, approver string
}

func newAgentPlatform(t *testing.T, pl *platform, extra map[string]string) *agentPlatform {
	t.Helper()
	defs := filepath.Join(t.TempDir(), "definitions.json")
	if err := os.WriteFile(defs, []byte(`{"default":"docs","definitions":[
		{"id":"docs","steps":[
			{"name":"document-check","assigneeRole":"attendant","sla":"1h","waitFor":"document.validated.v1"},
			{"name":"decision","assigneeRole":"attendant","sla":"1h"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &agentPlatform{platform: pl}
	vars := map[string]string{"WORKFLOW_DEFINITIONS": defs}
	for k, v := range extra {
		vars[k] = v
	}
	p.url = p.start(t, vars)
	p.author, p.approver = p.Token(t, "org-a", "ana", "attendant"), p.Token(t, "org-a", "olga", "operator")
	activate(t, p.url, p.author, p.approver, agentSubscription)
	return p
}

// waiting starts a request whose process waits at its document check.
func (p *agentPlatform) waiting(t *testing.T) (string, envelope.Envelope) {
	t.Helper()
	sub := p.submitted(t, "org-a", "citizen-1", "svc")
	id := requestIDOf(t, sub)
	if proc := waitProcess(t, p.url, p.author, id); proc.CurrentStep != 0 {
		t.Fatalf("process at step %d, want the waiting document check", proc.CurrentStep)
	}
	return id, sub
}

// validated publishes the document worker's verdict on requestID's
// document; its documentId and checks are not in the projection.
func (p *agentPlatform) validated(t *testing.T, requestID string, sub envelope.Envelope, kind string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("document.validated.v1", "org-a", "document-worker", map[string]any{
		"documentId": deploytest.NewID(t), "requestId": requestID, "valid": true, "kind": kind,
		"checks": []map[string]any{{"name": "readable", "passed": true, "detail": "SENTINEL-NOT-PROJECTED"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.CorrelationID = sub.CorrelationID
	p.Publish(t, e)
	return e
}

func (p *agentPlatform) decision(t *testing.T, e envelope.Envelope) agentDecisionView {
	t.Helper()
	var got []agentDecisionView
	fabrictest.Eventually(t, 20*time.Second, "the decision on "+e.ID, func() bool {
		do(t, http.MethodGet, p.url+"/v1/decisions?eventId="+e.ID, p.author, nil, nil).JSON(t, &got)
		return len(got) == 1
	})
	return got[0]
}

// TestAgentStep is seed 004's agentic path on the workflow: Event →
// Deterministic Resolution → Knowledge → LLM → Structured Decision →
// Policy → Workflow, through the real broker and database, with an
// OpenAI-compatible stand-in model and a stand-in of the AI builder's
// chat API (its request and response shape, tokens verified as it does).
func TestAgentStep(t *testing.T) {
	model := newModelStandIn(t)
	// The knowledge stand-in verifies tokens with the JWKS the stack gives
	// its instances; the workflow signs its service tokens with the
	// matching development key (AGENT_TOKEN_KEY).
	pl := newPlatform(t)
	knowledge := newKnowledgeStandIn(t, pl.Keys.JWKSPath)
	traces := filepath.Join(t.TempDir(), "workflow.jsonl")
	p := newAgentPlatform(t, pl, map[string]string{
		"AGENT_MODEL_URL": model.URL + "/v1", "AGENT_MODEL": "stand-in-1", "AGENT_MODEL_KEY": "model-key",
		"AGENT_KNOWLEDGE_URL": knowledge.URL, "AGENT_TOKEN_KEY": filepath.Join(filepath.Dir(pl.Keys.JWKSPath), "dev-signing-key.json"),
		"RELEASE_ID": "2026.12-test", "OTEL_TRACES_FILE": traces})
	proc := func(id string) processView { return waitProcess(t, p.url, p.author, id) }

	allowID, allowSub := p.waiting(t)
	approvalID, approvalSub := p.waiting(t)
	invalidID, invalidSub := p.waiting(t)
	slowID, slowSub := p.waiting(t)
	ruleID, ruleSub := p.waiting(t)
	model.mu.Lock()
	model.script[allowID] = `{"outcome":"ALLOW","reason":"an identity document, which the rules accept [1]"}`
	model.script[approvalID] = `{"outcome":"REQUIRE_APPROVAL","reason":"the rules ask a supervisor for this service [1]"}`
	model.script[invalidID] = `{"outcome":"ALLOW"}` // no reason: invalid against the decision schema
	model.script[slowID] = ""                       // answers after the step's timeout
	model.script[ruleID] = `{"outcome":"ALLOW","reason":"never asked"}`
	model.mu.Unlock()

	t.Run("(a) a valid ALLOW acts", func(t *testing.T) {
		e := p.validated(t, allowID, allowSub, "identity")
		d := p.decision(t, e)
		if d.Outcome != "ALLOW" || d.ActorType != "AGENT" || d.Actor != "agent:stand-in-1" || d.Status != "executed" || d.Agent == nil {
			t.Fatalf("decision %+v, want ALLOW by the agent, executed", d)
		}
		if got := proc(allowID); got.CurrentStep != 1 || got.Tasks[0].Status != "completed" {
			t.Errorf("process at step %d, want the document check resumed", got.CurrentStep)
		}
		// What the resumed step emitted was the agent's doing.
		rows, err := p.Pool.Query(context.Background(), `SELECT body FROM outbox_event WHERE causation_id = $1`, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			t.Fatal(err)
		}
		if len(bodies) == 0 {
			t.Fatal("the resumed step emitted nothing caused by the verdict")
		}
		for _, b := range bodies {
			emitted, err := envelope.Decode(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := (envelope.Ref{Type: "AGENT", ID: "agent:stand-in-1"}); emitted.Actor == nil || *emitted.Actor != want {
				t.Errorf("%s emitted by the resumed step has actor %v, want %v", emitted.Type, emitted.Actor, want)
			}
		}
		a := d.Agent
		calls := model.calls(allowID)
		if len(calls) != 1 {
			t.Fatalf("the model was asked %d times, want 1", len(calls))
		}
		sum := sha256.Sum256(calls[0])
		if a.PromptDigest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("prompt digest %s is not the digest of what the model received", a.PromptDigest)
		}
		if a.Model != "stand-in-1" || a.Release != "2026.12-test" || a.Failure != "" ||
			!strings.HasPrefix(a.KnowledgeVersion, "chunks:sha256:") || len(a.Passages) != 1 ||
			a.Passages[0].DocumentID != "0b7a3d4e-9a43-4c55-8d1e-2f0f4f2a1c01" || a.Passages[0].ChunkID != "7c1f0a52-6d1c-4b0e-9f3e-5a2b1c0d9e11" ||
			!strings.Contains(string(a.Proposal), `"ALLOW"`) {
			t.Errorf("agent record %+v", a)
		}
		// The reaction evaluation names on whose behalf the event came:
		// the execution's principal, here its producer as SYSTEM (the
		// envelope names no actor).
		var principal any
		fabrictest.Eventually(t, 10*time.Second, "the reaction evaluation's span", func() bool {
			principal = evaluationAttribute(t, traces, e.ID, "agora.principal")
			return principal != nil
		})
		if principal != "SYSTEM:document-worker" {
			t.Errorf("reaction evaluation of %s: agora.principal %v, want SYSTEM:document-worker", e.ID, principal)
		}
		if n := knowledge.asked("org-a", allowID); n != 1 {
			t.Errorf("the knowledge of org-a was asked %d times about the request, want 1", n)
		}
	})

	t.Run("(b) REQUIRE_APPROVAL opens an approval with the decision and passages, and does not act", func(t *testing.T) {
		e := p.validated(t, approvalID, approvalSub, "identity")
		d := p.decision(t, e)
		if d.Outcome != "REQUIRE_APPROVAL" || d.ActorType != "AGENT" || d.Status != "pending-approval" || len(d.Reviews) != 1 {
			t.Fatalf("decision %+v, want an approval pending", d)
		}
		r := d.Reviews[0]
		if r.Kind != "approval" || r.Agent == nil || len(r.Agent.Passages) != 1 || !strings.Contains(string(r.Agent.Proposal), "REQUIRE_APPROVAL") ||
			!strings.Contains(r.Note, "proposed REQUIRE_APPROVAL") || !strings.Contains(r.Note, "7c1f0a52-6d1c-4b0e-9f3e-5a2b1c0d9e11") {
			t.Errorf("approval %+v (agent %+v), want the proposal and its passages attached", r, r.Agent)
		}
		var open []struct {
			DecisionID string     `json:"decisionId"`
			Agent      *agentView `json:"agent"`
		}
		do(t, http.MethodGet, p.url+"/v1/reviews", p.approver, nil, nil).JSON(t, &open)
		if len(open) != 1 || open[0].Agent == nil || len(open[0].Agent.Passages) != 1 {
			t.Errorf("the operator's open reviews %+v, want the approval with the agent's record", open)
		}
		if got := proc(approvalID); got.CurrentStep != 0 || got.Tasks[0].Status != "open" {
			t.Errorf("process at step %d, want the step still waiting", got.CurrentStep)
		}
	})

	humanReview := func(t *testing.T, e envelope.Envelope, requestID, failure string) {
		t.Helper()
		d := p.decision(t, e)
		if d.Outcome != "REQUIRE_HUMAN_REVIEW" || d.ActorType != "AGENT" || d.Status != "pending-review" || d.Agent == nil ||
			!strings.Contains(d.Agent.Failure, failure) || len(d.Agent.Proposal) != 0 || len(d.Reviews) != 1 || d.Reviews[0].Agent == nil {
			t.Fatalf("decision %+v (agent %+v), want REQUIRE_HUMAN_REVIEW because %q", d, d.Agent, failure)
		}
		if !strings.Contains(d.Reviews[0].Note, failure) {
			t.Errorf("review note %q does not say %q", d.Reviews[0].Note, failure)
		}
		if got := proc(requestID); got.CurrentStep != 0 || got.Tasks[0].Status != "open" {
			t.Errorf("process at step %d, want the step still waiting: nothing acts", got.CurrentStep)
		}
	}
	t.Run("(c) invalid output becomes REQUIRE_HUMAN_REVIEW and nothing acts", func(t *testing.T) {
		humanReview(t, p.validated(t, invalidID, invalidSub, "identity"), invalidID, "invalid output")
	})
	t.Run("(d) a timeout becomes REQUIRE_HUMAN_REVIEW and nothing acts", func(t *testing.T) {
		humanReview(t, p.validated(t, slowID, slowSub, "identity"), slowID, "timeout")
	})
	t.Run("(f) a deterministic rule decides: the model is not called", func(t *testing.T) {
		e := p.validated(t, ruleID, ruleSub, "proof-of-address")
		d := p.decision(t, e)
		if d.Outcome != "DENY" || d.Rule == nil || *d.Rule != 0 || d.ActorType != "SYSTEM" || d.Agent != nil {
			t.Errorf("decision %+v, want DENY by rule 0, by the system", d)
		}
		if n := len(model.calls(ruleID)); n != 0 {
			t.Errorf("the model was called %d times for an event a rule decided, want 0", n)
		}
		if n := knowledge.asked("org-a", ruleID); n != 0 {
			t.Errorf("the knowledge was searched %d times for an event a rule decided, want 0", n)
		}
	})
	t.Run("(g) nothing outside the projection reaches the model or the knowledge search", func(t *testing.T) {
		model.mu.Lock()
		bodies := model.bodies
		model.mu.Unlock()
		if len(bodies) != 4 { // allow, approval, invalid, slow
			t.Errorf("the model received %d prompts, want 4", len(bodies))
		}
		for _, b := range bodies {
			var req struct {
				Messages []struct{ Role, Content string }
			}
			if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) != 2 {
				t.Fatalf("prompt %s", b)
			}
			user := req.Messages[1].Content
			start, end := strings.Index(user, "{"), strings.Index(user, "}\n\n")
			var event map[string]map[string]any
			if err := json.Unmarshal([]byte(user[start:end+1]), &event); err != nil {
				t.Fatalf("the prompt's event %q: %v", user[start:end+1], err)
			}
			if len(event) != 1 || len(event["payload"]) != 3 {
				t.Errorf("the prompt's event %v, want payload.requestId, kind and valid only", event)
			}
			for _, field := range []string{"payload.requestId", "payload.kind", "payload.valid"} {
				if _, ok := event["payload"][strings.TrimPrefix(field, "payload.")]; !ok {
					t.Errorf("the prompt's event %v lacks %s", event, field)
				}
			}
			for _, secret := range []string{"SENTINEL-NOT-PROJECTED", "documentId", "checks", "org-a", allowSub.CorrelationID} {
				if strings.Contains(string(b), secret) {
					t.Errorf("the prompt contains %q, outside the projection: %s", secret, b)
				}
			}
		}
		knowledge.mu.Lock()
		defer knowledge.mu.Unlock()
		for _, q := range knowledge.questions["org-a"] {
			if strings.Contains(q, "SENTINEL-NOT-PROJECTED") || strings.Contains(q, "documentId") {
				t.Errorf("the knowledge question %q carries a field outside the projection", q)
			}
		}
	})
}

// TestAgentStepWithoutAModel: the default platform (make up) has no
// model; an agent step then becomes REQUIRE_HUMAN_REVIEW with the reason,
// and nothing acts.
func TestAgentStepWithoutAModel(t *testing.T) {
	p := newAgentPlatform(t, newPlatform(t), nil)
	id, sub := p.waiting(t)
	d := p.decision(t, p.validated(t, id, sub, "identity"))
	if d.Outcome != "REQUIRE_HUMAN_REVIEW" || d.ActorType != "AGENT" || d.Actor != "agent:none" || d.Status != "pending-review" ||
		d.Agent == nil || !strings.Contains(d.Agent.Failure, "no model is configured") || d.Agent.Release != "dev" || d.Agent.PromptDigest != "" {
		t.Fatalf("decision %+v (agent %+v), want REQUIRE_HUMAN_REVIEW: no model", d, d.Agent)
	}
	if got := waitProcess(t, p.url, p.author, id); got.CurrentStep != 0 {
		t.Errorf("process at step %d, want the step still waiting", got.CurrentStep)
	}
}

// evaluationAttribute returns attribute key of the "reaction evaluation"
// span of event eventID in the service's span file (OTEL_TRACES_FILE, the
// stdouttrace exporter's JSON lines), or nil while it is not written yet.
func evaluationAttribute(t *testing.T, path, eventID, key string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil // not flushed yet
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for {
		var span struct {
			Name       string
			Attributes []struct {
				Key   string
				Value struct{ Value any }
			}
		}
		if dec.Decode(&span) != nil {
			return nil // the end, or a line still being written
		}
		attrs := map[string]any{}
		for _, kv := range span.Attributes {
			attrs[kv.Key] = kv.Value.Value
		}
		if span.Name == "reaction evaluation" && attrs["messaging.message.id"] == eventID {
			return attrs[key]
		}
	}
}
