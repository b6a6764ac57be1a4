package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-platform/agora/deploy/deploytest"
)

type subVersion struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	State   string `json:"state"`
	Filter  string `json:"filter"`
}

// activate creates a subscription from body as author and takes version 1
// through VALIDATING and APPROVED to ACTIVE as approver, returning its id.
func activate(t *testing.T, url, author, approver, body string) string {
	t.Helper()
	post := func(token, path, body string) deploytest.Response {
		return do(t, http.MethodPost, url+path, token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	}
	resp := post(author, "/v1/subscriptions", body)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create subscription = %d %s", resp.Status, resp.Body)
	}
	var v subVersion
	resp.JSON(t, &v)
	for _, to := range []string{"VALIDATING", "APPROVED", "ACTIVE"} {
		if resp := post(approver, "/v1/subscriptions/"+v.ID+"/versions/1/transitions", `{"to":"`+to+`","reason":"test"}`); resp.Status != http.StatusOK {
			t.Fatalf("subscription → %s = %d %s", to, resp.Status, resp.Body)
		}
	}
	return v.ID
}

// TestSubscriptionLifecycle drives a subscription through its lifecycle
// as two tenants' staff: creation and validation of the filter against
// the event's schema, the four-eyes approval, activation, a second
// version, rollback, the audit, explain, and tenant B seeing and touching
// nothing of A's.
func TestSubscriptionLifecycle(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	author := p.Token(t, "org-a", "ana", "attendant")
	approver := p.Token(t, "org-a", "olga", "operator")
	other := p.Token(t, "org-b", "bruno", "operator")
	post := func(token, path, body string) deploytest.Response {
		return do(t, http.MethodPost, url+path, token, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
	}
	spec := func(filter string) string {
		return `{"name":"stuck triage","eventTypes":["workflow.stuck.v1"],"filter":` + filter + `,
			"policy":{"default":"REQUIRE_HUMAN_REVIEW","rules":[{"when":"payload.stuckAfterSeconds > 86400","outcome":"REQUIRE_APPROVAL"}]},
			"reaction":{"kind":"review-task","role":"operator"}}`
	}

	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", spec(`"payload.stpe == \"triage\""`), "no payload field stpe"},
		{"not a bool", spec(`"payload.step"`), "want a bool"},
		{"a command", strings.Replace(spec(`""`), "workflow.stuck.v1", "workflow.start.v1", 1), "subscriptions react to events"},
		{"bad outcome", strings.Replace(spec(`""`), "REQUIRE_HUMAN_REVIEW", "MAYBE", 1), "policy.default"},
		{"bad rule", strings.Replace(spec(`""`), "payload.stuckAfterSeconds > 86400", "payload.nope", 1), "policy.rules[0].when"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(author, "/v1/subscriptions", tc.body)
			expectProblem(t, resp, http.StatusUnprocessableEntity)
			if !strings.Contains(string(resp.Body), tc.want) {
				t.Errorf("problem %s does not name %q", resp.Body, tc.want)
			}
		})
	}

	resp := post(author, "/v1/subscriptions", spec(`"payload.step == \"triage\""`))
	if resp.Status != http.StatusCreated {
		t.Fatalf("create = %d %s", resp.Status, resp.Body)
	}
	var v1 subVersion
	resp.JSON(t, &v1)
	if v1.Version != 1 || v1.State != "DRAFT" {
		t.Fatalf("created %+v, want version 1 in DRAFT", v1)
	}
	move := func(token string, version int, to, reason string) deploytest.Response {
		return post(token, "/v1/subscriptions/"+v1.ID+"/versions/"+strconv.Itoa(version)+"/transitions", `{"to":"`+to+`","reason":"`+reason+`"}`)
	}
	expectProblem(t, move(author, 1, "ACTIVE", "skip the checks"), http.StatusConflict)
	expectProblem(t, move(author, 1, "VALIDATING", ""), http.StatusUnprocessableEntity)
	expectProblem(t, move(other, 1, "VALIDATING", "not mine"), http.StatusNotFound)
	for _, step := range []struct {
		token, to string
		want      int
	}{
		{author, "VALIDATING", http.StatusOK},
		{author, "APPROVED", http.StatusForbidden}, // its author, and not an operator
		{approver, "APPROVED", http.StatusOK},      // four eyes
		{approver, "ACTIVE", http.StatusOK},
	} {
		if resp := move(step.token, 1, step.to, "reviewed"); resp.Status != step.want {
			t.Fatalf("v1 → %s = %d %s, want %d", step.to, resp.Status, resp.Body, step.want)
		}
	}

	// Explain: the tenant's active subscription, with what it may emit;
	// the other tenant sees the type and none of A's subscriptions.
	var ex struct {
		Definition struct {
			Type string `json:"type"`
		} `json:"definition"`
		Subscriptions []struct {
			ID     string   `json:"id"`
			Filter string   `json:"filter"`
			Emits  []string `json:"emits"`
			Policy struct {
				Default string `json:"default"`
			} `json:"policy"`
		} `json:"subscriptions"`
	}
	do(t, http.MethodGet, url+"/v1/explain/workflow.stuck.v1", author, nil, nil).JSON(t, &ex)
	if ex.Definition.Type != "workflow.stuck.v1" || len(ex.Subscriptions) != 1 || ex.Subscriptions[0].ID != v1.ID || len(ex.Subscriptions[0].Emits) == 0 ||
		ex.Subscriptions[0].Policy.Default != "REQUIRE_HUMAN_REVIEW" {
		t.Errorf("explain = %+v, want A's active subscription, its policy and what it emits", ex)
	}
	do(t, http.MethodGet, url+"/v1/explain/workflow.stuck.v1", other, nil, nil).JSON(t, &ex)
	if len(ex.Subscriptions) != 0 {
		t.Errorf("tenant B's explain lists %d of A's subscriptions", len(ex.Subscriptions))
	}
	expectProblem(t, do(t, http.MethodGet, url+"/v1/subscriptions/"+v1.ID, other, nil, nil), http.StatusNotFound)
	expectProblem(t, do(t, http.MethodGet, url+"/v1/explain/nothing.v1", author, nil, nil), http.StatusNotFound)

	// Version 2 replaces version 1; rollback brings version 1 back.
	resp = post(author, "/v1/subscriptions/"+v1.ID+"/versions", spec(`"payload.step in [\"triage\", \"review\"]"`))
	var v2 subVersion
	resp.JSON(t, &v2)
	if resp.Status != http.StatusCreated || v2.Version != 2 || v2.State != "DRAFT" {
		t.Fatalf("new version = %d %s", resp.Status, resp.Body)
	}
	for _, to := range []string{"VALIDATING", "APPROVED", "ACTIVE"} {
		if resp := move(approver, 2, to, "wider filter"); resp.Status != http.StatusOK {
			t.Fatalf("v2 → %s = %d %s", to, resp.Status, resp.Body)
		}
	}
	var hist struct {
		Versions    []subVersion `json:"versions"`
		Transitions []struct {
			Version       int
			From, To      string
			Actor, Reason string
		} `json:"transitions"`
	}
	do(t, http.MethodGet, url+"/v1/subscriptions/"+v1.ID, author, nil, nil).JSON(t, &hist)
	if len(hist.Versions) != 2 || hist.Versions[0].State != "DISABLED" || hist.Versions[1].State != "ACTIVE" {
		t.Fatalf("after activating v2: %+v, want v1 DISABLED and v2 ACTIVE", hist.Versions)
	}
	resp = post(approver, "/v1/subscriptions/"+v1.ID+"/rollback", `{"reason":"v2 matched too much"}`)
	var back subVersion
	resp.JSON(t, &back)
	if resp.Status != http.StatusOK || back.Version != 1 || back.State != "ACTIVE" {
		t.Fatalf("rollback = %d %s, want version 1 active", resp.Status, resp.Body)
	}
	do(t, http.MethodGet, url+"/v1/subscriptions/"+v1.ID, author, nil, nil).JSON(t, &hist)
	if hist.Versions[1].State != "DISABLED" {
		t.Errorf("after rollback v2 is %s, want DISABLED", hist.Versions[1].State)
	}
	// Each version: created and 3 moves; v1 disabled by v2's activation;
	// the rollback: v2 disabled, v1 active. Refused moves leave no row.
	if len(hist.Transitions) != 11 {
		t.Errorf("%d audited transitions, want 11: %+v", len(hist.Transitions), hist.Transitions)
	}
	last := hist.Transitions[len(hist.Transitions)-1]
	if last.Version != 1 || last.To != "ACTIVE" || last.Actor != "olga" || !strings.Contains(last.Reason, "v2 matched too much") {
		t.Errorf("last transition %+v, want olga's rollback of version 1", last)
	}
	expectProblem(t, post(other, "/v1/subscriptions/"+v1.ID+"/rollback", `{"reason":"x"}`), http.StatusNotFound)
	var listB []subVersion
	do(t, http.MethodGet, url+"/v1/subscriptions", other, nil, nil).JSON(t, &listB)
	if len(listB) != 0 {
		t.Errorf("tenant B lists %d subscriptions", len(listB))
	}
}
