package e2e

import (
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

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// regulation is the tenant's decree on the new requirement, indexed by the
// AI builder like any of the tenant's documents.
var regulation = []string{
	"Decreto municipal 41/2026 sobre o alvara de funcionamento.",
	"Todo pedido de alvara de funcionamento em analise deve apresentar o laudo de vistoria do corpo de bombeiros.",
	"Estabelecimentos com area inferior a cinquenta metros quadrados ficam dispensados do laudo mediante autorizacao do supervisor.",
}

// standInModel is an OpenAI-compatible chat-completions server, an external
// party of the platform: it answers each prompt with what answer says for
// the request the prompt is about, and keeps every prompt.
type standInModel struct {
	*httptest.Server
	mu      sync.Mutex
	prompts []string
	answer  func(prompt string) string
}

func newStandInModel(t *testing.T) *standInModel {
	m := &standInModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		m.mu.Lock()
		m.prompts = append(m.prompts, string(body))
		answer := m.answer
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []map[string]any{{"index": 0,
			"message": map[string]string{"role": "assistant", "content": answer(string(body))}, "finish_reason": "stop"}}})
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *standInModel) answering(f func(prompt string) string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answer = f
}

// about returns the prompts received that name id.
func (m *standInModel) about(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.prompts {
		if strings.Contains(p, id) {
			out = append(out, p)
		}
	}
	return out
}

// TestRequirementChangeDecidedRequestByRequest is issue 31's third
// vertical slice across the real services: the tenant's regulation is
// indexed by the AI builder (uploaded, read by the document worker); the
// tenant's catalog system says, through the gateway, that a service now
// requires a document; the workflow's subscription asks its agent step
// about each affected open request, behind the blast-radius gate. The
// operator approves first, with the estimate; only then is the agent
// asked, once per request: the tenant's regulation through the AI
// builder's chat (the workflow's service token), a stand-in model's
// structured decision, then the policy. Valid ALLOWs act (the reaction's
// review of the request), a REQUIRE_APPROVAL waits for an operator with
// the decision and the regulation's passages. Then the model answers
// garbage to a second change: nothing acts, every request gets a human
// review.
func TestRequirementChangeDecidedRequestByRequest(t *testing.T) {
	h := harness.New(t, os.Getenv)
	h.RequireProcesses(t)
	indexed := watchIndexed(t, h)
	tenant := "org-a-" + randHex(3)
	sources := catalogSource(t, tenant)
	model := newStandInModel(t)
	h.Start(t, "request", harness.Env{"GATEWAY_SOURCES_FILE": sources})
	h.Start(t, "document-worker")
	h.Start(t, "ai-builder")
	h.Start(t, "workflow", harness.Env{"REACTION_JOB_BATCH": "4", "REACTION_JOB_INTERVAL": "100ms",
		"AGENT_MODEL_URL": model.URL + "/v1", "AGENT_MODEL": "stand-in-1", "AGENT_KNOWLEDGE_URL": h.URL("ai-builder"),
		// The workflow's service tokens are signed with the key the
		// harness's JWKS (every service's JWT_KEYS) publishes.
		"AGENT_TOKEN_KEY": filepath.Join(filepath.Dir(h.Keys.JWKSPath), "dev-signing-key.json"), "RELEASE_ID": "2026.12-e2e"})
	attendant, operator := h.Token(tenant, "ana", "attendant"), h.Token(tenant, "olga", "operator")
	call := workflowCall(t, h)

	// Six open requests of the service; the regulation reaches the AI
	// builder as the tenant's documents do, attached to one of them.
	const open = 6
	var requests []string
	for i := range open {
		requests = append(requests, submitRequest(t, h.URL("request"), h.Token(tenant, "citizen-"+string(rune('a'+i)), "citizen")))
	}
	regulationDoc := uploadDocument(t, h.URL("request"), h.Token(tenant, "citizen-a", "citizen"), requests[0], "decreto-41-2026.txt",
		[]byte(strings.Join(regulation, "\n")+"\n"))
	indexed.wait(t, regulationDoc, 3*time.Minute)
	fabrictest.Eventually(t, time.Minute, "6 open processes", func() bool {
		var page struct{ Items []json.RawMessage }
		return call(http.MethodGet, "/v1/tasks?status=open&limit=100", operator, "", &page) == http.StatusOK && len(page.Items) == open
	})
	activateSubscription(t, call, attendant, operator, `{"name":"new document, request by request",
		"eventTypes":["catalog.service-updated.v1"],"filter":"payload.change == \"requires-document\"",
		"policy":{"default":"ALLOW"},"reaction":{"kind":"review-affected-requests","role":"attendant","maxAffected":3},
		"agent":{"instruction":"Segundo o decreto do municipio, o novo documento exigido se aplica a este pedido em analise?",
			"project":["payload.serviceId","payload.change","payload.requiredDocument"],"timeout":"20s","topK":3}}`)

	// The first request is the supervisor's (the decree's exemption); the
	// others need the report.
	model.answering(func(prompt string) string {
		if strings.Contains(prompt, requests[0]) {
			return `{"outcome":"REQUIRE_APPROVAL","reason":"o decreto dispensa pequenos estabelecimentos com autorizacao do supervisor [1]"}`
		}
		return `{"outcome":"ALLOW","reason":"o decreto exige o laudo de todo pedido em analise [1]"}`
	})

	type agentRecord struct {
		Model, PromptDigest, KnowledgeVersion, Release, Failure, RequestID, Outcome string
		Proposal                                                                    json.RawMessage
		Passages                                                                    []struct{ DocumentID, ChunkID string }
	}
	type decision struct {
		ID, Outcome, Status, ActorType, ReviewID string
		Reviews                                  []struct{ Kind, Note string }
		Job                                      *struct {
			Total, Done int
			Status      string
			Outcomes    map[string]int
		}
	}
	type review struct {
		ID, DecisionID, Kind, Role, RequestID, Note string
		Agent                                       *agentRecord
	}
	decisionOn := func(eventID string) (decision, bool) {
		var list []decision
		if call(http.MethodGet, "/v1/decisions?eventId="+eventID, attendant, "", &list) != http.StatusOK || len(list) != 1 {
			return decision{}, false
		}
		return list[0], true
	}
	// changed sends the catalog system's signed CloudEvent and returns the
	// decision on it.
	changed := func() (string, decision) {
		t.Helper()
		eventID := announceServiceChange(t, h)
		var d decision
		fabrictest.Eventually(t, 30*time.Second, "the change decided", func() bool {
			var ok bool
			d, ok = decisionOn(eventID)
			return ok
		})
		return eventID, d
	}
	// gated checks the blast-radius gate on the change's decision (the
	// estimate, nothing asked yet), approves it and waits until every
	// request is decided; it returns the decision and its requests'
	// reviews and approvals, by request.
	gated := func(eventID string, d decision, prompts int) (decision, map[string]review) {
		t.Helper()
		if d.Outcome != "REQUIRE_APPROVAL" || d.ActorType != "SYSTEM" || d.Job == nil || d.Job.Status != "awaiting-approval" ||
			d.Job.Total != open || len(d.Reviews) != 1 || !strings.Contains(d.Reviews[0].Note, "6 open requests") {
			t.Fatalf("decision %+v (job %+v), want the blast-radius gate with the estimate of 6 open requests", d, d.Job)
		}
		model.mu.Lock()
		asked := len(model.prompts)
		model.mu.Unlock()
		if asked != prompts {
			t.Fatalf("the model got %d prompts before the approval, want %d (none about this change)", asked, prompts)
		}
		if status := call(http.MethodPost, "/v1/reviews/"+d.ReviewID+"/resolve", operator, `{"approve":true,"reason":"ask about each"}`, nil); status != http.StatusOK {
			t.Fatalf("approve = %d", status)
		}
		fabrictest.Eventually(t, 2*time.Minute, "every request decided", func() bool {
			var ok bool
			d, ok = decisionOn(eventID)
			return ok && d.Job != nil && d.Job.Status == "done"
		})
		var list []review
		call(http.MethodGet, "/v1/reviews", operator, "", &list)
		byRequest := map[string]review{}
		for _, r := range list {
			if r.DecisionID == d.ID && r.RequestID != "" {
				if _, twice := byRequest[r.RequestID]; twice {
					t.Errorf("request %s has two open reviews of the decision", r.RequestID)
				}
				byRequest[r.RequestID] = r
			}
		}
		if d.Job.Done != open || len(byRequest) != open {
			t.Fatalf("job %+v, %d requests with a review or approval; want each of the %d once", d.Job, len(byRequest), open)
		}
		return d, byRequest
	}

	t.Run("valid decisions: the gate first, then ALLOW acts and REQUIRE_APPROVAL waits", func(t *testing.T) {
		eventID, d := changed()
		d, reviews := gated(eventID, d, 0)
		if d.Job.Outcomes["ALLOW"] != open-1 || d.Job.Outcomes["REQUIRE_APPROVAL"] != 1 || len(d.Job.Outcomes) != 2 {
			t.Errorf("job outcomes %v, want 5 ALLOW and 1 REQUIRE_APPROVAL", d.Job.Outcomes)
		}
		for i, id := range requests {
			r := reviews[id]
			kind, role, outcome := "review", "attendant", "ALLOW"
			if i == 0 {
				kind, role, outcome = "approval", "operator", "REQUIRE_APPROVAL"
			}
			a := r.Agent
			if r.Kind != kind || r.Role != role || a == nil || a.Outcome != outcome || a.Failure != "" || a.Model != "stand-in-1" ||
				a.Release != "2026.12-e2e" || !strings.HasPrefix(a.PromptDigest, "sha256:") || !strings.HasPrefix(a.KnowledgeVersion, "chunks:sha256:") {
				t.Errorf("request %d: %s for %s, agent %+v; want %s for %s, %s by stand-in-1", i, r.Kind, r.Role, a, kind, role, outcome)
				continue
			}
			// The agent read the tenant's regulation: its passages, and
			// their text in what the model was given.
			if len(a.Passages) == 0 || a.Passages[0].DocumentID != regulationDoc {
				t.Errorf("request %d: passages %+v, want the regulation %s", i, a.Passages, regulationDoc)
			}
			prompts := model.about(id)
			if len(prompts) != 1 {
				t.Errorf("request %d: the model was asked %d times, want once", i, len(prompts))
				continue
			}
			read := false
			for _, sentence := range regulation {
				read = read || strings.Contains(prompts[0], sentence)
			}
			if !read {
				t.Errorf("request %d: the prompt carries no sentence of the regulation: %s", i, prompts[0])
			}
		}
		if r := reviews[requests[0]]; !strings.Contains(r.Note, "proposed REQUIRE_APPROVAL") || !strings.Contains(r.Note, regulationDoc) {
			t.Errorf("the approval's note %q, want the proposal and the regulation's passages", r.Note)
		}
	})

	t.Run("the model answering garbage: nothing acts, every request gets a human review", func(t *testing.T) {
		model.answering(func(string) string { return "Claro! O decreto se aplica, pode seguir." })
		model.mu.Lock()
		before := len(model.prompts)
		model.mu.Unlock()
		eventID, d := changed()
		d, reviews := gated(eventID, d, before)
		if d.Job.Outcomes["REQUIRE_HUMAN_REVIEW"] != open || len(d.Job.Outcomes) != 1 {
			t.Errorf("job outcomes %v, want every one of the 6 requests REQUIRE_HUMAN_REVIEW", d.Job.Outcomes)
		}
		for i, id := range requests {
			r := reviews[id]
			if r.Kind != "review" || r.Role != "attendant" || r.Agent == nil || r.Agent.Outcome != "REQUIRE_HUMAN_REVIEW" ||
				!strings.Contains(r.Agent.Failure, "invalid output") || len(r.Agent.Proposal) != 0 || !strings.Contains(r.Note, "the agent did not decide") {
				t.Errorf("request %d: %+v (agent %+v), want a human review saying the output was invalid", i, r, r.Agent)
			}
		}
	})
}
