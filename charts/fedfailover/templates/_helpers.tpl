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

{{/* Milliseconds of a duration value in the schema's forms ("15s", "1.5s",
"500ms"), as a float64 string. */}}
{{- define "fedfailover.durationMs" -}}
{{- if hasSuffix "ms" . }}
{{- trimSuffix "ms" . | float64 }}
{{- else }}
{{- mulf (trimSuffix "s" . | float64) 1000 }}
{{- end }}
{{- end }}

{{/* Fails on values that would install a manager that misbehaves or
refuses to start; the manager checks the same at start. */}}
{{- define "fedfailover.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicaCount is %d but leaderElection.enabled is false: every replica would act on its own, two writers of the same RSPs, taints and status. Enable leaderElection (also needed by sharding.enabled) or set replicaCount to 1." (int .Values.replicaCount)) }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
{{- $le := .Values.leaderElection }}
{{- $lease := include "fedfailover.durationMs" $le.leaseDuration | float64 }}
{{- $renew := include "fedfailover.durationMs" $le.renewDeadline | float64 }}
{{- $retry := include "fedfailover.durationMs" $le.retryPeriod | float64 }}
{{- if ge $renew $lease }}
{{- fail (printf "leaderElection.renewDeadline (%s) must be shorter than leaderElection.leaseDuration (%s)" $le.renewDeadline $le.leaseDuration) }}
{{- end }}
{{- if or (le $retry 0.0) (le $renew (mulf $retry 1.2)) }}
{{- fail (printf "leaderElection.retryPeriod (%s) must be positive and renewDeadline (%s) more than 1.2 x retryPeriod" $le.retryPeriod $le.renewDeadline) }}
{{- end }}
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
