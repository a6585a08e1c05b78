#!/usr/bin/env bash
# evictd beside the real kubelet v1.37.2 against the kubelet alone, on the
# real single-node cluster of the node tier (scripts/node.sh), side by side
# in one run (docs/benchmarks-node.md):
#   - crossing → eviction accepted by the API, and → the pod's cgroup empty,
#     p50/p99, for evictd (the DaemonSet from deploy/kubernetes/), the kubelet
#     alone polling every 10 s, and the kubelet alone with
#     kernelMemcgNotification (memcg threshold eventfds, cgroup v1);
#   - kernel OOM kills, crossing → growth stopped and → the pod's cgroup
#     empty, at ramps past the kubepods limit (500 MiB/s paced, one and two
#     threads touching memory at full speed), with the hog obeying and
#     ignoring SIGTERM, at 256 and 64 MiB between the eviction threshold and
#     the kubepods limit, for the same three and evictd with its growth stop
#     off (--stop-growth=false);
#   - evictd's synchronize cost and RSS with its own pod only, and with 110
#     pods on the node (the kubelet's default maxPods), from its /metrics.
# The node is brought up for each headroom twice (kubelet with
# kernelMemcgNotification, then polling) with memory.available<HEADROOM hard
# and maxPods 110, and torn down after each; the latency and synchronize
# rows run at the first headroom only.
#
# Usage: bench/node.sh            TRIALS=30 OOM_TRIALS=10 WINDOW=120s HEADROOMS="256 64", ≈ 2 h
#        bench/node.sh NODE=v2   the cgroup v2 node in its VM (bench/node-v2.sh)
#        TRIALS=5 OOM_TRIALS=2 WINDOW=30s HEADROOMS=64 bench/node.sh   (quick, ≈ 25 min)
#   OOM_RAMPS="500Mi/s,1 thread,2 threads" and OOM_SIGTERM="obeyed,ignored" pick the OOM cells.
#   SYNC_PODS=250 fills the node to 250 pods (maxPods 250) in the synchronize row instead of 110.
#   NODES="memcg polling" (default; the 110 pods last) picks the node configurations; BENCH=/evictd
#   (a -bench suffix) picks sub-benchmarks of BenchmarkNode, e.g. BENCH=/evictd/sync.
# Needs root and the node tier's lock: run it as
#   flock /tmp/evictd-node.lock env EVICTD_NODE_LOCKED=1 bench/node.sh
# (without EVICTD_NODE_LOCKED=1 it takes the lock itself, waiting as long as
# another node is in use). The rows are kept in .cache/bench-node/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
# NODE=v2 (as an argument or in the environment): the cgroup v2 node in its
# VM, bench/node-v2.sh.
for a in "$@"; do case $a in NODE=*) NODE=${a#NODE=} ;; esac; done
if [ "${NODE:-v1}" = v2 ]; then exec bench/node-v2.sh; fi
[ "$(id -u)" = 0 ] || { echo "bench/node.sh: needs root (a Kubernetes node, cgroups, /dev/kmsg)" >&2; exit 1; }
trials=${TRIALS:-30}
oom_trials=${OOM_TRIALS:-10}
window=${WINDOW:-120s}
nodes=${NODES:-memcg polling}
headrooms=${HEADROOMS:-256 64}
sync_pods=${SYNC_PODS:-110}
oom_ramps=${OOM_RAMPS:-} oom_sigterm=${OOM_SIGTERM:-}
# Quick mode (bench/run.sh --quick, EVICTD_BENCH_QUICK=1, what make test
# runs so that a benchmark that no longer runs fails the suite): one
# headroom, the polling node only (the memcg node runs the same code with
# another kubelet setting), one trial per row, one OOM cell (500 MiB/s,
# SIGTERM obeyed), 10 s windows and 10 pods in the synchronize row.
if [ "${EVICTD_BENCH_QUICK:-}" = 1 ]; then
	trials=${TRIALS:-1} oom_trials=${OOM_TRIALS:-1} window=${WINDOW:-10s} nodes=${NODES:-polling} headrooms=${HEADROOMS:-256}
	sync_pods=${SYNC_PODS:-10} oom_ramps=${OOM_RAMPS:-500Mi/s} oom_sigterm=${OOM_SIGTERM:-obeyed}
fi
# The node's maxPods: the kubelet's default 110, or more for SYNC_PODS=250.
max_pods=$((sync_pods > 110 ? sync_pods : 110))
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
echo "bench/node.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs, kernel $(uname -r); TRIALS=$trials OOM_TRIALS=$oom_trials WINDOW=$window NODES=\"$nodes\" HEADROOMS=\"$headrooms\"" >&2
first=1
for h in $headrooms; do
	for n in $nodes; do
		case $n in
		polling) memcg=false ;;
		memcg) memcg=true ;;
		*) echo "bench/node.sh: unknown node configuration $n (polling or memcg)" >&2; exit 2 ;;
		esac
		bench=${BENCH:-}
		if [ -z "$bench" ] && [ "$first" != 1 ]; then
			bench='/.*/(oom|nostop)' # the other headrooms: the OOM rows only
		fi
		echo "== node: memory.available<${h}Mi, kubelet kernelMemcgNotification=$memcg ($(date -u +%H:%M:%S) UTC)" >&2
		# The test binary brings the node up and down itself (test/node's
		# TestMain, with its no-traffic and leave-nothing checks).
		EVICTD_TEST_NODE=1 EVICTD_NODE_THRESHOLD_MI=$h EVICTD_NODE_MAX_PODS=$max_pods EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION=$memcg \
			EVICTD_BENCH_NODE_OUT=$out EVICTD_BENCH_NODE_TRIALS=$trials EVICTD_BENCH_NODE_OOM_TRIALS=$oom_trials EVICTD_BENCH_NODE_WINDOW=$window EVICTD_BENCH_NODE_SYNC_PODS=$sync_pods \
			EVICTD_BENCH_NODE_OOM_RAMPS=$oom_ramps EVICTD_BENCH_NODE_OOM_SIGTERM=$oom_sigterm \
			go test -count=1 -p 1 -timeout 180m -run '^$' -bench "^BenchmarkNode\$${bench}" -benchtime 1x ./test/node/ >&2
	done
	first=0
done
scripts/node.sh check >&2
echo
echo "evictd beside the kubelet v1.37.2 on the real node, $(date -u '+%Y-%m-%d %H:%M UTC'), load average now $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, kernel $(uname -r); whole run $((($(date +%s) - t0) / 60)) min $((($(date +%s) - t0) % 60)) s"
echo
go run ./bench/node "$out"
