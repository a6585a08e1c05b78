#!/usr/bin/env bash
# Builds the third-party commands the tests run from the Go module proxy,
# each pinned by a module of its own under tools/, and prints the path of
# the binary. Usage: scripts/tool-bins.sh helm|promtool|prometheus
#
#   helm        tools/helm        helm lint / template / install of deploy/helm/evictd
#   promtool    tools/prometheus  promtool check rules / test rules
#   prometheus  tools/prometheus  the server the node tier scrapes evictd with
#
# Like scripts/node-bins.sh for the Kubernetes binaries, a build is cached
# under .cache/tools/<module>/ and redone only when its key changes: the
# module's go.mod and go.sum, the package and the build tags (kept in
# <binary>.key beside it), so a second run costs a hash. Each binary is
# built alone, so a tier builds only what it runs. -trimpath lets a clone in
# another folder reuse Go's build cache; CGO_ENABLED=0 makes them static.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
name=${1:-}
tags=
case $name in
helm) mod=helm pkg=helm.sh/helm/v4/cmd/helm ;;
# Only the Kubernetes service discovery in the server (the node tier finds
# evictd's pod through the API server), none in promtool (rules need none):
# the other discoveries (cloud SDKs) would multiply the build for nothing.
promtool) mod=prometheus pkg=github.com/prometheus/prometheus/cmd/promtool tags=remove_all_sd ;;
prometheus) mod=prometheus pkg=github.com/prometheus/prometheus/cmd/prometheus tags=remove_all_sd,enable_kubernetes_sd ;;
*)
	sed -n '2,16p' "$0" >&2
	exit 2
	;;
esac
dir=$root/tools/$mod
out=$root/.cache/tools/$mod
key=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$pkg $tags") | sha256sum | cut -d' ' -f1)
if [ -x "$out/$name" ] && [ -f "$out/$name.key" ] && [ "$(cat "$out/$name.key")" = "$key" ]; then
	echo "$out/$name"
	exit 0
fi
mkdir -p "$out"
rm -f "$out/$name.key"
start=$(date +%s)
echo "tool-bins: building $name ($pkg${tags:+, tags $tags})" >&2
(cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" ${tags:+-tags "$tags"} -o "$out/$name" "$pkg") >&2
echo "$key" >"$out/$name.key"
echo "tool-bins: built $name in $(($(date +%s) - start)) s" >&2
echo "$out/$name"
