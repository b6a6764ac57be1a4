package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// massAgentSubscription reviews the open requests of a changed service,
// asking the agent about each of them; above 5 requests an operator
// approves first.
const massAgentSubscription = `{"name":"requirement change, request by request","eventTypes":["catalog.service-updated.v1"],
	"filter":"payload.change == \"requires-document\"","policy":{"default":"ALLOW"},
	"reaction":{"kind":"review-affected-requests","role":"attendant","maxAffected":5},
	"agent":{"instruction":"Does the service's new requirement apply to this open request under the tenant's regulation? Cite it.",
		"project":["payload.serviceId","payload.change","payload.requiredDocument"],"timeout":"1s","topK":3}}`

// requestReview is an open review or approval of one request, as
// GET /v1/reviews shows it.
type requestReview struct {
	ID         string     `json:"id"`
	DecisionID string     `json:"decisionId"`
	Kind       string     `json:"kind"`
	Role       string     `json:"role"`
	RequestID  string     `json:"requestId"`
	Follows    string     `json:"follows"`
	Note       string     `json:"note"`
	Agent      *agentView `json:"agent"`
}

type massDecisionView struct {
	decisionView
	ID  string `json:"id"`
	Job *struct {
		Total, Done int
		Status      string
		Outcomes    map[string]int `json:"outcomes"`
	} `json:"job"`
}

// TestAgentStepPerAffectedRequest is issue 31's third slice on the
// workflow, through the real broker and database: a service's
// requirements change; the blast-radius gate asks an operator first (no
// model or knowledge search is asked anything before), then the job asks
// the agent about each affected open request, once each: the tenant's
// knowledge, a structured decision validated against the subscription's
// schema, then the policy. Only ALLOW acts (the reaction's review);
// REQUIRE_APPROVAL opens an approval with the proposal and its passages
// (approved, the reaction acts on that request); invalid output, garbage
// and a timeout become human reviews with the reason. Every step is
// recorded with the model, the digest of what it received, the passages,
// the knowledge version and the release. A change whose every answer is
// garbage acts on nothing: every request gets a human review.
func TestAgentStepPerAffectedRequest(t *testing.T) {
	model := newModelStandIn(t)
	pl := newPlatform(t)
	knowledge := newKnowledgeStandIn(t, pl.Keys.JWKSPath)
	url := pl.start(t, map[string]string{
		"AGENT_MODEL_URL": model.URL + "/v1", "AGENT_MODEL": "stand-in-1", "AGENT_MODEL_KEY": "model-key",
		"AGENT_KNOWLEDGE_URL": knowledge.URL, "AGENT_TOKEN_KEY": filepath.Join(filepath.Dir(pl.Keys.JWKSPath), "dev-signing-key.json"),
		"RELEASE_ID": "2026.12-test", "REACTION_JOB_INTERVAL": "100ms"})
	author, approver := pl.Token(t, "org-a", "ana", "attendant"), pl.Token(t, "org-a", "olga", "operator")
	ctx := context.Background()
	// Open requests, written directly: 7 of "alvara" in org-a, 2 of it in
	// org-b (never asked about), 3 of "feira" in org-a.
	open := func(tenant, service string, n int) []string {
		t.Helper()
		rows, err := pl.Pool.Query(ctx, `INSERT INTO `+pl.Schema+`.process_instance
			(id, tenant_id, request_id, citizen_id, service_id, definition_id, correlation_id, started_at)
			SELECT gen_random_uuid(), $1, gen_random_uuid(), 'citizen-secret-' || i, $2, 'standard-review', gen_random_uuid(), now()
			FROM generate_series(1, $3) AS i RETURNING request_id::text`, tenant, service, n)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	alvara, other, feira := open("org-a", "alvara", 7), open("org-b", "alvara", 2), open("org-a", "feira", 3)
	model.mu.Lock()
	for _, id := range alvara[:3] {
		model.script[id] = `{"outcome":"ALLOW","reason":"the decree requires the fire report of every open request [1]"}`
	}
	model.script[alvara[3]] = `{"outcome":"REQUIRE_APPROVAL","reason":"the decree exempts requests near their end; a supervisor decides [1]"}`
	model.script[alvara[4]] = `{"outcome":"ALLOW"}` // no reason: invalid against the decision schema
	model.script[alvara[5]] = `Sure! The new requirement applies.`
	model.script[alvara[6]] = "" // answers after the step's timeout
	for _, id := range append(other, feira...) {
		model.script[id] = `{"outcome":"ALLOW",` // garbage: cut short
	}
	model.mu.Unlock()
	activate(t, url, author, approver, massAgentSubscription)

	changed := func(service string) envelope.Envelope {
		t.Helper()
		e, err := envelope.New("catalog.service-updated.v1", "org-a", "catalog-system", map[string]any{
			"serviceId": service, "change": "requires-document", "requiredDocument": "laudo do corpo de bombeiros"})
		if err != nil {
			t.Fatal(err)
		}
		pl.Publish(t, e)
		return e
	}
	decision := func(e envelope.Envelope) massDecisionView {
		t.Helper()
		var got []massDecisionView
		fabrictest.Eventually(t, 20*time.Second, "the decision on "+e.ID, func() bool {
			do(t, http.MethodGet, url+"/v1/decisions?eventId="+e.ID, author, nil, nil).JSON(t, &got)
			return len(got) == 1
		})
		return got[0]
	}
	done := func(e envelope.Envelope) massDecisionView {
		t.Helper()
		var d massDecisionView
		fabrictest.Eventually(t, 60*time.Second, "the mass reaction on "+e.ID+" done", func() bool {
			d = decision(e)
			return d.Job != nil && d.Job.Status == "done"
		})
		return d
	}
	reviewsOf := func(decisionID string) map[string][]requestReview {
		t.Helper()
		var list []requestReview
		do(t, http.MethodGet, url+"/v1/reviews", approver, nil, nil).JSON(t, &list)
		out := map[string][]requestReview{}
		for _, r := range list {
			if r.DecisionID == decisionID && r.RequestID != "" {
				out[r.RequestID] = append(out[r.RequestID], r)
			}
		}
		return out
	}
	asked := func(ids []string) (calls, searches int) {
		for _, id := range ids {
			calls += len(model.calls(id))
			searches += knowledge.asked("org-a", id) + knowledge.asked("org-b", id)
		}
		return calls, searches
	}

	e := changed("alvara")
	d := decision(e)
	t.Run("the blast-radius gate asks for approval before anything acts or is asked", func(t *testing.T) {
		if d.Outcome != "REQUIRE_APPROVAL" || d.Status != "pending-approval" || d.ActorType != "SYSTEM" || d.Job == nil ||
			d.Job.Status != "awaiting-approval" || d.Job.Total != 7 {
			t.Fatalf("decision %+v (job %+v), want the gate: the policy's and the gate's approval pending on 7 requests", d, d.Job)
		}
		if len(d.Reviews) != 1 || !strings.Contains(d.Reviews[0].Note, "7 open requests") || !strings.Contains(d.Reviews[0].Note, "agent step") {
			t.Errorf("the approval %+v, want the estimate and the per-request agent step in its note", d.Reviews)
		}
		if calls, searches := asked(alvara); calls != 0 || searches != 0 {
			t.Errorf("before the approval: %d model calls and %d knowledge searches, want none", calls, searches)
		}
		if n := len(reviewsOf(d.ID)); n != 0 {
			t.Errorf("%d requests reviewed before the approval, want none", n)
		}
	})
	if resp := post(t, url, approver, "/v1/reviews/"+d.ReviewID+"/resolve", `{"approve":true,"reason":"ask the agent about each"}`); resp.Status != http.StatusOK {
		t.Fatalf("approve = %d %s", resp.Status, resp.Body)
	}
	d = done(e)
	reviews := reviewsOf(d.ID)

	t.Run("each request is decided once by the agent step, and only ALLOW acts", func(t *testing.T) {
		want := map[string]int{"ALLOW": 3, "REQUIRE_APPROVAL": 1, "REQUIRE_HUMAN_REVIEW": 3}
		if d.Job.Done != 7 || len(d.Job.Outcomes) != len(want) {
			t.Fatalf("job %+v, want 7 done with outcomes %v", d.Job, want)
		}
		for o, n := range want {
			if d.Job.Outcomes[o] != n {
				t.Errorf("job outcomes %v, want %v", d.Job.Outcomes, want)
			}
		}
		if calls, searches := asked(alvara); calls != 7 || searches != 7 {
			t.Errorf("%d model calls and %d knowledge searches for 7 requests, want one each", calls, searches)
		}
		for i, id := range alvara {
			kind, role, outcome, failure := "review", "attendant", "ALLOW", ""
			switch i {
			case 3:
				kind, role, outcome = "approval", "operator", "REQUIRE_APPROVAL"
			case 4, 5:
				outcome, failure = "REQUIRE_HUMAN_REVIEW", "invalid output"
			case 6:
				outcome, failure = "REQUIRE_HUMAN_REVIEW", "timeout"
			}
			rs := reviews[id]
			if len(rs) != 1 || rs[0].Agent == nil {
				t.Errorf("request %d: reviews %+v, want one with the agent's record", i, rs)
				continue
			}
			r, a := rs[0], rs[0].Agent
			if r.Kind != kind || r.Role != role || a.Outcome != outcome || a.RequestID != id ||
				(failure == "") != (a.Failure == "") || !strings.Contains(a.Failure, failure) {
				t.Errorf("request %d: %s for %s, agent outcome %s failure %q; want %s for %s, %s %q", i, r.Kind, r.Role, a.Outcome, a.Failure,
					kind, role, outcome, failure)
			}
			if failure != "" && (len(a.Proposal) != 0 || !strings.Contains(r.Note, failure)) {
				t.Errorf("request %d: proposal %s, note %q; want no proposal and the reason %q", i, a.Proposal, r.Note, failure)
			}
			if a.Model != "stand-in-1" || a.Release != "2026.12-test" || !strings.HasPrefix(a.KnowledgeVersion, "chunks:sha256:") ||
				len(a.Passages) != 1 || a.Passages[0].ChunkID != "7c1f0a52-6d1c-4b0e-9f3e-5a2b1c0d9e11" {
				t.Errorf("request %d: agent record %+v", i, a)
			}
			if calls := model.calls(id); len(calls) == 1 {
				sum := sha256.Sum256(calls[0])
				if a.PromptDigest != "sha256:"+hex.EncodeToString(sum[:]) {
					t.Errorf("request %d: prompt digest %s is not the digest of what the model received", i, a.PromptDigest)
				}
				// The event's projection and the request, nothing of the
				// citizen.
				for _, want := range []string{"laudo do corpo de bombeiros", "requires-document", `\"step\":\"triage\"`} {
					if !strings.Contains(string(calls[0]), want) {
						t.Errorf("request %d: the prompt lacks %s: %s", i, want, calls[0])
					}
				}
				if strings.Contains(string(calls[0]), "citizen-secret") {
					t.Errorf("request %d: the prompt carries the citizen: %s", i, calls[0])
				}
			}
		}
		if r := reviews[alvara[3]]; len(r) == 1 && (!strings.Contains(r[0].Note, "proposed REQUIRE_APPROVAL") ||
			!strings.Contains(r[0].Note, "7c1f0a52-6d1c-4b0e-9f3e-5a2b1c0d9e11") || !strings.Contains(string(r[0].Agent.Proposal), "supervisor")) {
			t.Errorf("the request's approval %+v, want the proposal and its passages attached", r[0])
		}
		if calls, searches := asked(other); calls != 0 || searches != 0 {
			t.Errorf("org-b's requests of the same service: %d model calls, %d searches, want none", calls, searches)
		}
	})

	t.Run("an approved request's approval acts on that request", func(t *testing.T) {
		approval := reviews[alvara[3]]
		if len(approval) != 1 {
			t.Fatalf("reviews of the request %+v", approval)
		}
		if resp := post(t, url, approver, "/v1/reviews/"+approval[0].ID+"/resolve", `{"approve":true,"reason":"not near its end"}`); resp.Status != http.StatusOK {
			t.Fatalf("approve = %d %s", resp.Status, resp.Body)
		}
		after := reviewsOf(d.ID)[alvara[3]]
		if len(after) != 1 || after[0].Kind != "review" || after[0].Role != "attendant" || after[0].Follows != approval[0].ID ||
			after[0].Agent == nil || after[0].Agent.Outcome != "REQUIRE_APPROVAL" {
			t.Errorf("after the approval: %+v, want the reaction's review of the request, following it, with the agent's record", after)
		}
	})

	t.Run("the model answering garbage: nothing acts, every request gets a human review", func(t *testing.T) {
		g := changed("feira") // 3 requests: under the limit, run at once
		gd := done(g)
		if gd.Outcome != "ALLOW" || gd.Job.Done != 3 || len(gd.Job.Outcomes) != 1 || gd.Job.Outcomes["REQUIRE_HUMAN_REVIEW"] != 3 {
			t.Fatalf("decision %+v (job %+v), want 3 requests, every one REQUIRE_HUMAN_REVIEW", gd, gd.Job)
		}
		got := reviewsOf(gd.ID)
		for i, id := range feira {
			r := got[id]
			if len(r) != 1 || r[0].Kind != "review" || r[0].Agent == nil || r[0].Agent.Outcome != "REQUIRE_HUMAN_REVIEW" ||
				!strings.Contains(r[0].Agent.Failure, "invalid output") || !strings.Contains(r[0].Note, "the agent did not decide") {
				t.Errorf("request %d: %+v, want a human review saying the output was invalid", i, r)
			}
		}
		if calls, _ := asked(feira); calls != 3 {
			t.Errorf("%d model calls for 3 requests, want 3", calls)
		}
	})
}
