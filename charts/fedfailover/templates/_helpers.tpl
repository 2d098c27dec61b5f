{{/* Chart name. */}}
{{- define "fedfailover.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the prefix of every resource name. */}}
{{- define "fedfailover.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Common labels. */}}
{{- define "fedfailover.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "fedfailover.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fedfailover
{{- end }}

{{/* Selector labels (immutable on the Deployment: never add to these). */}}
{{- define "fedfailover.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fedfailover.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{/* ServiceAccount name. */}}
{{- define "fedfailover.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-controller-manager" (include "fedfailover.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Manager image reference. */}}
{{- define "fedfailover.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* DNS name of the metrics Service: what its certificate must name and
the ServiceMonitor verifies. */}}
{{- define "fedfailover.metricsServerName" -}}
{{- printf "%s-metrics.%s.svc" (include "fedfailover.fullname" .) .Release.Namespace }}
{{- end }}

{{/* Secret with the metrics serving certificate; empty when none. */}}
{{- define "fedfailover.metricsTLSSecret" -}}
{{- if .Values.metrics.tls.secretName }}
{{- .Values.metrics.tls.secretName }}
{{- else if .Values.metrics.tls.certManager.enabled }}
{{- printf "%s-metrics-cert" (include "fedfailover.fullname" .) }}
{{- end }}
{{- end }}

{{/* "true" when members are sharded across replicas (sharding.enabled and
more than one replica); sharding needs leader election for rebalance. */}}
{{- define "fedfailover.sharded" -}}
{{- if and .Values.sharding.enabled (gt (int .Values.replicaCount) 1) }}
{{- if not .Values.leaderElection.enabled }}
{{- fail "sharding.enabled needs leaderElection.enabled: rebalance stays with the elected leader" }}
{{- end }}
{{- print "true" }}
{{- end }}
{{- end }}
