package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
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

// TestDefaultLimitKeepsOneTenantsFloodFromAnother: with no limit configured
// (the service's default, what make up, compose and the chart run), a
// tenant flooding POST /v1/requests is refused with 429, a Retry-After and
// a problem, and gets through no more than its bucket admits, while
// another tenant submitting at half the rate during the flood is never
// refused. Latency under the flood is BenchmarkTenantFairness's (e2e).
func TestDefaultLimitKeepsOneTenantsFloodFromAnother(t *testing.T) {
	def, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, nil)
	noisy, quiet := s.Token(t, "org-noisy", "citizen-a", "citizen"), s.Token(t, "org-quiet", "citizen-b", "citizen")

	// The flood: sixteen callers, up to 200 submissions a second between
	// them (past the rate even if each call took 800 ms), until told to
	// stop.
	var (
		mu                 sync.Mutex
		accepted, refused  int
		badRefusals, other []string
	)
	firstRefusal, stop := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var flood sync.WaitGroup
	began := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range 16 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				resp := s.submit(t, noisy, validBody, "")
				mu.Lock()
				switch resp.Status {
				case http.StatusCreated:
					accepted++
				case http.StatusTooManyRequests:
					refused++
					if msg := refusalProblem(resp.Header, resp.Body, def.SubmitRate); msg != "" && len(badRefusals) < 5 {
						badRefusals = append(badRefusals, msg)
					}
					once.Do(func() { close(firstRefusal) })
				default:
					if len(other) < 5 {
						other = append(other, fmt.Sprintf("%d %s", resp.Status, resp.Body))
					}
				}
				mu.Unlock()
			}
		}()
	}
	halt := func() time.Duration {
		close(stop)
		flood.Wait()
		return time.Since(began)
	}
	select {
	case <-firstRefusal:
	case <-time.After(20 * time.Second):
		halt()
		t.Fatalf("org-noisy flooded for 20 s, %d submissions accepted, none refused: no per-tenant limit by default", accepted)
	}

	// The quiet tenant, while the noisy one is being refused: 30
	// submissions at 10/s, half the default rate, so its own bucket never
	// empties whatever the noisy one does.
	var quietFailures []string
	pace := time.NewTicker(100 * time.Millisecond)
	for range 30 {
		<-pace.C
		if resp := s.submit(t, quiet, validBody, ""); resp.Status != http.StatusCreated {
			quietFailures = append(quietFailures, fmt.Sprintf("%d (Retry-After %q) %s", resp.Status, resp.Header.Get("Retry-After"), resp.Body))
		}
	}
	pace.Stop()
	elapsed := halt()

	if len(quietFailures) > 0 {
		t.Errorf("org-quiet, submitting at 10/s during org-noisy's flood, was answered %d times with other than 201: %v", len(quietFailures), quietFailures)
	}
	if len(other) > 0 {
		t.Errorf("org-noisy's flood answered other than 201 or 429: %v", other)
	}
	if len(badRefusals) > 0 {
		t.Errorf("org-noisy's refusals: %v", badRefusals)
	}
	// The bucket starts full (the burst) and refills at the rate: over
	// the flood it admits no more than that (one more for rounding).
	if most := def.SubmitBurst + int(def.SubmitRate*elapsed.Seconds()) + 1; accepted > most {
		t.Errorf("org-noisy got %d submissions through in %s, want at most %d (burst %d, %g/s)", accepted, elapsed.Round(time.Millisecond), most, def.SubmitBurst, def.SubmitRate)
	}
	t.Logf("org-noisy: %d accepted, %d refused in %s; org-quiet: 30 submitted, %d refused", accepted, refused, elapsed.Round(time.Millisecond), len(quietFailures))
}

// TestSubmissionCeilingRefusesEveryTenantPastIt: the platform-wide ceiling
// the deployments set on request.submitted.v1 (PUBLISH_RATE_PER_TYPE, a
// publish limit of the service's outbox) answers 429 with a Retry-After
// and a problem once all tenants together are past it, even a tenant
// well inside its own limit, and stores nothing for the refused call.
func TestSubmissionCeilingRefusesEveryTenantPastIt(t *testing.T) {
	// One token each 100 s, a burst of one: the second submission is over
	// it however slow the machine.
	s := start(t, map[string]string{"PUBLISH_RATE_PER_TYPE": "request.submitted.v1=0.01"})
	mustSubmit(t, s, s.Token(t, "org-a", "citizen-a", "citizen"))
	resp := s.submit(t, s.Token(t, "org-b", "citizen-b", "citizen"), validBody, "")
	if msg := refusalProblem(resp.Header, resp.Body, 0.01); resp.Status != http.StatusTooManyRequests || msg != "" {
		t.Fatalf("org-b's first submission past the ceiling = %d %s (%s), want a 429 problem with Retry-After", resp.Status, resp.Body, msg)
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM request WHERE tenant_id = 'org-b'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("org-b has %d requests stored (err %v), want 0: a refused submission stores nothing", n, err)
	}
}

// refusalProblem says what is wrong with a 429 (nothing: ""): it must
// carry a Retry-After of whole seconds no longer than one token takes at
// rate, and an RFC 9457 problem with its status.
func refusalProblem(h http.Header, body []byte, rate float64) string {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if most := max(1, int(math.Ceil(1/rate))); err != nil || secs < 1 || secs > most {
		return fmt.Sprintf("Retry-After %q, want 1 to %d s", h.Get("Retry-After"), most)
	}
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Sprintf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Status int    `json:"status"`
		Title  string `json:"title"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Status != http.StatusTooManyRequests || p.Title == "" {
		return fmt.Sprintf("problem %s, want status 429 and a title", body)
	}
	return ""
}

func TestSubmitRateConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		rate      float64
		burst     int
		overrides map[string]float64
	}{
		{"default: on", nil, defaultSubmitRate, 2 * defaultSubmitRate, nil},
		{"off", map[string]string{"SUBMIT_RATE_PER_TENANT": "0"}, 0, 1, nil},
		{"rate and overrides", map[string]string{"SUBMIT_RATE_PER_TENANT": "5", "SUBMIT_RATE_OVERRIDES": "org-a=50, org-b=1"}, 5, 10,
			map[string]float64{"org-a": 50, "org-b": 1}},
		{"overrides over the default rate", map[string]string{"SUBMIT_RATE_OVERRIDES": "org-a=500"}, defaultSubmitRate, 2 * defaultSubmitRate,
			map[string]float64{"org-a": 500}},
		{"burst", map[string]string{"SUBMIT_BURST_PER_TENANT": "7"}, defaultSubmitRate, 7, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(func(k string) string { return tc.env[k] })
			if err != nil || c.SubmitRate != tc.rate || c.SubmitBurst != tc.burst || !maps.Equal(c.SubmitRates, tc.overrides) {
				t.Fatalf("loadConfig(%v) = %g/s, burst %d, overrides %v, err %v; want %g/s, burst %d, overrides %v",
					tc.env, c.SubmitRate, c.SubmitBurst, c.SubmitRates, err, tc.rate, tc.burst, tc.overrides)
			}
		})
	}
	for _, tc := range []map[string]string{
		{"SUBMIT_RATE_PER_TENANT": "-1"},
		{"SUBMIT_RATE_PER_TENANT": "5", "SUBMIT_BURST_PER_TENANT": "0"},
		{"SUBMIT_RATE_PER_TENANT": "5", "SUBMIT_RATE_OVERRIDES": "org-a"},
		{"SUBMIT_RATE_PER_TENANT": "0", "SUBMIT_RATE_OVERRIDES": "org-a=5"},
	} {
		if _, err := loadConfig(func(k string) string { return tc[k] }); err == nil {
			t.Errorf("loadConfig(%v) accepted", tc)
		}
	}
}
