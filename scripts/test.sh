#!/usr/bin/env bash
# The project's test command (README: "make test"; CI: .ci/run).
# Usage: scripts/test.sh [all|unit|vm|parity|apiserver|node|node-v2|fuzz]
# It installs what the tests need on first use and caches it, so it works on a
# fresh machine that has only Go, and is quick on the second run.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=${1:-all}

step() { printf '\n==> %s\n' "$*"; }

unit() {
	step "gofmt"
	bad=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
	if [ -n "$bad" ]; then echo "gofmt would change: $bad"; exit 1; fi
	step "go vet"
	go vet ./...
	step "go test -race (unit, fixtures, real cgroup v1 on this machine)"
	require_real_cgroups
	unit_packages
	go test -race -p 2 ./...
	fuzz
}

# In CI (CI set and not "false") the real-cgroup v1 tests are meant to run:
# the machine must be root, and EVICTD_REQUIRE_REAL_CGROUP=1 turns a test's
# "cannot run here" skip into a failure (cgrouptest.NeedReal), so a tier
# where every real test skipped cannot pass. Set it yourself to get the same
# on your machine.
require_real_cgroups() {
	if [ -n "${CI:-}" ] && [ "${CI}" != false ]; then
		export EVICTD_REQUIRE_REAL_CGROUP=1
	fi
	if [ "${EVICTD_REQUIRE_REAL_CGROUP:-}" = 1 ] && [ "$(id -u)" != 0 ]; then
		echo "the real-cgroup tests must run here (CI or EVICTD_REQUIRE_REAL_CGROUP=1) and need root; run as root" >&2
		exit 1
	fi
}

# The report's test opens the page in a real headless browser, Debian's
# chromium (run in a network namespace with only loopback; see
# cmd/evictd/report_browser_test.go), and the completion test runs the
# generated scripts in real shells: bash with bash-completion, zsh and fish
# (cmd/evictd/completion_test.go). Installed once, as root, through the
# tiers' one apt installer (one apt-get update for all); where they cannot
# be (not root) those tests skip, or fail where the real tests are required.
unit_packages() {
	if [ "$(id -u)" = 0 ]; then
		scripts/apt-install.sh chromium bash-completion zsh fish
	elif ! command -v chromium >/dev/null 2>&1; then
		echo "chromium, bash-completion, zsh or fish are missing and installing them needs root: the headless-browser and shell completion tests will skip (or fail in CI)"
	fi
}

# Every fuzz target for a bounded time (FUZZTIME each, 2s by default): the
# parsers of kernel files and input files meet inputs their seeds do not
# have. A failure prints the input that broke it (saved under testdata/fuzz).
# -fuzzminimizetime 0: by default the fuzzer spends up to 60 s shrinking each
# new interesting input, so a 2 s run stalls there and barely fuzzes; a
# crasher is still saved whole.
fuzz() {
	step "fuzz (${FUZZTIME:-2s} per target)"
	local pkg target n=0
	for pkg in $(go list ./...); do
		for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
			fuzz_target "$pkg" "$target"
			n=$((n + 1))
		done
	done
	echo "$n fuzz targets ran"
}

# Go 1.26's fuzz coordinator can fail a target at the end of a -fuzztime
# window with a bare "context deadline exceeded" and no input: it compares
# the deadline context's error with its child's before the cancel has reached
# the child (golang/go#75804, fixed in Go 1.27). Seen here in two of three
# runs of the 34 targets (FuzzParseFlatKeyed, FuzzParseCPUStatV2). That one
# signature (the deadline message, no failing input written, no panic) is run
# again, at most twice; any other failure fails at once, and a third deadline
# in a row fails too.
fuzz_target() {
	local pkg=$1 target=$2 out try
	for try in 1 2 3; do
		if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME:-2s}" -fuzzminimizetime 0 "$pkg" 2>&1); then
			return 0
		fi
		if [ "$try" -lt 3 ] && fuzz_deadline_race "$out"; then
			echo "fuzz: $pkg $target: Go's fuzz deadline race (golang/go#75804, no input found); running it again"
			continue
		fi
		echo "$out"
		echo "fuzz: $pkg $target failed"
		exit 1
	done
}

fuzz_deadline_race() {
	case $1 in
	*"Failing input written"* | *"panic:"* | *"fuzzing process hung or terminated unexpectedly"*) return 1 ;;
	esac
	# The target's FAIL line followed by the deadline message and nothing of its own.
	printf '%s\n' "$1" | grep -A1 -- '^--- FAIL: Fuzz' | grep -qx '    context deadline exceeded'
}

vm() {
	if [ -x scripts/test-vm.sh ]; then
		step "go test in a cgroup v2 VM"
		scripts/test-vm.sh
	else
		echo "VM tier: not built yet (scripts/test-vm.sh missing)"
	fi
}

parity() {
	if [ -x scripts/test-parity.sh ]; then
		step "parity with the upstream kubelet eviction manager"
		scripts/test-parity.sh
	else
		echo "parity tier: not built yet (scripts/test-parity.sh missing)"
	fi
}

# Kubernetes mode against a real kube-apiserver v1.37.2 and etcd on loopback
# (no kubelet): informers, the Eviction API with PodDisruptionBudgets, the
# shipped RBAC. Binaries from scripts/node-bins.sh (cached; EVICTD_K8S_BIN
# overrides), etcd from Debian's etcd-server.
apiserver() {
	step "Kubernetes mode on a real kube-apiserver and etcd"
	# Debian's etcd, with the node tier's other packages (one installer,
	# which keeps packages from starting services of their own).
	scripts/node.sh deps
	local bin=${EVICTD_K8S_BIN:-}
	[ -n "$bin" ] || bin=$(scripts/node-bins.sh)
	EVICTD_TEST_APISERVER=1 EVICTD_K8S_BIN=$bin go test -p 1 -count=1 ./internal/kube/...
	EVICTD_TEST_APISERVER=1 EVICTD_K8S_BIN=$bin go test -p 1 -count=1 -run 'RunKube|SelftestKube' ./cmd/evictd/
}

node() {
	step "a real single-node Kubernetes v1.37.2 cluster"
	scripts/node.sh test
}

# The same node on cgroup v2 with the systemd driver, in a qemu VM (Debian,
# systemd as PID 1): scripts/node-v2.sh, docs/testing.md.
node_v2() {
	step "a real single-node Kubernetes v1.37.2 cluster on cgroup v2 (systemd driver), in a VM"
	scripts/node-v2.sh test
}

case "$tier" in
all) unit; vm; parity; apiserver; node; node_v2 ;;
unit) unit ;;
fuzz) fuzz ;;
vm) vm ;;
parity) parity ;;
apiserver) apiserver ;;
node) node ;;
node-v2) node_v2 ;;
*) echo "usage: $0 [all|unit|vm|parity|apiserver|node|node-v2|fuzz]" >&2; exit 2 ;;
esac
