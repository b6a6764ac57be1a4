package manifest_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-platform/agora/deploy/manifest"
	"github.com/agora-platform/agora/deploy/observability"
)

// renderWith renders the chart with ci/test-values.yaml and extra --set flags.
func renderWith(t *testing.T, set ...string) map[string]map[string]any {
	t.Helper()
	args := []string{"template", "agora", chartDir, "--namespace", "agora", "--kube-version", kubeVersion,
		"-f", filepath.Join(chartDir, "ci/test-values.yaml")}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := map[string]map[string]any{}
	for _, doc := range manifest.Split([]byte(out)) {
		obj, err := manifest.Decode(doc)
		if err != nil {
			t.Fatalf("strict decode: %v\n%s", err, doc)
		}
		if r[obj.Kind] == nil {
			r[obj.Kind] = map[string]any{}
		}
		r[obj.Kind][obj.Name] = obj.Value
	}
	return r
}

// normalized decodes rule groups through JSON so that the chart's rendering and
// the source file compare field by field.
func normalized(t *testing.T, v any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestChartObservabilityOffByDefault(t *testing.T) {
	r := renderWith(t)
	if n := len(r["PrometheusRule"]); n != 0 {
		t.Errorf("%d PrometheusRule objects by default, want 0", n)
	}
	for name, cm := range r["ConfigMap"] {
		if _, ok := cm.(*corev1.ConfigMap).Labels["grafana_dashboard"]; ok {
			t.Errorf("dashboard ConfigMap %s rendered by default", name)
		}
	}
	rmq, ok := r["RabbitmqCluster"]["agora-rabbitmq"].(*manifest.RabbitmqCluster)
	if !ok {
		t.Fatal("no RabbitmqCluster agora-rabbitmq")
	}
	if !strings.Contains(rmq.Spec.Rabbitmq.AdditionalConfig, "prometheus.return_per_object_metrics = true") {
		t.Error("RabbitmqCluster: per-object metrics off; the broker alert rules query rabbitmq_queue_* by queue")
	}
}

// The PrometheusRule holds exactly the rules of deploy/observability/alerts.yml,
// and the dashboard ConfigMap exactly its dashboard.
func TestChartRendersAlertRulesAndDashboard(t *testing.T) {
	r := renderWith(t, "prometheusRule.enabled=true", "prometheusRule.labels.release=kube-prometheus-stack", "grafanaDashboard.enabled=true")
	pr, ok := r["PrometheusRule"]["agora-alerts"].(*manifest.PrometheusRule)
	if !ok {
		t.Fatalf("no PrometheusRule agora-alerts; rendered %v", r["PrometheusRule"])
	}
	if pr.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v, want release from prometheusRule.labels", pr.Labels)
	}
	src, err := observability.ParseRules(observability.Rules)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := normalized(t, pr.Spec.Groups), normalized(t, src.Groups); !reflect.DeepEqual(got, want) {
		t.Errorf("PrometheusRule groups differ from deploy/observability/alerts.yml:\n got %v\nwant %v", got, want)
	}
	cm, ok := r["ConfigMap"]["agora-dashboards"].(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("no ConfigMap agora-dashboards; rendered %v", r["ConfigMap"])
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1", cm.Labels)
	}
	// A block scalar at the end of the document loses the file's final newline.
	if got := cm.Data["agora-platform.json"]; strings.TrimRight(got, "\n") != strings.TrimRight(string(observability.Dashboard), "\n") {
		t.Errorf("dashboard ConfigMap differs from deploy/observability/dashboards/platform.json (%d vs %d bytes)", len(got), len(observability.Dashboard))
	}
}

// Values that adapt the rules to a cluster: the services' scrape job and where the
// runbook links point.
func TestChartAlertRuleValues(t *testing.T) {
	r := renderWith(t, "prometheusRule.enabled=true", "prometheusRule.servicesJob=agora/agora-services|kubernetes-pods",
		"prometheusRule.runbookBaseURL=https://wiki.example.internal/agora/runbooks/")
	pr, ok := r["PrometheusRule"]["agora-alerts"].(*manifest.PrometheusRule)
	if !ok {
		t.Fatal("no PrometheusRule agora-alerts")
	}
	found := false
	for _, g := range pr.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "AgoraServiceDown" {
				found = true
				if !strings.Contains(rule.Expr, `up{job=~"agora/agora-services|kubernetes-pods"}`) {
					t.Errorf("AgoraServiceDown expr %q does not select the configured job", rule.Expr)
				}
			}
			if u := rule.Annotations["runbook_url"]; !strings.HasPrefix(u, "https://wiki.example.internal/agora/runbooks#") {
				t.Errorf("%s: runbook_url %q, want it under runbookBaseURL", rule.Alert, u)
			}
		}
	}
	if !found {
		t.Error("no AgoraServiceDown rule")
	}
}
