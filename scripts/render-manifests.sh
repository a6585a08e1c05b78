#!/usr/bin/env bash
# Renders the kustomize manifests from the Helm chart, the one source of
# evictd's Kubernetes objects: deploy/kubernetes/evictd.yaml (the agent:
# ServiceAccount, RBAC, metrics Service, DaemonSet) and
# deploy/kubernetes/monitoring/monitoring.yaml (ServiceMonitor,
# PrometheusRule, Grafana dashboard). Edit the chart, then run this.
#   scripts/render-manifests.sh          write them
#   scripts/render-manifests.sh --check  fail when they differ from the chart's rendering
set -euo pipefail
cd "$(dirname "$0")/.."
helm=${HELM:-$(scripts/tool-bins.sh helm)}
chart=deploy/helm/evictd
header='# Generated from the Helm chart deploy/helm/evictd by scripts/render-manifests.sh:
# edit the chart, then run the script (the ops tier fails when this is stale).'
# The image is named "evictd" for the kustomization's images: transformer.
render() {
	"$helm" template evictd "$chart" --namespace kube-system --set image.repository=evictd --set managedBy=kustomize "$@"
}
agent=$(printf '%s\n' "$header"; render --set metrics.serviceMonitor.enabled=false --set metrics.prometheusRule.enabled=false --set metrics.dashboard.enabled=false)
monitoring=$(printf '%s\n' "$header"; render --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true --set metrics.dashboard.enabled=true \
	--show-only templates/servicemonitor.yaml --show-only templates/prometheusrule.yaml --show-only templates/dashboard.yaml)
if [ "${1:-}" = --check ]; then
	rc=0
	diff -u deploy/kubernetes/evictd.yaml <(printf '%s\n' "$agent") || rc=1
	diff -u deploy/kubernetes/monitoring/monitoring.yaml <(printf '%s\n' "$monitoring") || rc=1
	[ $rc = 0 ] || echo "deploy/kubernetes/ is stale: run scripts/render-manifests.sh" >&2
	exit $rc
fi
mkdir -p deploy/kubernetes/monitoring
printf '%s\n' "$agent" >deploy/kubernetes/evictd.yaml
printf '%s\n' "$monitoring" >deploy/kubernetes/monitoring/monitoring.yaml
