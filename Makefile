# evictd — the commands a newcomer needs are in README.md.
GO ?= go
# The toolchain the go.mod files name (go1.27.3, fetched through the Go module
# proxy by the go command): scripts/toolchain.sh says why.
export GOTOOLCHAIN ?= auto

.PHONY: build image push manifests test test-unit test-vm test-parity test-apiserver test-ops test-node test-node-v2 test-bench node-up node-down bench demo lint-go docs-plots

# The version stamped into evictd (evictd version, evictd_build_info), the
# commit, and the commit's time: scripts/version.sh.
VERSION_INFO := $(shell scripts/version.sh)
VERSION ?= $(word 1,$(VERSION_INFO))
REVISION ?= $(word 2,$(VERSION_INFO))
# STRIP: the binaries are built as the release image builds them, without
# the symbol table and DWARF (-s -w; a panic's stack trace keeps its function
# names and lines): the agent is 34 MB so, 48 MB with them. STRIP= keeps
# them, for a debugger.
STRIP ?= -s -w
LDFLAGS = $(STRIP) -X github.com/evictd/evictd/internal/version.stamped=$(VERSION) -X github.com/evictd/evictd/internal/version.revision=$(REVISION)

# bin/evictd is the agent (what a node runs: run, explain, lint, qos, stat,
# selftest, demo, simulate); bin/evictd-tools the offline commands that draw
# (report, simulate --plot), kept apart so that the agent links neither
# html/template nor the plotting stack (cmd/evictd/depaware.txt).
# bin/kubectl-evictd is the kubectl plugin: evictd under that name runs
# "explain --cluster" (put bin/ on PATH: "kubectl evictd").
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/evictd ./cmd/evictd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/evictd-tools ./cmd/evictd-tools
	ln -sf evictd bin/kubectl-evictd

# The release image: the agent evictd (not evictd-tools) for linux/amd64 and
# linux/arm64 in one OCI index, reproducible from the tree
# (.cache/image/evictd.tar; IMAGE names it), and its push to your registry
# (docs/install.md):
#   make image && make push IMAGE=registry.example.com/evictd:v0.1.0
IMAGE ?= evictd:$(VERSION)
image:
	./scripts/image.sh build $(IMAGE)

push:
	./scripts/image.sh push $(IMAGE)

# deploy/kubernetes/ rendered from the Helm chart deploy/helm/evictd.
manifests:
	./scripts/render-manifests.sh

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

# The Helm chart (helm lint/template), the alert rules (promtool test rules),
# the image's reproducibility.
test-ops:
	./scripts/test.sh ops

# A real single-node Kubernetes v1.37.2 cluster: smoke tests, no-traffic and
# leave-nothing checks (docs/testing.md).
test-node:
	./scripts/test.sh node

# The same on cgroup v2: a node with the systemd cgroup driver in a qemu VM
# (Debian userland, systemd as PID 1), its tests run in the guest.
test-node-v2:
	./scripts/test.sh node-v2

# Bring a node up by hand (last line: KUBECONFIG=<admin kubeconfig>) and
# remove it again; NODE=v2 for the cgroup v2 node in its VM.
NODE ?= v1
node-up:
	@if [ "$(NODE)" = v2 ]; then ./scripts/node-v2.sh up; else ./scripts/node.sh up; fi

node-down:
	@if [ "$(NODE)" = v2 ]; then ./scripts/node-v2.sh down; else ./scripts/node.sh down; fi

# Every benchmark once in its quick mode (a trial or two, nothing judged):
# the last tier of make test.
test-bench:
	./scripts/test.sh bench

bench:
	./bench/run.sh

demo: build
	./bin/evictd demo

# The charts docs/plot.md shows, drawn by `evictd-tools simulate --plot`
# (cmd/evictd-tools TestDocsPlotsUpToDate fails when they are stale).
DOCS_PLOTS = memory-pressure-soft-then-hard disk-pressure-nodefs-split
docs-plots: build
	for s in $(DOCS_PLOTS); do ./bin/evictd-tools simulate --scenario testdata/scenarios/$$s.yaml --plot docs/img/$$s.svg >/dev/null || exit 1; done
