// Package observability holds the platform's Prometheus alert rules and Grafana
// dashboards (the files docker compose mounts and the Helm chart ships) and the
// check that keeps them honest: every metric name a rule or a panel queries must be
// one the platform emits.
//
// The names come from three places. The services' own (fabric_*) are whatever
// pkg/fabric registers, rendered by the OTel Prometheus exporter (FabricMetrics
// builds them the way a service does). RabbitMQ's come from its rabbitmq_prometheus
// plugin (BrokerMetrics), Prometheus's own per-target series from the scrape
// (PrometheusMetrics). A live scrape (ParseExposition, Scrape) shows only what has
// been observed: a counter is absent until its first increment. Check tells those
// names apart from names nothing registers.
package observability

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	dto "github.com/prometheus/client_model/go"
)

// Rules is alerts.yml, the Prometheus rule file.
//
//go:embed alerts.yml
var Rules []byte

// Dashboard is dashboards/platform.json, the Grafana dashboard.
//
//go:embed dashboards/platform.json
var Dashboard []byte

// RuleFile is the part of a Prometheus rule file the checks read.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting rule (Alert set) or a recording rule (Record set).
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Name is the alert's or the recorded series' name.
func (r Rule) Name() string { return r.Alert + r.Record }

// ParseRules decodes a Prometheus rule file.
func ParseRules(rulesYAML []byte) (RuleFile, error) {
	var f RuleFile
	if err := yaml.Unmarshal(rulesYAML, &f); err != nil {
		return f, fmt.Errorf("observability: rule file: %w", err)
	}
	return f, nil
}

// MetricNames returns the metric names, sorted and each once, that the rule file's
// expressions and the dashboard's panel queries select, less the series the rule
// file records itself. Names are series names as PromQL uses them
// (fabric_consumer_processed_total, fabric_consumer_lag_seconds_bucket). A query
// whose metric name is a regular expression, or that does not parse, is an error:
// its names cannot be checked. Either input may be nil.
func MetricNames(rulesYAML, dashboardJSON []byte) ([]string, error) {
	used := map[string]bool{}
	recorded := map[string]bool{}
	if rulesYAML != nil {
		f, err := ParseRules(rulesYAML)
		if err != nil {
			return nil, err
		}
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					recorded[r.Record] = true
				}
				if err := selectedNames(r.Expr, used); err != nil {
					return nil, fmt.Errorf("observability: group %s, rule %s: %w", g.Name, r.Name(), err)
				}
			}
		}
	}
	if dashboardJSON != nil {
		queries, err := dashboardQueries(dashboardJSON)
		if err != nil {
			return nil, err
		}
		for _, q := range queries {
			if err := selectedNames(q.Expr, used); err != nil {
				return nil, fmt.Errorf("observability: dashboard panel %q, query %s: %w", q.Panel, q.RefID, err)
			}
		}
	}
	var out []string
	for n := range used {
		if !recorded[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// grafanaMacroValues stand in for the range variables Grafana fills in at query
// time, so that a panel's query parses as PromQL and can be put to Prometheus.
var grafanaMacroValues = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// grafanaMacros replaces $name and ${name} of each of grafanaMacroValues.
var grafanaMacros = func() *strings.Replacer {
	var pairs []string
	for name, v := range grafanaMacroValues {
		pairs = append(pairs, "${"+name+"}", v, "$"+name, v)
	}
	return strings.NewReplacer(pairs...)
}()

// selectedNames adds the metric name of every selector in expr to into.
func selectedNames(expr string, into map[string]bool) error {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaMacros.Replace(expr))
	if err != nil {
		return fmt.Errorf("parse %q: %w", expr, err)
	}
	var errs []error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				continue
			}
			if m.Type.String() != "=" {
				errs = append(errs, fmt.Errorf("selector %s: metric name matched by %s, cannot be checked", vs, m.Type))
				continue
			}
			name = m.Value
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("selector %s has no metric name", vs))
			return nil
		}
		into[name] = true
		return nil
	})
	return errors.Join(errs...)
}

// Query is one PromQL query of a dashboard panel.
type Query struct {
	Panel, RefID, Expr string
}

type grafanaPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	// Rows keep their panels here while collapsed.
	Panels []grafanaPanel `json:"panels"`
}

// dashboardQueries lists the PromQL of every panel target, rows' panels included.
func dashboardQueries(dashboardJSON []byte) ([]Query, error) {
	var d struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("observability: dashboard: %w", err)
	}
	var out []Query
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					out = append(out, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

// ParseExposition reads a /metrics body in the Prometheus text format and returns
// the names of the series it holds: a counter as name_total, a histogram as its
// _bucket, _sum and _count series, a summary as its name, _sum and _count. A
// family declared by # HELP/# TYPE without samples adds no name: it has no series
// to query.
func ParseExposition(r io.Reader) (map[string]bool, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("observability: parse exposition: %w", err)
	}
	names := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			// A counter's family is named as its series, with the _total the
			// exporters append.
			names[name] = true
		}
	}
	return names, nil
}

// Scrape GETs url (a /metrics endpoint) and adds the series names it serves to into.
func Scrape(ctx context.Context, client *http.Client, url string, into map[string]bool) error {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("observability: scrape %s: %w", url, err)
	}
	// The text format, which ParseExposition reads, not protobuf or OpenMetrics.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("observability: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("observability: scrape %s: HTTP %d", url, resp.StatusCode)
	}
	names, err := ParseExposition(resp.Body)
	if err != nil {
		return fmt.Errorf("observability: scrape %s: %w", url, err)
	}
	for n := range names {
		into[n] = true
	}
	return nil
}

// Missing returns the names in used that scraped does not hold, sorted.
func Missing(used []string, scraped map[string]bool) []string {
	var out []string
	for _, n := range used {
		if !scraped[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Report sorts the names a scrape lacks by why.
type Report struct {
	// Unregistered: nothing in the platform emits these; a rule or panel that
	// queries one never fires or stays empty. Always a bug.
	Unregistered []string
	// NoSample: pkg/fabric registers these, but a series appears only after its
	// first observation (a dead letter, a failed publish) and none happened yet.
	NoSample []string
	// Elsewhere: RabbitMQ's rabbitmq_prometheus plugin or Prometheus itself emits
	// these, not a service; absent unless that endpoint was scraped too.
	Elsewhere []string
}

// Check compares the names used by rules and dashboards with what the scrapes
// held and sorts every missing one into the Report.
func Check(used []string, scraped map[string]bool) (Report, error) {
	fabric, err := FabricMetrics()
	if err != nil {
		return Report{}, err
	}
	var r Report
	for _, n := range Missing(used, scraped) {
		switch {
		case fabric[n]:
			r.NoSample = append(r.NoSample, n)
		case BrokerMetrics[n] || PrometheusMetrics[n]:
			r.Elsewhere = append(r.Elsewhere, n)
		default:
			r.Unregistered = append(r.Unregistered, n)
		}
	}
	return r, nil
}

// chartHeader heads the Helm chart's copy of the rules.
const chartHeader = "# GENERATED by `go run ./deploy/cmd/gendeploy` from deploy/observability/alerts.yml; do not edit.\n"

// ChartRules is the Helm chart's copy of the rule file
// (deploy/helm/agora/files/alerts.yml): a chart cannot read files outside its
// directory, so gendeploy writes this one there.
func ChartRules() []byte { return append([]byte(chartHeader), Rules...) }
