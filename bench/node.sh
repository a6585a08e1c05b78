#!/usr/bin/env bash
# evictd beside the real kubelet v1.37.2 against the kubelet alone, on the
# real single-node cluster of the node tier (scripts/node.sh), side by side
# in one run (docs/benchmarks-node.md):
#   - crossing → eviction accepted by the API, and → the pod's cgroup empty,
#     p50/p99, for evictd (the DaemonSet from deploy/kubernetes/), the kubelet
#     alone polling every 10 s, and the kubelet alone with
#     kernelMemcgNotification (memcg threshold eventfds, cgroup v1);
#   - kernel OOM kills at ramps of 100 MiB/s, 500 MiB/s and 2 GiB/s with
#     256 MiB between the eviction threshold and the kubepods limit, for the
#     same three;
#   - evictd's synchronize cost and RSS with its own pod only, and with 110
#     pods on the node (the kubelet's default maxPods), from its /metrics.
# The node is brought up twice (kubelet with kernelMemcgNotification, then polling)
# with memory.available<256Mi hard and maxPods 110, and torn down after each.
#
# Usage: bench/node.sh            TRIALS=30 OOM_TRIALS=10 WINDOW=120s, ≈ 35 min
#        TRIALS=5 OOM_TRIALS=2 WINDOW=30s bench/node.sh   (quick, ≈ 10 min)
#   NODES="memcg polling" (default; the 110 pods last) picks the node configurations; BENCH=/evictd
#   (a -bench suffix) picks sub-benchmarks of BenchmarkNode, e.g. BENCH=/evictd/sync.
# Needs root and the node tier's lock: run it as
#   flock /tmp/evictd-node.lock env EVICTD_NODE_LOCKED=1 bench/node.sh
# (without EVICTD_NODE_LOCKED=1 it takes the lock itself, waiting as long as
# another node is in use). The rows are kept in .cache/bench-node/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
[ "$(id -u)" = 0 ] || { echo "bench/node.sh: needs root (a Kubernetes node, cgroups, /dev/kmsg)" >&2; exit 1; }
trials=${TRIALS:-30}
oom_trials=${OOM_TRIALS:-10}
window=${WINDOW:-120s}
nodes=${NODES:-memcg polling}
sync_pods=${SYNC_PODS:-110}
# Quick mode (bench/run.sh --quick, EVICTD_BENCH_QUICK=1): the polling node
# only (the memcg node runs the same code with another kubelet setting), one
# trial per row and ramp, 10 s windows, 10 pods for the synchronize row.
if [ "${EVICTD_BENCH_QUICK:-}" = 1 ]; then
	trials=${TRIALS:-1} oom_trials=${OOM_TRIALS:-1} window=${WINDOW:-10s} nodes=${NODES:-polling} sync_pods=${SYNC_PODS:-10}
fi
if [ "${EVICTD_NODE_LOCKED:-}" != 1 ]; then
	exec 9>/tmp/evictd-node.lock
	echo "bench/node.sh: waiting for /tmp/evictd-node.lock" >&2
	flock 9
	export EVICTD_NODE_LOCKED=1
fi
mkdir -p .cache/bench-node
out=$PWD/.cache/bench-node/rows-$(date -u +%Y%m%d-%H%M%S).jsonl
: >"$out"
t0=$(date +%s)
echo "bench/node.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs, kernel $(uname -r); TRIALS=$trials OOM_TRIALS=$oom_trials WINDOW=$window NODES=\"$nodes\"" >&2
for n in $nodes; do
	case $n in
	polling) memcg=false ;;
	memcg) memcg=true ;;
	*) echo "bench/node.sh: unknown node configuration $n (polling or memcg)" >&2; exit 2 ;;
	esac
	echo "== node: kubelet kernelMemcgNotification=$memcg ($(date -u +%H:%M:%S) UTC)" >&2
	# The test binary brings the node up and down itself (test/node's
	# TestMain, with its no-traffic and leave-nothing checks).
	EVICTD_TEST_NODE=1 EVICTD_NODE_THRESHOLD_MI=256 EVICTD_NODE_MAX_PODS=110 EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION=$memcg \
		EVICTD_BENCH_NODE_OUT=$out EVICTD_BENCH_NODE_TRIALS=$trials EVICTD_BENCH_NODE_OOM_TRIALS=$oom_trials EVICTD_BENCH_NODE_WINDOW=$window EVICTD_BENCH_NODE_SYNC_PODS=$sync_pods \
		go test -count=1 -p 1 -timeout 120m -run '^$' -bench "^BenchmarkNode\$${BENCH:-}" -benchtime 1x ./test/node/ >&2
done
scripts/node.sh check >&2
echo
echo "evictd beside the kubelet v1.37.2 on the real node, $(date -u '+%Y-%m-%d %H:%M UTC'), load average now $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, kernel $(uname -r); whole run $((($(date +%s) - t0) / 60)) min $((($(date +%s) - t0) % 60)) s"
echo
go run ./bench/node "$out"
