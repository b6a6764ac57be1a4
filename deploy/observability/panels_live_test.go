//go:build containers

package observability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/agora-platform/agora/deploy/observability"
)

// Panels the e2e traffic may leave empty by design, with the reason; the check fails
// on any other empty panel. None today: the document flow's corrupt file fails its
// handler permanently and is dead-lettered, which creates the failure and
// dead-letter series; a zero rate of a series that exists, and the depth of an empty
// queue, are data (a NaN is not: see below).
var panelsMayBeEmpty = map[string]string{}

// The checks need a running compose stack: build tag containers, never part of
// `make test`. deploy/compose/compose-test.sh runs them after the e2e suites, in this
// order:
//
//  1. TestPrometheusScrapedEveryTarget, after the first run of the suites: the series
//     that traffic created are in Prometheus;
//  2. the suites again;
//  3. TestDashboardPanelsHaveData.
//
// The second run is needed because rate() never counts a series' first sample: a
// counter or histogram series born in a burst of traffic shorter than a scrape
// interval (the suites take seconds, as `make demo` does) holds its final value from
// its first scrape on, so its rate is 0, and a quantile or a ratio of such rates is
// NaN, which Grafana draws as nothing. Traffic on series Prometheus already holds
// makes those panels show data, as any continuing traffic does.

// TestPrometheusScrapedEveryTarget waits until the Prometheus at PROMETHEUS_URL is
// ready and has scraped every target of deploy/compose/prometheus.yml successfully
// since the test began.
func TestPrometheusScrapedEveryTarget(t *testing.T) {
	base := prometheusURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitScraped(t, ctx, &http.Client{Timeout: 10 * time.Second}, base)
}

// TestDashboardPanelsHaveData puts every panel query of the dashboard to the
// Prometheus at PROMETHEUS_URL, once it has scraped every target since the test
// began, and fails naming each panel whose queries all come back without a value:
// what Grafana would draw for it.
func TestDashboardPanelsHaveData(t *testing.T) {
	base := prometheusURL(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	waitScraped(t, ctx, client, base)

	// Every panel has data; series appear within a scrape or two of their first
	// observation, so an empty panel is retried until the deadline.
	var last []observability.PanelData
	ok := pollDeadline(ctx, 2*time.Minute, func() bool {
		var err error
		last, err = observability.QueryPanels(ctx, client, base, observability.Dashboard)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range last {
			if p.Err != nil {
				// Bad PromQL or a failed query: waiting does not fix it.
				return true
			}
		}
		return len(emptyPanels(last)) == 0
	})
	for _, p := range last {
		t.Logf("panel %q: series with a value per query %v", p.Title, p.Series)
	}
	for _, p := range last {
		if p.Err != nil {
			t.Errorf("panel %q: %v", p.Title, p.Err)
		}
	}
	for _, p := range emptyPanels(last) {
		t.Errorf("panel %q shows no data: none of its queries returned a series with a value", p.Title)
	}
	for title, why := range panelsMayBeEmpty {
		if !slices.ContainsFunc(last, func(p observability.PanelData) bool { return p.Title == title }) {
			t.Errorf("panelsMayBeEmpty names %q, which the dashboard has no longer", title)
			continue
		}
		t.Logf("panel %q may be empty: %s", title, why)
	}
	if ok {
		t.Logf("%d panels checked in %s", len(last), time.Since(start).Round(time.Second))
	}
}

// prometheusURL is PROMETHEUS_URL, which compose-test.sh sets; without it the
// test fails.
func prometheusURL(t *testing.T) string {
	t.Helper()
	base := strings.TrimRight(os.Getenv("PROMETHEUS_URL"), "/")
	if base == "" {
		t.Fatal("PROMETHEUS_URL is not set: this check needs the compose stack's Prometheus " +
			"(deploy/compose/compose-test.sh sets it after the e2e suites)")
	}
	return base
}

// waitScraped waits until Prometheus answers and every target of
// deploy/compose/prometheus.yml is up and was scraped after the call began.
func waitScraped(t *testing.T, ctx context.Context, client *http.Client, base string) {
	t.Helper()
	start := time.Now()
	poll(t, ctx, time.Minute, "Prometheus at "+base+" ready (/-/ready)", func() (bool, string) {
		resp, err := client.Get(base + "/-/ready")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	want := composeTargets(t)
	poll(t, ctx, 2*time.Minute, fmt.Sprintf("each of the %d targets of deploy/compose/prometheus.yml scraped successfully after %s", len(want), start.Format(time.RFC3339)), func() (bool, string) {
		got, err := activeTargets(ctx, client, base)
		if err != nil {
			return false, err.Error()
		}
		var waiting []string
		for _, key := range want {
			tg, ok := got[key]
			switch {
			case !ok:
				waiting = append(waiting, key+": not an active target")
			case tg.Health != "up":
				waiting = append(waiting, fmt.Sprintf("%s: %s %s", key, tg.Health, tg.LastError))
			case !tg.LastScrape.After(start):
				waiting = append(waiting, key+": last scraped "+tg.LastScrape.Format(time.RFC3339))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; ")
	})
	t.Logf("all %d targets up and scraped within %s: %v", len(want), time.Since(start).Round(time.Second), want)
}

// emptyPanels are the panels without data that panelsMayBeEmpty does not excuse.
func emptyPanels(ps []observability.PanelData) []observability.PanelData {
	var out []observability.PanelData
	for _, p := range ps {
		if _, excused := panelsMayBeEmpty[p.Title]; p.Err == nil && p.Empty() && !excused {
			out = append(out, p)
		}
	}
	return out
}

// composeTargets lists "job/address" of every static target deploy/compose/prometheus.yml scrapes.
func composeTargets(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../compose/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("../compose/prometheus.yml: %v", err)
	}
	var out []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, a := range st.Targets {
				out = append(out, sc.JobName+"/"+a)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("../compose/prometheus.yml scrapes no static target")
	}
	return out
}

type target struct {
	Health     string    `json:"health"`
	LastError  string    `json:"lastError"`
	LastScrape time.Time `json:"lastScrape"`
}

// activeTargets reads /api/v1/targets, keyed "job/instance".
func activeTargets(ctx context.Context, client *http.Client, base string) (map[string]target, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/targets?state=active", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ActiveTargets []struct {
				target
				Labels map[string]string `json:"labels"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		return nil, fmt.Errorf("/api/v1/targets: HTTP %d, status %q, %v", resp.StatusCode, r.Status, err)
	}
	out := map[string]target{}
	for _, a := range r.Data.ActiveTargets {
		out[a.Labels["job"]+"/"+a.Labels["instance"]] = a.target
	}
	return out, nil
}

// poll calls cond every second until it holds, failing the test with what cond
// said last when timeout or ctx runs out.
func poll(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var said string
	if !pollDeadline(ctx, timeout, func() bool {
		var ok bool
		ok, said = cond()
		return ok
	}) {
		t.Fatalf("waited %s for %s: %s", timeout, what, said)
	}
}

// pollDeadline calls cond every second until it holds (true) or timeout or ctx
// runs out (false).
func pollDeadline(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
