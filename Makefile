# evictd — the commands a newcomer needs are in README.md.
GO ?= go

.PHONY: build test test-unit test-vm test-parity test-apiserver test-node node-up node-down bench demo lint-go

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

bench:
	./bench/run.sh

demo: build
	./bin/evictd demo
