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
{{- $logins := include "offsetd.logins" . | fromJson }}
{{- range $section := list "kafka_clusters" "connect_clusters" }}
{{- $clusters := default (dict) (get $config $section) }}
{{- range $alias, $derived := get $logins $section }}
{{- if not (hasKey $clusters $alias) }}
{{- fail (printf "logins.%s.%s: no %s alias %q in config.%s; a login is for a cluster the config names" (trimSuffix "_clusters" $section) $alias $section $alias $section) }}
{{- end }}
{{- $_ := set $clusters $alias (mergeOverwrite $derived (get $clusters $alias)) }}
{{- end }}
{{- if $clusters }}{{- $_ := set $config $section $clusters }}{{- end }}
{{- end }}
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
{{- range $alias, $login := .Values.logins.kafka }}
{{- $given := list }}
{{- range $way := list "scram" "tls" "oauth" }}{{- if hasKey $login $way }}{{- $given = append $given $way }}{{- end }}{{- end }}
{{- if gt (len $given) 1 }}
{{- fail (printf "logins.kafka.%s: give one login of scram, tls or oauth, not %s" $alias (join " and " $given)) }}
{{- end }}
{{- end }}
{{- if and .Values.rules.existingConfigMap .Values.rules.files }}
{{- fail "rules: give rules.existingConfigMap or rules.files, not both" }}
{{- end }}
{{- end }}

{{/* Logins by reference (`logins`): per alias, the config it derives (paths, names, URLs; never
a Secret's value), the Secret volumes to mount (each key one file) and the variables read from
Secrets, as JSON for offsetd.config and the Deployment. Keys default to Strimzi's names. */}}
{{- define "offsetd.logins" -}}
{{- $root := "/etc/offsetd/logins" }}
{{- $out := dict "kafka_clusters" (dict) "connect_clusters" (dict) "volumes" (list) "env" (list) }}
{{- $volumes := list }}
{{- $env := list }}
{{- range $alias, $login := .Values.logins.kafka }}
{{- $dir := printf "%s/kafka-%s" $root $alias }}
{{- $cluster := dict }}
{{- $tls := dict }}
{{- with $login.ca }}
{{- $key := default "ca.crt" .key }}
{{- $volumes = append $volumes (dict "name" (printf "login-kafka-%s-ca" $alias) "secretName" .secretName "items" (list (dict "key" $key "path" $key)) "mountPath" (printf "%s/ca" $dir)) }}
{{- $_ := set $tls "ca_file" (printf "%s/ca/%s" $dir $key) }}
{{- end }}
{{- with $login.tls }}
{{- $cert := default "user.crt" .certKey }}
{{- $key := default "user.key" .keyKey }}
{{- $volumes = append $volumes (dict "name" (printf "login-kafka-%s-tls" $alias) "secretName" .secretName "items" (list (dict "key" $cert "path" $cert) (dict "key" $key "path" $key)) "mountPath" (printf "%s/tls" $dir)) }}
{{- $_ := set $tls "cert_file" (printf "%s/tls/%s" $dir $cert) }}
{{- $_ := set $tls "key_file" (printf "%s/tls/%s" $dir $key) }}
{{- $_ := set $cluster "security_protocol" "SSL" }}
{{- end }}
{{- with $login.scram }}
{{- $_ := set $cluster "security_protocol" "SASL_SSL" }}
{{- $_ := set $cluster "sasl" (dict "mechanism" (default "SCRAM-SHA-512" .mechanism) "username" .username) }}
{{- $env = append $env (dict "name" (printf "OFFSETD_KAFKA_CLUSTERS__%s__SASL__PASSWORD" (upper $alias)) "secretName" .secretName "secretKey" (default "password" .key)) }}
{{- end }}
{{- with $login.oauth }}
{{- $oauth := dict "token_endpoint_url" .tokenEndpointUrl "client_id" .clientId }}
{{- with .scope }}{{- $_ := set $oauth "scope" . }}{{- end }}
{{- with .audience }}{{- $_ := set $oauth "audience" . }}{{- end }}
{{- with .ca }}
{{- $key := default "ca.crt" .key }}
{{- $volumes = append $volumes (dict "name" (printf "login-kafka-%s-oauth-ca" $alias) "secretName" .secretName "items" (list (dict "key" $key "path" $key)) "mountPath" (printf "%s/oauth-ca" $dir)) }}
{{- $_ := set $oauth "ca_file" (printf "%s/oauth-ca/%s" $dir $key) }}
{{- end }}
{{- $_ := set $cluster "security_protocol" "SASL_SSL" }}
{{- $_ := set $cluster "sasl" (dict "mechanism" "OAUTHBEARER" "oauth" $oauth) }}
{{- $env = append $env (dict "name" (printf "OFFSETD_KAFKA_CLUSTERS__%s__SASL__OAUTH__CLIENT_SECRET" (upper $alias)) "secretName" .clientSecret.secretName "secretKey" (default "clientSecret" .clientSecret.key)) }}
{{- end }}
{{- if not (hasKey $cluster "security_protocol") }}{{- $_ := set $cluster "security_protocol" "SSL" }}{{- end }}
{{- if $tls }}{{- $_ := set $cluster "tls" $tls }}{{- end }}
{{- $_ := set $out.kafka_clusters $alias $cluster }}
{{- end }}
{{- range $alias, $login := .Values.logins.connect }}
{{- $dir := printf "%s/connect-%s" $root $alias }}
{{- $cluster := dict }}
{{- $tls := dict }}
{{- with $login.ca }}
{{- $key := default "ca.crt" .key }}
{{- $volumes = append $volumes (dict "name" (printf "login-connect-%s-ca" $alias) "secretName" .secretName "items" (list (dict "key" $key "path" $key)) "mountPath" (printf "%s/ca" $dir)) }}
{{- $_ := set $tls "ca_file" (printf "%s/ca/%s" $dir $key) }}
{{- end }}
{{- with $login.tls }}
{{- $cert := default "tls.crt" .certKey }}
{{- $key := default "tls.key" .keyKey }}
{{- $volumes = append $volumes (dict "name" (printf "login-connect-%s-tls" $alias) "secretName" .secretName "items" (list (dict "key" $cert "path" $cert) (dict "key" $key "path" $key)) "mountPath" (printf "%s/tls" $dir)) }}
{{- $_ := set $tls "cert_file" (printf "%s/tls/%s" $dir $cert) }}
{{- $_ := set $tls "key_file" (printf "%s/tls/%s" $dir $key) }}
{{- end }}
{{- with $login.basic }}
{{- $_ := set $cluster "auth" (dict "username" .username) }}
{{- $env = append $env (dict "name" (printf "OFFSETD_CONNECT_CLUSTERS__%s__AUTH__PASSWORD" (upper $alias)) "secretName" .secretName "secretKey" (default "password" .key)) }}
{{- end }}
{{- if $tls }}{{- $_ := set $cluster "tls" $tls }}{{- end }}
{{- $_ := set $out.connect_clusters $alias $cluster }}
{{- end }}
{{- $_ := set $out "volumes" $volumes }}
{{- $_ := set $out "env" $env }}
{{- toJson $out }}
{{- end }}
