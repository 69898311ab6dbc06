{{/*
Labels of every object's metadata: deploy/base's (kustomize adds app.kubernetes.io/part-of to
every object, not to selectors or pod templates), plus .Values.commonLabels.
*/}}
{{- define "placement.labels" -}}
app.kubernetes.io/part-of: placement
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* An image reference: repository@digest when a digest is set, else repository:tag (tag
defaulting to the chart's appVersion). Called with (list $image $root). */}}
{{- define "placement.image" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else -}}
{{ $image.repository }}:{{ $image.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The decision service's headless Service name, as DNS inside the release namespace. */}}
{{- define "placement.decisionHost" -}}
placement-decision.{{ .Release.Namespace }}.svc
{{- end }}

{{/*
The binder's BINDER_* settings (deploy/base/binder.env), as YAML of strings; the ConfigMap
binder-config holds them and the Deployment's envFrom names it.
*/}}
{{- define "placement.binderConfig" -}}
{{- $b := .Values.binder -}}
{{- $data := dict
  "BINDER_DECISION_DNS" (printf "%s:50051" (include "placement.decisionHost" .))
  "BINDER_DECISION_DNS_REFRESH_SECS" ($b.decisionDnsRefreshSeconds | int64 | toString)
  "BINDER_DECISION_TIMEOUT_MS" ($b.decisionTimeoutMs | int64 | toString)
  "BINDER_BATCHES_IN_FLIGHT" ($b.batchesInFlight | int64 | toString)
  "BINDER_SCHEDULER_NAME" .Values.schedulerName
  "BINDER_REPORTING_CONTROLLER" ($b.reportingController | default .Values.schedulerName)
  "BINDER_LEADER_ELECT" (toString $b.leaderElection.enabled)
  "BINDER_LEASE_NAME" $b.leaderElection.leaseName
  "BINDER_LEASE_DURATION_SECS" ($b.leaderElection.leaseDurationSeconds | int64 | toString)
  "BINDER_LEASE_GRACE_SECS" ($b.leaderElection.leaseGraceSeconds | int64 | toString)
  "BINDER_NOMINATION_TIMEOUT_SECONDS" ($b.nominationTimeoutSeconds | int64 | toString)
  "BINDER_HTTP_LISTEN" "0.0.0.0:10251"
  "BINDER_EXPERIMENTS_FILE" "/etc/placement/experiments/experiments.yaml"
  "BINDER_EXPERIMENTS_RELOAD_SECS" ($b.experimentsReloadSeconds | int64 | toString)
  "BINDER_LOG_FORMAT" $b.logFormat
-}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $data "BINDER_DECISION_TLS_CA" "/etc/placement/tls/ca.crt" -}}
{{- $_ := set $data "BINDER_DECISION_TLS_CERT" "/etc/placement/tls/tls.crt" -}}
{{- $_ := set $data "BINDER_DECISION_TLS_KEY" "/etc/placement/tls/tls.key" -}}
{{- $_ := set $data "BINDER_DECISION_TLS_SERVER_NAME" (include "placement.decisionHost" .) -}}
{{- end -}}
{{- range $k, $v := $b.extraConfig -}}
{{- $_ := set $data $k (toString $v) -}}
{{- end -}}
{{ toYaml $data }}
{{- end }}

{{/*
The ConfigMap binder-config's name: binder-config-<hash>, with the hash kustomize's
configMapGenerator gives the same data (so a changed setting rolls the binder, and the default
rendering names it as deploy/base does): sha256 of the JSON {"data":...,"kind":"ConfigMap","name":""}
(kustomize looks the name up by a path it never finds, so it hashes ""), its first 10 hex
digits with 0 1 3 a e spelled g h k m t.
*/}}
{{- define "placement.binderConfigName" -}}
{{- $data := include "placement.binderConfig" . | fromYaml -}}
{{- $hash := dict "data" $data "kind" "ConfigMap" "name" "" | toJson | sha256sum | trunc 10 -}}
binder-config-{{ $hash | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" }}
{{- end }}

{{/* The TracingConfiguration file both components read with --tracing-config-file. */}}
{{- define "placement.tracingConfig" -}}
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
{{- with .Values.tracing.endpoint }}
endpoint: {{ . | quote }}
{{- end }}
samplingRatePerMillion: {{ .Values.tracing.samplingRatePerMillion | int }}
{{- end }}
