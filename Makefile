# evictd — the commands a newcomer needs are in README.md.
GO ?= go
# The toolchain the go.mod files name (go1.27.3, fetched through the Go module
# proxy by the go command): scripts/toolchain.sh says why.
export GOTOOLCHAIN ?= auto

.PHONY: build test test-unit test-vm test-parity test-apiserver test-node test-bench node-up node-down bench demo lint-go docs-plots

build:
	$(GO) build -o bin/evictd ./cmd/evictd

# The whole suite: everything CI runs. It installs what the tests need
# (Debian packages, the VM kernel) on first use and caches it.
test:
	./scripts/test.sh all

# Unit, fixture and real-cgroup-v1 tests on this machine.
test-unit:
	./scripts/test.sh unit

# Real cgroup v2 tests in a qemu VM.
test-vm:
	./scripts/test.sh vm

# Decisions compared with the upstream kubelet eviction manager.
test-parity:
	./scripts/test.sh parity

# Kubernetes mode on a real kube-apiserver and etcd (loopback, no kubelet).
test-apiserver:
	./scripts/test.sh apiserver

# A real single-node Kubernetes v1.37.2 cluster: smoke tests, no-traffic and
# leave-nothing checks (docs/testing.md).
test-node:
	./scripts/test.sh node

# Bring that node up by hand (last line: KUBECONFIG=<admin kubeconfig>) and
# remove it again.
node-up:
	@./scripts/node.sh up

node-down:
	@./scripts/node.sh down

# Every benchmark once in its quick mode (a trial or two, nothing judged):
# the last tier of make test.
test-bench:
	./scripts/test.sh bench

bench:
	./bench/run.sh

demo: build
	./bin/evictd demo

# The charts docs/plot.md shows, drawn by `evictd simulate --plot`
# (cmd/evictd TestDocsPlotsUpToDate fails when they are stale).
DOCS_PLOTS = memory-pressure-soft-then-hard disk-pressure-nodefs-split
docs-plots: build
	for s in $(DOCS_PLOTS); do ./bin/evictd simulate --scenario testdata/scenarios/$$s.yaml --plot docs/img/$$s.svg >/dev/null || exit 1; done
