#!/usr/bin/env bash
# The project's test command (README: "make test"; CI: .ci/run).
# Usage: scripts/test.sh [all|unit|vm|parity|node]
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
	step "go test (unit, fixtures, real cgroup v1 on this machine)"
	go test -p 2 ./...
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

node() {
	step "a real single-node Kubernetes v1.37.2 cluster"
	scripts/node.sh test
}

case "$tier" in
all) unit; vm; parity; node ;;
unit) unit ;;
vm) vm ;;
parity) parity ;;
node) node ;;
*) echo "usage: $0 [all|unit|vm|parity|node]" >&2; exit 2 ;;
esac
