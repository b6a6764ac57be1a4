package manifest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/agora-platform/agora/deploy/acl"
	"github.com/agora-platform/agora/deploy/manifest"
)

const (
	chartDir    = "../helm/agora"
	helmModule  = "helm.sh/helm/v3/cmd/helm@v3.22.0"
	kubeVersion = "1.30.0"
)

var platformServices = []string{"ai-builder", "analytics", "communication", "datalake-ingestion", "document-worker", "request", "workflow"}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm finds the helm binary (PATH, then $(go env GOPATH)/bin) or installs
// it there with `go install` (a few minutes, once per machine). The test
// fails, never skips, when neither works.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p, err := exec.LookPath("helm"); err == nil {
			helmPath = p
			return
		}
		out, err := exec.Command("go", "env", "GOPATH").Output()
		if err != nil {
			helmErr = fmt.Errorf("go env GOPATH: %w", err)
			return
		}
		gobin := filepath.Join(strings.TrimSpace(strings.Split(string(out), string(os.PathListSeparator))[0]), "bin")
		p := filepath.Join(gobin, "helm")
		if _, err := os.Stat(p); err == nil {
			helmPath = p
			return
		}
		t.Logf("helm not found: go install %s into %s (slow the first time)", helmModule, gobin)
		cmd := exec.Command("go", "install", helmModule)
		cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-p=1", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("go install %s failed (needs the Go module proxy): %v\n%s", helmModule, err, out)
			return
		}
		helmPath = p
	})
	if helmErr != nil {
		t.Fatalf("helm is required to validate the chart: %v", helmErr)
	}
	return helmPath
}

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// rendered is a chart rendering decoded into typed objects, by kind and name.
type rendered map[string]map[string]any

func render(t *testing.T, values string) rendered {
	t.Helper()
	out, err := runHelm(t, "template", "agora", chartDir, "--namespace", "agora", "--kube-version", kubeVersion, "-f", filepath.Join(chartDir, values))
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{}
	for _, doc := range manifest.Split([]byte(out)) {
		obj, err := manifest.Decode(doc)
		if err != nil {
			t.Errorf("strict decode: %v\n%s", err, doc)
			continue
		}
		if r[obj.Kind] == nil {
			r[obj.Kind] = map[string]any{}
		}
		if _, dup := r[obj.Kind][obj.Name]; dup {
			t.Errorf("%s %s rendered twice", obj.Kind, obj.Name)
		}
		r[obj.Kind][obj.Name] = obj.Value
	}
	return r
}

func TestChartLintStrict(t *testing.T) {
	for _, values := range []string{"ci/test-values.yaml", "ci/external-keda-values.yaml"} {
		if out, err := runHelm(t, "lint", "--strict", chartDir, "--kube-version", kubeVersion, "-f", filepath.Join(chartDir, values)); err != nil {
			t.Errorf("lint with %s: %v", values, err)
		} else {
			t.Logf("helm lint --strict -f %s: %s", values, strings.TrimSpace(out[strings.LastIndex(out, "\n1 chart"):]))
		}
	}
	// Without values the chart refuses to render, naming what is missing.
	_, err := runHelm(t, "template", "agora", chartDir, "--kube-version", kubeVersion)
	if err == nil || !strings.Contains(err.Error(), "is required") {
		t.Errorf("helm template without values: %v, want a 'required' error", err)
	}
}

func TestChartRendersOperatorMode(t *testing.T) {
	r := render(t, "ci/test-values.yaml")
	for kind, want := range map[string]int{"Deployment": 7, "Service": 7, "PodDisruptionBudget": 7, "NetworkPolicy": 7, "HorizontalPodAutoscaler": 1, "RabbitmqCluster": 1, "Secret": 8, "ScaledObject": 0} {
		if got := len(r[kind]); got != want {
			t.Errorf("%d %s objects, want %d", got, kind, want)
		}
	}
	for _, name := range platformServices {
		t.Run(name, func(t *testing.T) { checkService(t, r, name, true) })
	}
	hpa, ok := r["HorizontalPodAutoscaler"]["document-worker"].(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok || hpa.Spec.ScaleTargetRef.Name != "document-worker" {
		t.Errorf("no HPA targeting document-worker")
	}
	if d := r["Deployment"]["document-worker"].(*appsv1.Deployment); d != nil && d.Spec.Replicas != nil {
		t.Errorf("document-worker Deployment sets replicas while the HPA owns them")
	}
	rmq, ok := r["RabbitmqCluster"]["agora-rabbitmq"].(*manifest.RabbitmqCluster)
	if !ok {
		t.Fatal("no RabbitmqCluster agora-rabbitmq")
	}
	if rmq.Spec.Replicas == nil || *rmq.Spec.Replicas != 3 || !rmq.Spec.TLS.DisableNonTLSListeners || rmq.Spec.TLS.SecretName == "" {
		t.Errorf("RabbitmqCluster: replicas %v, TLS %+v", rmq.Spec.Replicas, rmq.Spec.TLS)
	}
	if !strings.Contains(rmq.Spec.Rabbitmq.AdditionalConfig, "load_definitions = /etc/rabbitmq/agora/definitions.json") {
		t.Errorf("RabbitmqCluster does not load the definitions")
	}
	defs, _ := r["Secret"]["agora-rabbitmq-definitions"].(*corev1.Secret)
	checkChartDefinitions(t, defs)
}

func TestChartRendersExternalBrokerWithKEDA(t *testing.T) {
	r := render(t, "ci/external-keda-values.yaml")
	for kind, want := range map[string]int{"Deployment": 7, "RabbitmqCluster": 0, "HorizontalPodAutoscaler": 0, "ScaledObject": 1, "TriggerAuthentication": 1} {
		if got := len(r[kind]); got != want {
			t.Errorf("%d %s objects, want %d", got, kind, want)
		}
	}
	for _, name := range platformServices {
		t.Run(name, func(t *testing.T) { checkService(t, r, name, false) })
	}
	// console.enabled: the request service serves it, naming the others.
	d := r["Deployment"]["request"].(*appsv1.Deployment)
	var consoleServices string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "CONSOLE_SERVICES" {
			consoleServices = e.Value
		}
	}
	if !strings.Contains(consoleServices, "workflow=http://workflow:8082") || strings.Count(consoleServices, "=http://") != len(platformServices)-1 {
		t.Errorf("request's CONSOLE_SERVICES = %q, want the six other services", consoleServices)
	}
	so := r["ScaledObject"]["document-worker"].(*manifest.ScaledObject)
	if so == nil {
		t.Fatal("no ScaledObject document-worker")
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "rabbitmq" || so.Spec.Triggers[0].Metadata["queueName"] != "document.processing" {
		t.Errorf("ScaledObject triggers = %+v, want rabbitmq on document.processing", so.Spec.Triggers)
	}
}

// checkService asserts one service's Deployment, Service, PDB, NetworkPolicy and Secret.
func checkService(t *testing.T, r rendered, name string, operator bool) {
	consoleOn := !operator && name == "request" // ci/external-keda-values.yaml turns the console on
	full := name                                // release "agora" is named like the chart: objects take the service's name
	d, ok := r["Deployment"][full].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment %s", full)
	}
	pod := d.Spec.Template.Spec
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil {
		t.Errorf("pod security context %+v, want runAsNonRoot and a seccomp profile", sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("service account token mounted")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container security context %+v", sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", c.ReadinessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != full+"-credentials" {
		t.Errorf("envFrom %+v, want only its own credentials Secret", c.EnvFrom)
	}
	if _, ok := r["Service"][full].(*corev1.Service); !ok {
		t.Errorf("no Service %s", full)
	}
	if pdb, ok := r["PodDisruptionBudget"][full].(*policyv1.PodDisruptionBudget); !ok || pdb.Spec.MaxUnavailable == nil {
		t.Errorf("no PodDisruptionBudget with maxUnavailable for %s", full)
	}
	sec, ok := r["Secret"][full+"-credentials"].(*corev1.Secret)
	if !ok {
		t.Fatalf("no Secret %s-credentials", full)
	}
	amqpURL := string(sec.Data["AMQP_URL"])
	if !strings.HasPrefix(amqpURL, "amqps://"+name+":") || !strings.HasSuffix(amqpURL, "/"+acl.Vhost) {
		t.Errorf("AMQP_URL %q is not amqps as %s into %s", strings.SplitN(amqpURL, ":", 3)[:2], name, acl.Vhost)
	}
	if db := string(sec.Data["DATABASE_URL"]); !strings.HasPrefix(db, "postgres://"+strings.ReplaceAll(name, "-", "_")+":") {
		t.Errorf("DATABASE_URL does not use the service's own role")
	}
	if db := string(sec.Data["DATABASE_MIGRATE_URL"]); !strings.HasPrefix(db, "postgres://"+strings.ReplaceAll(name, "-", "_")+"_owner:") {
		t.Errorf("DATABASE_MIGRATE_URL does not use the schema's owner role")
	}

	np, ok := r["NetworkPolicy"][full].(*networkingv1.NetworkPolicy)
	if !ok {
		t.Fatalf("no NetworkPolicy %s", full)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("policy types %v", np.Spec.PolicyTypes)
	}
	if !operator && name != "request" {
		// ingressFrom is set in ci/external-keda-values.yaml: the console's
		// service must still reach this one.
		from := np.Spec.Ingress[0].From
		if !slices.ContainsFunc(from, func(p networkingv1.NetworkPolicyPeer) bool {
			return p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/name"] == "request"
		}) {
			t.Errorf("ingress from %+v: the console (request) cannot reach %s", from, name)
		}
	}
	var ports []int32
	for _, e := range np.Spec.Egress {
		if len(e.To) == 0 {
			t.Errorf("egress rule without a destination (allows everything): %+v", e)
		}
		for _, p := range e.Ports {
			ports = append(ports, p.Port.IntVal)
		}
		for _, to := range e.To {
			if to.IPBlock != nil && to.IPBlock.CIDR == "0.0.0.0/0" {
				t.Errorf("egress to 0.0.0.0/0")
			}
		}
	}
	slices.Sort(ports)
	want := []int32{53, 53, 443, 5432, 5671}
	if operator {
		want = []int32{53, 53, 443, 4318, 5432, 5671} // + the OTLP collector in ci/test-values.yaml
	}
	switch {
	case consoleOn:
		// + the other services' ports, each to that service's pods only
		want = []int32{53, 53, 443, 5432, 5671, 8082, 8083, 8084, 8085, 8086, 8087}
	case name != "datalake-ingestion":
		// + the data lake's history, for replays (history.enabled, the default)
		want = append(want, 8086)
		slices.Sort(want)
	}
	history := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "HISTORY_URL" && e.Value == "http://"+strings.TrimSuffix(full, name)+"datalake-ingestion:8086"
	})
	if history == (name == "datalake-ingestion") {
		t.Errorf("HISTORY_URL in %s's env: %v, want it in every service but the data lake's", name, history)
	}
	if !operator && name == "datalake-ingestion" && !slices.ContainsFunc(np.Spec.Ingress[0].From, func(p networkingv1.NetworkPolicyPeer) bool {
		return p.PodSelector != nil && p.PodSelector.MatchLabels["app.kubernetes.io/part-of"] == "agora"
	}) {
		t.Errorf("the data lake's ingress %+v does not admit the other services (replays read its history)", np.Spec.Ingress[0].From)
	}
	if !slices.Equal(ports, want) {
		t.Errorf("egress ports %v, want exactly %v (DNS, storage, [OTLP], database, broker)", ports, want)
	}
}

// checkChartDefinitions: the chart's broker definitions grant exactly what
// the committed deploy/rabbitmq/definitions.json grants.
func checkChartDefinitions(t *testing.T, s *corev1.Secret) {
	t.Helper()
	if s == nil {
		t.Fatal("no definitions Secret")
	}
	var chart, committed acl.Definitions
	if err := json.Unmarshal(s.Data["definitions.json"], &chart); err != nil {
		t.Fatalf("chart definitions: %v", err)
	}
	raw, err := os.ReadFile("../rabbitmq/definitions.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &committed); err != nil {
		t.Fatal(err)
	}
	eq := func(what string, a, b any) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("chart definitions %s differ from deploy/rabbitmq/definitions.json", what)
		}
	}
	eq("permissions", chart.Permissions, committed.Permissions)
	eq("topic_permissions", chart.TopicPermissions, committed.TopicPermissions)
	eq("queues", chart.Queues, committed.Queues)
	eq("bindings", chart.Bindings, committed.Bindings)
	for _, u := range chart.Users {
		if u.Password == "" || strings.HasPrefix(u.Password, "local-dev-only") {
			t.Errorf("chart user %s has password %q, want the value from values", u.Name, u.Password)
		}
	}
}

func TestDecodeIsStrict(t *testing.T) {
	tests := []struct {
		name, doc string
		wantErr   bool
	}{
		{"valid", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n", false},
		{"misspelled field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 1\n", true},
		{"misplaced field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  containers: []\n", true},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  type: ClusterIP\n  type: NodePort\n", true},
		{"CRD typo", "apiVersion: rabbitmq.com/v1beta1\nkind: RabbitmqCluster\nmetadata: {name: x}\nspec:\n  replicaz: 3\n", true},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", true},
	}
	for _, tt := range tests {
		_, err := manifest.Decode([]byte(tt.doc))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: Decode err = %v, wantErr %v", tt.name, err, tt.wantErr)
		}
		if tt.name == "unknown kind" && !errors.Is(err, manifest.ErrUnknownKind) {
			t.Errorf("unknown kind: err = %v, want ErrUnknownKind", err)
		}
	}
	if got := len(manifest.Split([]byte("# c\n---\na: 1\n---\n\n---\nb: 2\n"))); got != 2 {
		t.Errorf("Split kept %d documents, want 2", got)
	}
}
