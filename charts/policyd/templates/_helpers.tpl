{{/* The chart name, or nameOverride. */}}
{{- define "policyd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Object names: fullnameOverride, else the release name when it contains the chart name
(release "policyd" gives deploy/'s names), else "<release>-<name>". Cluster-scoped
objects (ClusterRoles and their bindings) carry it too, so two releases never share one.
*/}}
{{- define "policyd.fullname" -}}
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

{{- define "policyd.configName" -}}
{{- printf "%s-config" (include "policyd.fullname" .) }}
{{- end }}

{{- define "policyd.webhookName" -}}
{{- printf "%s-webhook" (include "policyd.fullname" .) }}
{{- end }}

{{- define "policyd.webhookTLSSecret" -}}
{{- default (printf "%s-webhook-tls" (include "policyd.fullname" .)) .Values.webhook.tlsSecretName }}
{{- end }}

{{- define "policyd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Labels every object has: deploy/'s two, and Helm's. */}}
{{- define "policyd.commonLabels" -}}
app.kubernetes.io/part-of: policyd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "policyd.labels" -}}
app.kubernetes.io/name: {{ include "policyd.name" . }}
{{ include "policyd.commonLabels" . }}
{{- end }}

{{/*
The scheduler's pods. The instance label keeps two releases in one namespace from
selecting each other's pods (deploy/ selects on the name alone).
*/}}
{{- define "policyd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "policyd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "policyd.webhookLabels" -}}
app.kubernetes.io/name: {{ include "policyd.name" . }}-webhook
{{ include "policyd.commonLabels" . }}
{{- end }}

{{- define "policyd.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ include "policyd.name" . }}-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The profile as the daemon reads it: the `profile` value with apiVersion and kind, and
the Lease the Role grants (this chart's name, in the release namespace). More than one
replica without leader election is refused: every replica would schedule, and two
schedulers binding the same pods race.
*/}}
{{- define "policyd.profile" -}}
{{- $profile := deepCopy .Values.profile }}
{{- $le := deepCopy (default dict $profile.leaderElection) }}
{{- if and (gt (int .Values.replicas) 1) (hasKey $le "leaderElect") (not $le.leaderElect) }}
{{- fail (printf "replicas is %d but profile.leaderElection.leaderElect is false: more than one replica needs leader election (only the leader may schedule); set leaderElect: true or replicas: 1" (int .Values.replicas)) }}
{{- end }}
{{- $_ := set $le "resourceName" (include "policyd.fullname" .) }}
{{- $_ := set $le "resourceNamespace" .Release.Namespace }}
{{- $_ := set $profile "leaderElection" $le }}
{{- $_ := set $profile "apiVersion" "policyd.io/v1alpha1" }}
{{- $_ := set $profile "kind" "PolicydConfiguration" }}
{{- toYaml $profile }}
{{- end }}
