package observability_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agora-platform/agora/deploy/observability"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		name      string
		rules     string
		dashboard string
		want      []string
		wantErr   string
	}{
		{
			name: "selectors inside functions, ranges, offsets and binary operators",
			rules: `groups:
  - name: g
    rules:
      - alert: A
        expr: |
          sum by (consumer) (rate(a_total[5m])) / sum by (consumer) (rate(b_total[5m] offset 1h)) > 0
          or histogram_quantile(0.9, sum by (le) (rate(c_seconds_bucket[5m])))
          unless on (job) up`,
			want: []string{"a_total", "b_total", "c_seconds_bucket", "up"},
		},
		{
			name: "name given by a __name__ matcher; subquery",
			rules: `groups:
  - name: g
    rules:
      - alert: A
        expr: max_over_time({__name__="d_depth", consumer="q"}[10m:1m]) > 1`,
			want: []string{"d_depth"},
		},
		{
			name: "series a rule records are not emitted by anyone else",
			rules: `groups:
  - name: g
    rules:
      - record: consumer:failed:rate5m
        expr: sum by (consumer) (rate(failed_total[5m]))
      - alert: A
        expr: consumer:failed:rate5m > 1`,
			want: []string{"failed_total"},
		},
		{
			name: "dashboard targets, rows' panels and Grafana's range macros",
			dashboard: `{"panels": [
  {"title": "p1", "targets": [{"refId": "A", "expr": "rate(x_total[$__rate_interval])"}, {"refId": "B", "expr": ""}]},
  {"title": "row", "type": "row", "panels": [{"title": "p2", "targets": [{"refId": "A", "expr": "y_gauge"}]}]},
  {"title": "text panel"}
]}`,
			want: []string{"x_total", "y_gauge"},
		},
		{
			name:      "rules and dashboard together, each name once",
			rules:     "groups: [{name: g, rules: [{alert: A, expr: 'z > 0'}]}]",
			dashboard: `{"panels": [{"title": "p", "targets": [{"refId": "A", "expr": "z + w"}]}]}`,
			want:      []string{"w", "z"},
		},
		{
			name:    "a regular expression on the name cannot be checked",
			rules:   "groups: [{name: g, rules: [{alert: A, expr: '{__name__=~\"fabric_.*\"} > 0'}]}]",
			wantErr: `rule A: selector {__name__=~"fabric_.*"}: metric name matched by =~`,
		},
		{
			name:    "an expression that does not parse names its rule",
			rules:   "groups: [{name: g, rules: [{alert: Broken, expr: 'sum by (x) (rate(a[5m])'}]}]",
			wantErr: "group g, rule Broken: parse",
		},
		{
			name:      "a panel query that does not parse names its panel",
			dashboard: `{"panels": [{"title": "HTTP", "targets": [{"refId": "A", "expr": "rate(x[$custom])"}]}]}`,
			wantErr:   `dashboard panel "HTTP", query A: parse`,
		},
		{
			name:    "a rule file that is not YAML",
			rules:   "groups: [",
			wantErr: "rule file",
		},
		{
			name:      "a dashboard that is not JSON",
			dashboard: "{",
			wantErr:   "dashboard",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules, dashboard []byte
			if tt.rules != "" {
				rules = []byte(tt.rules)
			}
			if tt.dashboard != "" {
				dashboard = []byte(tt.dashboard)
			}
			got, err := observability.MetricNames(rules, dashboard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("MetricNames = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseExposition(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []string
		wantErr bool
	}{
		{
			name: "counter, gauge and histogram as the OTel exporter writes them",
			body: `# HELP fabric_consumer_processed_total Messages handled successfully and acked.
# TYPE fabric_consumer_processed_total counter
fabric_consumer_processed_total{consumer="q",otel_scope_name="s",type="t"} 1
# HELP fabric_consumer_queue_depth Messages ready.
# TYPE fabric_consumer_queue_depth gauge
fabric_consumer_queue_depth{consumer="q"} 0
# HELP fabric_consumer_lag_seconds Age.
# TYPE fabric_consumer_lag_seconds histogram
fabric_consumer_lag_seconds_bucket{consumer="q",le="5"} 1
fabric_consumer_lag_seconds_bucket{consumer="q",le="+Inf"} 1
fabric_consumer_lag_seconds_sum{consumer="q"} 0.5
fabric_consumer_lag_seconds_count{consumer="q"} 1
`,
			want: []string{"fabric_consumer_lag_seconds_bucket", "fabric_consumer_lag_seconds_count", "fabric_consumer_lag_seconds_sum",
				"fabric_consumer_processed_total", "fabric_consumer_queue_depth"},
		},
		{
			name: "summary and untyped series",
			body: `# TYPE rpc_seconds summary
rpc_seconds{quantile="0.5"} 1
rpc_seconds_sum 3
rpc_seconds_count 2
rabbitmq_queues 12
`,
			want: []string{"rabbitmq_queues", "rpc_seconds", "rpc_seconds_count", "rpc_seconds_sum"},
		},
		{
			name: "a family declared without samples has no series",
			body: `# HELP fabric_consumer_failed_total Handler failures.
# TYPE fabric_consumer_failed_total counter
`,
			want: nil,
		},
		{
			name:    "not the text format",
			body:    "fabric_consumer_processed_total{consumer=\"q\" 1\n",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := observability.ParseExposition(strings.NewReader(tt.body))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error, names %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if names := sorted(got); !slices.Equal(names, tt.want) {
				t.Errorf("names = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	tests := []struct {
		name    string
		used    []string
		scraped map[string]bool
		want    []string
	}{
		{"all there", []string{"a", "b"}, map[string]bool{"a": true, "b": true, "c": true}, nil},
		{"sorted, each once", []string{"c", "a", "c", "b"}, map[string]bool{"b": true}, []string{"a", "c"}},
		{"nothing scraped", []string{"a"}, nil, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := observability.Missing(tt.used, tt.scraped); !slices.Equal(got, tt.want) {
				t.Errorf("Missing = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	used := []string{
		"fabric_consumer_processed_total",            // scraped
		"fabric_consumer_dead_lettered_total",        // registered, no dead letter yet
		"rabbitmq_queue_consumers",                   // the broker's
		"up",                                         // Prometheus's
		"http_server_request_duration_seconds_count", // nobody's
	}
	rep, err := observability.Check(used, map[string]bool{"fabric_consumer_processed_total": true})
	if err != nil {
		t.Fatal(err)
	}
	want := observability.Report{
		Unregistered: []string{"http_server_request_duration_seconds_count"},
		NoSample:     []string{"fabric_consumer_dead_lettered_total"},
		Elsewhere:    []string{"rabbitmq_queue_consumers", "up"},
	}
	if !slices.Equal(rep.Unregistered, want.Unregistered) || !slices.Equal(rep.NoSample, want.NoSample) || !slices.Equal(rep.Elsewhere, want.Elsewhere) {
		t.Errorf("Check = %+v, want %+v", rep, want)
	}
}

// FabricMetrics must hold every instrument pkg/fabric registers, under the
// exporter's names: a counter with _total, histograms in three series, units as
// suffixes, and the gauge and retention counter created outside NewMetrics.
func TestFabricMetrics(t *testing.T) {
	got, err := observability.FabricMetrics()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"fabric_consumer_batch_retried_total",
		"fabric_consumer_batch_size_bucket", "fabric_consumer_batch_size_count", "fabric_consumer_batch_size_sum",
		"fabric_consumer_dead_lettered_total", "fabric_consumer_duplicates_total",
		"fabric_consumer_duration_seconds_bucket", "fabric_consumer_duration_seconds_count", "fabric_consumer_duration_seconds_sum",
		"fabric_consumer_failed_total",
		"fabric_consumer_lag_seconds_bucket", "fabric_consumer_lag_seconds_count", "fabric_consumer_lag_seconds_sum",
		"fabric_consumer_outage_waits_total",
		"fabric_consumer_pace_wait_seconds_bucket", "fabric_consumer_pace_wait_seconds_count", "fabric_consumer_pace_wait_seconds_sum",
		"fabric_consumer_processed_total", "fabric_consumer_queue_depth", "fabric_consumer_retried_total",
		"fabric_consumer_retry_depth",
		"fabric_operator_mass_action_items_total",
		"fabric_publisher_confirmed_total", "fabric_publisher_failed_total",
		"fabric_ratelimit_throttled_total",
		"fabric_retention_rows_deleted_total",
		"fabric_security_authorization_failures_total", "fabric_security_capability_refused_total",
		"fabric_security_cross_tenant_total", "fabric_security_repeated_authorization_failures_total",
	}
	if names := sorted(got); !slices.Equal(names, want) {
		t.Errorf("FabricMetrics =\n%v\nwant\n%v", names, want)
	}
}

// The shipped rules and dashboard query only names that something emits: the
// fabric (as registered), RabbitMQ's plugin or Prometheus. A live scrape in the
// e2e adds what this cannot see (a service's own instruments).
func TestShippedRulesAndDashboardUseEmittedNames(t *testing.T) {
	used, err := observability.MetricNames(observability.Rules, observability.Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatal("no metric names found in the rules and dashboard")
	}
	fabric, err := observability.FabricMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range used {
		if !fabric[n] && !observability.BrokerMetrics[n] && !observability.PrometheusMetrics[n] {
			t.Errorf("%s is queried but emitted by neither the fabric, RabbitMQ's prometheus plugin nor Prometheus", n)
		}
	}
	t.Logf("%d names checked: %v", len(used), used)
}

// Every alert carries what an operator needs: a severity the routing knows, a
// summary and description, and a runbook section that exists.
func TestAlertsAreDocumented(t *testing.T) {
	f, err := observability.ParseRules(observability.Rules)
	if err != nil {
		t.Fatal(err)
	}
	runbooks, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(string(runbooks), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	const base = "https://github.com/agora-platform/agora/blob/main/docs/runbooks.md#"
	alerts := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[strings.ToLower(r.Alert)] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			anchor := strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != base+anchor {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, base+anchor)
			}
			if !sections[anchor] {
				t.Errorf("%s: docs/runbooks.md has no section '## %s'", r.Alert, r.Alert)
			}
		}
	}
	for s := range sections {
		if !alerts[s] {
			t.Errorf("docs/runbooks.md: section %q is no alert's", s)
		}
	}
}

// The chart cannot read outside its directory: gendeploy copies the rules and the
// dashboard into its files/, and the copies must not drift.
func TestChartCopiesMatch(t *testing.T) {
	for path, want := range map[string][]byte{
		"../helm/agora/files/alerts.yml":               observability.ChartRules(),
		"../helm/agora/files/dashboards/platform.json": observability.Dashboard,
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (generate it: go run ./deploy/cmd/gendeploy)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s drifted from deploy/observability: run `go run ./deploy/cmd/gendeploy` and commit", path)
		}
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("# TYPE a_total counter\na_total 1\n"))
	}))
	defer srv.Close()
	into := map[string]bool{"b": true}
	if err := observability.Scrape(context.Background(), nil, srv.URL+"/metrics", into); err != nil {
		t.Fatal(err)
	}
	if !into["a_total"] || !into["b"] {
		t.Errorf("after Scrape: %v, want a_total added to b", into)
	}
	if err := observability.Scrape(context.Background(), srv.Client(), srv.URL+"/nothing", into); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("Scrape of a 404: %v, want an error naming HTTP 404", err)
	}
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
