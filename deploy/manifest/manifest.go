// Package manifest decodes rendered Kubernetes manifests (helm template
// output) strictly into the Kubernetes API types, so that a misspelled or
// misplaced field is an error instead of being silently dropped by the API
// server. Custom resources the chart uses (RabbitmqCluster, KEDA's
// ScaledObject and TriggerAuthentication, the Prometheus Operator's
// PrometheusRule) decode into minimal typed structs declared here, with the
// fields the chart sets.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Object is one decoded manifest.
type Object struct {
	APIVersion, Kind, Name string
	// Value is a pointer to the typed object, e.g. *appsv1.Deployment.
	Value any
}

// types maps "apiVersion/kind" to a constructor of its typed value.
var types = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"rabbitmq.com/v1beta1/RabbitmqCluster":    func() any { return &RabbitmqCluster{} },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return &ScaledObject{} },
	"keda.sh/v1alpha1/TriggerAuthentication":  func() any { return &TriggerAuthentication{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &PrometheusRule{} },
}

// ErrUnknownKind is returned for a kind this package has no type for: the
// chart must not render what the validation cannot check.
var ErrUnknownKind = errors.New("manifest: no typed decoder for this kind")

// Split cuts a multi-document YAML stream at its "---" lines and drops
// documents that hold only comments or whitespace.
func Split(stream []byte) [][]byte {
	var docs [][]byte
	var cur []string
	flush := func() {
		doc := strings.Join(cur, "\n")
		cur = nil
		for _, line := range strings.Split(doc, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, []byte(doc))
				return
			}
		}
	}
	for _, line := range strings.Split(string(stream), "\n") {
		if strings.TrimRight(line, " ") == "---" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return docs
}

// Decode decodes one document strictly (unknown and duplicate fields are
// errors) into its typed value.
func Decode(doc []byte) (Object, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return Object{}, fmt.Errorf("manifest: parse: %w", err)
	}
	obj := Object{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name}
	mk, ok := types[head.APIVersion+"/"+head.Kind]
	if !ok {
		return obj, fmt.Errorf("%w: %s %s (%s)", ErrUnknownKind, head.APIVersion, head.Kind, head.Metadata.Name)
	}
	obj.Value = mk()
	if err := yaml.UnmarshalStrict(bytes.TrimSpace(doc), obj.Value); err != nil {
		return obj, fmt.Errorf("manifest: %s %s: %w", head.Kind, head.Metadata.Name, err)
	}
	return obj, nil
}

// RabbitmqCluster is the part of rabbitmq.com/v1beta1 RabbitmqCluster the
// chart uses (RabbitMQ Cluster Operator).
type RabbitmqCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              RabbitmqClusterSpec `json:"spec"`
}

// RabbitmqClusterSpec lists the fields the chart sets.
type RabbitmqClusterSpec struct {
	Replicas    *int32                       `json:"replicas,omitempty"`
	Image       string                       `json:"image,omitempty"`
	Resources   *corev1.ResourceRequirements `json:"resources,omitempty"`
	Persistence struct {
		StorageClassName *string            `json:"storageClassName,omitempty"`
		Storage          *resource.Quantity `json:"storage,omitempty"`
	} `json:"persistence"`
	TLS struct {
		SecretName             string `json:"secretName,omitempty"`
		CASecretName           string `json:"caSecretName,omitempty"`
		DisableNonTLSListeners bool   `json:"disableNonTLSListeners,omitempty"`
	} `json:"tls"`
	Rabbitmq struct {
		AdditionalPlugins []string `json:"additionalPlugins,omitempty"`
		AdditionalConfig  string   `json:"additionalConfig,omitempty"`
	} `json:"rabbitmq"`
	Override struct {
		StatefulSet *struct {
			Spec struct {
				Template struct {
					Spec corev1.PodSpec `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"statefulSet,omitempty"`
	} `json:"override"`
}

// ScaledObject is the part of keda.sh/v1alpha1 ScaledObject the chart uses.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// TriggerAuthentication is the part of keda.sh/v1alpha1 TriggerAuthentication the chart uses.
type TriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}

// PrometheusRule is monitoring.coreos.com/v1 PrometheusRule (Prometheus
// Operator): the fields of its rule groups the chart renders.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []PrometheusRuleGroup `json:"groups"`
	} `json:"spec"`
}

// PrometheusRuleGroup is one group of a PrometheusRule.
type PrometheusRuleGroup struct {
	Name     string               `json:"name"`
	Interval string               `json:"interval,omitempty"`
	Rules    []PrometheusRuleRule `json:"rules"`
}

// PrometheusRuleRule is an alerting or recording rule.
type PrometheusRuleRule struct {
	Alert         string            `json:"alert,omitempty"`
	Record        string            `json:"record,omitempty"`
	Expr          string            `json:"expr"`
	For           string            `json:"for,omitempty"`
	KeepFiringFor string            `json:"keep_firing_for,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}
