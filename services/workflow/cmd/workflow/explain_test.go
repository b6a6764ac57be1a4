package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestExplainSaysWhatHappens asks "what happens when document.validated.v1
// comes?" of the running service: the platform's queues that receive it
// (the reactions queue and the lake's, from the catalog), the process
// step that waits for it, for every tenant; and the tenant's active
// subscriptions only (TestSubscriptionLifecycle checks an active one and
// its policy).
func TestExplainSaysWhatHappens(t *testing.T) {
	p := newPlatform(t)
	url := p.start(t, nil)
	author := p.Token(t, "org-a", "ana", "attendant")
	other := p.Token(t, "org-b", "bruno", "operator")
	resp := do(t, http.MethodPost, url+"/v1/subscriptions", author, strings.NewReader(`{"name":"identity check",
		"eventTypes":["document.validated.v1"],"filter":"","policy":{"default":"REQUIRE_HUMAN_REVIEW"},
		"reaction":{"kind":"review-task","role":"attendant"}}`), map[string]string{"Content-Type": "application/json"})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create subscription = %d %s", resp.Status, resp.Body)
	}
	type answer struct {
		Consumers    []string `json:"consumers"`
		WaitingSteps []struct {
			Definition, Step string
		} `json:"waitingSteps"`
		Subscriptions []struct {
			ID string `json:"id"`
		} `json:"subscriptions"`
	}
	explain := func(token string) answer {
		t.Helper()
		resp := do(t, http.MethodGet, url+"/v1/explain/document.validated.v1", token, nil, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("explain = %d %s", resp.Status, resp.Body)
		}
		var a answer
		resp.JSON(t, &a)
		return a
	}
	for _, token := range []string{author, other} {
		a := explain(token)
		for _, q := range []string{"workflow/workflow.reactions", "datalake-ingestion/datalake.platform-events"} {
			if !slices.Contains(a.Consumers, q) {
				t.Errorf("consumers %v: %s missing", a.Consumers, q)
			}
		}
		if len(a.WaitingSteps) != 1 || a.WaitingSteps[0].Definition != "document-verification" || a.WaitingSteps[0].Step != "document-check" {
			t.Errorf("waiting steps = %+v, want document-verification's document-check", a.WaitingSteps)
		}
	}
	// A draft is not active: it does not react, so explain does not list
	// it; the author's tenant sees it once active, the other never.
	if a := explain(author); len(a.Subscriptions) != 0 {
		t.Errorf("a draft is listed: %+v", a.Subscriptions)
	}
	if a := explain(other); len(a.Subscriptions) != 0 {
		t.Errorf("tenant B sees %d of A's subscriptions", len(a.Subscriptions))
	}
}
