{{/* The release's full name: the release name, prefixed to "evictd" unless it says evictd already. */}}
{{- define "evictd.fullname" -}}
{{- if contains "evictd" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-evictd" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "evictd.serviceAccountName" -}}
{{- default (include "evictd.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The labels the pods are selected by: never change them in an upgrade (a DaemonSet's selector is immutable). */}}
{{- define "evictd.selectorLabels" -}}
app.kubernetes.io/name: evictd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The recommended labels (kubernetes.io/docs/concepts/overview/working-with-objects/common-labels). */}}
{{- define "evictd.labels" -}}
{{ include "evictd.selectorLabels" . }}
app.kubernetes.io/version: {{ include "evictd.version" . | quote }}
app.kubernetes.io/component: node-agent
app.kubernetes.io/part-of: evictd
app.kubernetes.io/managed-by: {{ default .Release.Service .Values.managedBy }}
{{- if not .Values.managedBy }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}
{{- end -}}

{{- define "evictd.version" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "evictd.image" -}}
{{- $repo := required "image.repository: set it to your registry's evictd image (make image, then make push IMAGE=<repository>:<tag>; docs/install.md)" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (include "evictd.version" .) -}}
{{- end -}}
{{- end -}}
