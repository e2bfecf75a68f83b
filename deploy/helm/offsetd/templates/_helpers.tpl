{{- define "offsetd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "offsetd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "offsetd.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "offsetd.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "offsetd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "offsetd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "offsetd.labels" -}}
{{ include "offsetd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "offsetd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "offsetd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "offsetd.rulesConfigMap" -}}
{{- default (printf "%s-rules" (include "offsetd.fullname" .)) .Values.rules.existingConfigMap }}
{{- end }}

{{/* offsetd.yaml: the user's config with the daemon's in-pod places set by the chart. */}}
{{- define "offsetd.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $daemon := dict "web_host" "0.0.0.0" "web_port" (int .Values.service.port) "data_dir" "/var/lib/offsetd/state" "rules_dir" "/etc/offsetd/rules" }}
{{- $_ := set $config "daemon" (mergeOverwrite (default (dict) (get $config "daemon")) $daemon) }}
{{- toYaml $config }}
{{- end }}

{{/* Cross-value checks the schema cannot express. */}}
{{- define "offsetd.checks" -}}
{{- $partitions := 8 }}
{{- with .Values.config.daemon }}{{- with .partitions }}{{- $partitions = int . }}{{- end }}{{- end }}
{{- if gt (int .Values.replicaCount) $partitions }}
{{- fail (printf "replicaCount %d is above config.daemon.partitions (%d): each worker owns whole partitions of offsetd's events topic, so the %d beyond that would stay idle; raise config.daemon.partitions (before the first start: the topic keeps its partition count) or lower replicaCount" (int .Values.replicaCount) $partitions (sub (int .Values.replicaCount) $partitions)) }}
{{- end }}
{{- if and .Values.rules.existingConfigMap .Values.rules.files }}
{{- fail "rules: give rules.existingConfigMap or rules.files, not both" }}
{{- end }}
{{- end }}
