#!/usr/bin/env bash
# The ops tier (make test-ops): what a user installs and watches evictd with,
# checked with the tools they use. helm and promtool come from the module
# proxy (scripts/tool-bins.sh, cached on tools/*/go.sum).
#   - the Helm chart: helm lint --strict, helm template with every mode and
#     option, clear errors for a missing image and a bad mode, and
#     deploy/kubernetes/ current with the chart's rendering;
#   - the alert rules: promtool check rules and promtool test rules;
#   - the image tool's tests (tools/image: reproducible builds, multi-platform
#     index, push to a registry on loopback), and make image twice: one digest.
# The node tier installs the image through the chart and through kustomize,
# scrapes it with a real Prometheus and runs every dashboard query.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf -- '--> %s\n' "$*"; }
fail() { echo "ops: $*" >&2; exit 1; }
helm=$(scripts/tool-bins.sh helm)
promtool=$(scripts/tool-bins.sh promtool)
chart=deploy/helm/evictd
# Helm writes its cache and configuration under $HOME by default: keep them
# in a directory of the run.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HELM_CACHE_HOME=$tmp/cache HELM_CONFIG_HOME=$tmp/config HELM_DATA_HOME=$tmp/data

step "helm lint --strict"
"$helm" lint --strict "$chart" -f "$chart/ci/test-values.yaml"

step "helm template: every mode and option renders"
for set in "" "mode=shadow" "mode=dry-run" "metrics.secure.enabled=false" "metrics.secure.tlsSecret=evictd-tls" \
	"thresholds.evictionHard=memory.available<500Mi" "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" \
	"metrics.readerClusterRole=false" "logFormat=json"; do
	"$helm" template evictd "$chart" -n evictd -f "$chart/ci/test-values.yaml" ${set:+--set "$set"} >"$tmp/out.yaml" || fail "helm template --set $set"
done
grep -q -- '--shadow' <("$helm" template evictd "$chart" -f "$chart/ci/test-values.yaml" --set mode=shadow) || fail "mode=shadow does not pass --shadow"
step "helm template: a missing image and a bad mode are clear errors"
if out=$("$helm" template evictd "$chart" 2>&1); then fail "rendered without image.repository"; fi
grep -q "image.repository: set it to your registry's evictd image" <<<"$out" || fail "no clear error without image.repository: $out"
if out=$("$helm" template evictd "$chart" -f "$chart/ci/test-values.yaml" --set mode=enforcing 2>&1); then fail "rendered mode=enforcing"; fi
grep -q 'mode: "enforcing": want enforce, shadow or dry-run' <<<"$out" || fail "no clear error for a bad mode: $out"

step "deploy/kubernetes/ is the chart's rendering"
HELM=$helm scripts/render-manifests.sh --check

step "promtool check rules, promtool test rules"
"$promtool" check rules "$chart/files/alerts.yaml"
"$promtool" test rules "$chart/files/alerts_test.yaml"

step "tools/image tests"
(cd tools/image && go test -count=1 ./...)

step "make image twice: one digest"
a=$(scripts/image.sh build evictd:ops | awk '{print $2}')
b=$(scripts/image.sh build evictd:ops | awk '{print $2}')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "two builds of the same tree: $a and $b"
echo "evictd:ops $a (both builds)"
