{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "kube-py-scheduler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name, plus the chart name unless the release name
already contains it. Truncated to 63 characters (DNS names).
*/}}
{{- define "kube-py-scheduler.fullname" -}}
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

{{- define "kube-py-scheduler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kube-py-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-py-scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kube-py-scheduler.labels" -}}
helm.sh/chart: {{ include "kube-py-scheduler.chart" . }}
{{ include "kube-py-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kube-py-scheduler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kube-py-scheduler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Namespace of the leader-election Lease (and of the Role granting it). */}}
{{- define "kube-py-scheduler.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.resourceNamespace }}
{{- end }}

{{/*
The KubeSchedulerConfiguration file. Shared by the ConfigMap and the Deployment's checksum
annotation, so a config change rolls the pods.
*/}}
{{- define "kube-py-scheduler.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ .Values.leaderElection.leaderElect }}
  {{- if eq (required "leaderElection.resourceName is required" .Values.leaderElection.resourceName) "kube-scheduler" }}
  {{- fail "leaderElection.resourceName must not be kube-scheduler's own lease name" }}
  {{- end }}
  resourceName: {{ .Values.leaderElection.resourceName | quote }}
  resourceNamespace: {{ include "kube-py-scheduler.leaseNamespace" . | quote }}
  leaseDuration: {{ .Values.leaderElection.leaseDuration | quote }}
  renewDeadline: {{ .Values.leaderElection.renewDeadline | quote }}
  retryPeriod: {{ .Values.leaderElection.retryPeriod | quote }}
{{- with .Values.percentageOfNodesToScore }}
percentageOfNodesToScore: {{ . }}
{{- end }}
profiles:
{{- if .Values.profiles }}
{{- toYaml .Values.profiles | nindent 2 }}
{{- else }}
  - schedulerName: {{ required "schedulerName is required" .Values.schedulerName | quote }}
    {{- with .Values.plugins }}
    plugins:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.pluginConfig }}
    pluginConfig:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- end }}
