#!/usr/bin/env bash
# Parity tier: the upstream kubelet v1.37.2 eviction manager as an oracle.
#
# Usage:
#   scripts/test-parity.sh              check the corpus and evictd simulate against the kubelet
#   scripts/test-parity.sh -update      rewrite testdata/scenarios/*.kubelet.json and the kubelet's
#                                       feature gate list (internal/policy) from the kubelet
#   scripts/test-parity.sh oracle FILE… print the kubelet's outcomes for scenario files
#
# What it does (see testdata/scenarios/README.md):
#  1. Prepares parity/ (a separate Go module that imports k8s.io/kubernetes):
#     `go mod vendor` (only the packages the eviction manager needs; redone
#     when go.mod/go.sum change) and a build overlay that adds
#     parity/_overlay/eviction_export.go to the vendored
#     k8s.io/kubernetes/pkg/kubelet/eviction, so the oracle can call its
#     unexported synchronize. Go refuses overlays inside the module cache,
#     hence the vendor directory.
#  2. Re-runs the kubelet on every scenario and fails if a committed
#     <name>.kubelet.json differs.
#  3. Builds the main module's evictd (a failed build fails the tier), runs
#     `evictd simulate` on every scenario and on fixed-seed random scenarios,
#     and fails when its decisions are not one of the kubelet's outcomes.
# Builds use the normal Go build cache: the first run compiles ~1650 packages
# of k8s.io/kubernetes and its dependencies (minutes), later runs seconds.
# -trimpath keeps the vendored packages' directory out of the cache keys, so
# a clone in another folder (CI clones afresh every run) reuses that cache
# instead of compiling Kubernetes again.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
root=$PWD
mod=$root/parity
build=$mod/.build
mkdir -p "$build"

prepare() {
	# Vendor only when go.mod/go.sum changed since the last vendoring.
	local sum
	sum=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)
	if [ ! -f "$mod/vendor/modules.txt" ] || [ "$(cat "$build/vendor.sum" 2>/dev/null)" != "$sum" ]; then
		echo "parity: vendoring k8s.io/kubernetes v1.37.2 and its dependencies"
		(cd "$mod" && go mod vendor)
		echo "$sum" >"$build/vendor.sum"
	fi
	printf '{"Replace":{"%s/vendor/k8s.io/kubernetes/pkg/kubelet/eviction/zz_parity_export.go":"%s/_overlay/eviction_export.go"}}\n' \
		"$mod" "$mod" >"$build/overlay.json"
}

# evictd_bin builds the main module's evictd and prints its path. A build
# that fails, or an evictd without a working `simulate`, fails the tier: the
# parity tests would otherwise skip and pass without comparing anything.
evictd_bin() {
	if ! go build -o "$build/evictd" ./cmd/evictd >"$build/evictd-build.log" 2>&1; then
		cat "$build/evictd-build.log" >&2
		echo "parity: FAILED: go build ./cmd/evictd failed (above), so nothing could be compared with the kubelet" >&2
		return 1
	fi
	if ! "$build/evictd" simulate --help >/dev/null 2>&1; then
		echo "parity: FAILED: $build/evictd simulate --help failed: evictd has no working simulate command" >&2
		return 1
	fi
	echo "$build/evictd"
}

prepare
case "${1:-}" in
oracle)
	shift
	(cd "$mod" && go build -trimpath -overlay "$build/overlay.json" -o "$build/kubelet-oracle" ./cmd/kubelet-oracle)
	exec "$build/kubelet-oracle" "$@"
	;;
-update | --update)
	(cd "$mod" && go test -trimpath -overlay "$build/overlay.json" -count=1 -run '^(TestCorpus|TestKubeletFeatureGates)$' . -args -update)
	echo "parity: rewrote testdata/scenarios/*.kubelet.json and internal/policy/kubelet_feature_gates.go; review the diff before committing"
	exit 0
	;;
"") ;;
*)
	sed -n '2,8p' "$0" >&2
	exit 2
	;;
esac

bin=$(evictd_bin)
# -count=1: the simulate tests exec a binary, which the test cache cannot see.
set +e
(cd "$mod" && EVICTD_BIN=$bin go test -trimpath -overlay "$build/overlay.json" -count=1 -v ./...) >"$build/test.log" 2>&1
rc=$?
set -e
if [ $rc -ne 0 ]; then
	# Everything but the passing noise: failures with their diffs, skips with reasons.
	grep -vE '^\s*(=== (RUN|PAUSE|CONT)|--- PASS)' "$build/test.log"
	echo "parity: FAILED (full log: $build/test.log)"
	exit $rc
fi
# Passing: the per-test summaries (counts of outcomes, matches, skips) and the package lines.
grep -E '^\s*(--- SKIP|ok |[a-z_]+_test\.go:[0-9]+: )' "$build/test.log" | sed 's/^ *//'
echo "parity: ok"
