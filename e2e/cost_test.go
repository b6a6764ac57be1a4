package e2e

import (
	"strings"
	"testing"
)

// The request-flow benchmark's cost line: CPU split by role, and the
// ceiling the platform's share puts on the box.
func TestCostPerRequest(t *testing.T) {
	before := costSample{cpu: map[string]float64{"postgres": 1, "beam.smp": 1, "e2e.test": 1, "kworker/0:1": 0}}
	// 100 requests: postgres 1.0 s, broker 0.5 s, request 0.5 s (platform
	// 20 ms per request), the client 0.2 s, a kernel thread 0.1 s.
	after := costSample{cpu: map[string]float64{"postgres": 2, "beam.smp": 1.5, "request": 0.5, "e2e.test": 1.2, "kworker/0:1": 0.1},
		commits: 300, walSyncs: 150, published: 500, delivered: 1100}
	for _, tc := range []struct {
		name  string
		n     int
		cores int
		want  []string
	}{
		{"two cores", 100, 2, []string{"per request: CPU 23.0 ms (platform 20.0, at most 100 req/s on 2 cores; benchmark client and SMTP sink 2.0, other 1.0;",
			"postgres 10.00, beam.smp 5.00, request 5.00, e2e.test 2.00, kworker/0:1 1.00",
			"PostgreSQL commits 3.0, WAL flushes 1.5; broker publishes 5.0, deliveries 11.0"}},
		{"eight cores", 100, 8, []string{"platform 20.0, at most 400 req/s on 8 cores;"}},
		{"no requests", 0, 2, []string{"no requests"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := costPerRequest(before, after, tc.n, tc.cores)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("costPerRequest = %q\nwant it to contain %q", got, w)
				}
			}
		})
	}
}

// The quiet premium compares the slowest step's platform cost with the
// fastest's, whatever the order of the steps.
func TestQuietPremium(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []stepResult
		want  string
		x     float64
	}{
		{"quiet costs twice", []stepResult{{rate: 100, platformMs: 20}, {rate: 25, platformMs: 40}},
			"40.0 ms of platform CPU per request at 25 req/s, 2.00× the 20.0 ms at 100 req/s", 2},
		{"one rate", []stepResult{{rate: 50, platformMs: 30}, {rate: 50, platformMs: 31}}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, x := quietPremium(tc.steps)
			if x != tc.x || !strings.Contains(line, tc.want) || (tc.want == "") != (line == "") {
				t.Errorf("quietPremium = %q, %v; want %q, %v", line, x, tc.want, tc.x)
			}
		})
	}
}
