package main

import (
	"net/http"
	"strconv"
	"testing"
)

// TestSubmissionsAreLimitedPerTenant: a tenant past its burst is refused
// with 429, a Retry-After and a problem, while another tenant submits as
// usual; an overridden tenant has its own rate.
func TestSubmissionsAreLimitedPerTenant(t *testing.T) {
	s := start(t, map[string]string{"SUBMIT_RATE_PER_TENANT": "0.5", "SUBMIT_BURST_PER_TENANT": "2",
		"SUBMIT_RATE_OVERRIDES": "org-big=50"})
	a := s.Token(t, "org-a", "citizen-a", "citizen")
	mustSubmit(t, s, a)
	mustSubmit(t, s, a)
	resp := s.submit(t, a, validBody, "")
	expectProblem(t, resp, http.StatusTooManyRequests)
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 2 {
		t.Errorf("Retry-After = %q, want the 1-2 s until org-a's next token", resp.Header.Get("Retry-After"))
	}
	mustSubmit(t, s, s.Token(t, "org-b", "citizen-b", "citizen"))
	big := s.Token(t, "org-big", "citizen-c", "citizen")
	for range 10 {
		mustSubmit(t, s, big)
	}
}

func TestSubmitRateConfiguration(t *testing.T) {
	ok := map[string]string{"SUBMIT_RATE_PER_TENANT": "5", "SUBMIT_RATE_OVERRIDES": "org-a=50, org-b=1"}
	c, err := loadConfig(func(k string) string { return ok[k] })
	if err != nil || c.SubmitRate != 5 || c.SubmitBurst != 10 || c.SubmitRates["org-a"] != 50 || c.SubmitRates["org-b"] != 1 {
		t.Fatalf("loadConfig(%v) = %+v, %v; want 5/s, burst 10, two overrides", ok, c, err)
	}
	for _, tc := range []map[string]string{
		{"SUBMIT_RATE_PER_TENANT": "-1"},
		{"SUBMIT_RATE_PER_TENANT": "5", "SUBMIT_BURST_PER_TENANT": "0"},
		{"SUBMIT_RATE_PER_TENANT": "5", "SUBMIT_RATE_OVERRIDES": "org-a"},
		{"SUBMIT_RATE_OVERRIDES": "org-a=5"},
	} {
		if _, err := loadConfig(func(k string) string { return tc[k] }); err == nil {
			t.Errorf("loadConfig(%v) accepted", tc)
		}
	}
}
