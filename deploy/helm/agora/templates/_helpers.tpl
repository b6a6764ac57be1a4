{{/* Resource name of a service: <release>-<service>, or <service> when the release is named like the chart. */}}
{{- define "agora.fullname" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- if eq $root.Release.Name $root.Chart.Name -}}{{ $name }}{{- else -}}{{ printf "%s-%s" $root.Release.Name $name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "agora.selectorLabels" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
app.kubernetes.io/name: {{ $name }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end -}}

{{- define "agora.labels" -}}
{{- $root := index . 0 -}}
{{ include "agora.selectorLabels" . }}
app.kubernetes.io/part-of: agora
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
{{- end -}}

{{/* The platform vhost: fixed, the generated permissions name it. */}}
{{- define "agora.vhost" -}}agora{{- end -}}

{{/* Name of the RabbitmqCluster (and of its client Service) in operator mode. */}}
{{- define "agora.rabbitmqName" -}}{{ printf "%s-rabbitmq" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}

{{- define "agora.brokerHost" -}}
{{- if eq .Values.broker.mode "operator" -}}
{{ include "agora.rabbitmqName" . }}.{{ .Release.Namespace }}.svc
{{- else if eq .Values.broker.mode "external" -}}
{{ required "broker.external.host is required when broker.mode=external" .Values.broker.external.host }}
{{- else -}}
{{ fail (printf "broker.mode must be operator or external, not %q" .Values.broker.mode) }}
{{- end -}}
{{- end -}}

{{- define "agora.brokerPort" -}}
{{- if eq .Values.broker.mode "external" -}}{{ .Values.broker.external.port }}{{- else -}}5671{{- end -}}
{{- end -}}

{{/* The document-worker's replica count is owned by the HPA or KEDA when either is on. */}}
{{- define "agora.autoscaled" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- if and (eq $name "document-worker") (or $root.Values.autoscaling.enabled $root.Values.keda.enabled) -}}true{{- end -}}
{{- end -}}

{{- /* CONSOLE_SERVICES of the console's service: every other service by its Service name. */ -}}
{{- define "agora.consoleServices" -}}
{{- $root := index . 0 -}}{{- $self := index . 1 -}}
{{- $out := list -}}
{{- range $name, $svc := $root.Values.services -}}
{{- if ne $name $self -}}
{{- $out = append $out (printf "%s=http://%s:%d" $name (include "agora.fullname" (list $root $name)) (int $svc.port)) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
