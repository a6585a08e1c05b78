#!/usr/bin/env bash
# Builds the Kubernetes v1.37.2 binaries the real-node tier runs (kubelet,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) from the
# separate module test/node/k8s into .cache/node/bin, and prints that
# directory. The build is cached: it is redone only when that module's
# go.mod/go.sum change (the key is kept in .cache/node/bin/.key), so a second
# run costs a hash. A cold build compiles ~2,000 Kubernetes packages (see
# docs/testing.md for the measured time); -trimpath lets a clone in another
# folder reuse Go's build cache.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
root=$PWD
mod=$root/test/node/k8s
out=$root/.cache/node/bin
key=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)
if [ -f "$out/.key" ] && [ "$(cat "$out/.key")" = "$key" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"
rm -f "$out/.key"
version=v1.37.2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
start=$(date +%s)
echo "node-bins: building Kubernetes $version (kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)" >&2
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/" \
	k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubectl) >&2
echo "$key" >"$out/.key"
echo "node-bins: built in $(($(date +%s) - start)) s" >&2
echo "$out"
