#!/usr/bin/env bash
# bench/node.sh on the cgroup v2 node (bench/node.sh NODE=v2): evictd beside
# the real kubelet v1.37.2 against the kubelet alone, on the v2 node tier's
# VM (scripts/node-v2.sh: systemd driver, software emulation), side by side
# in one run (docs/benchmarks-node.md):
#   - crossing → eviction accepted by the API, and → the pod's cgroup empty,
#     p50/p99, for the kubelet alone (on cgroup v2 it can only poll: its
#     memcg notification is v1's) and evictd as the DaemonSet ships it;
#   - the same for evictd with one of its v2 wake-ups alone (fast poll, PSI
#     trigger with its 2 s window, memory.events), WAKEUP_TRIALS each;
#   - kernel OOM kills at 100 MiB/s, 500 MiB/s and 2 GiB/s ramps (the
#     fastest the emulated VM produces: the "seen ramp" column says what it
#     reached), 256 MiB of headroom, for both.
# Under emulation absolute times are slow: the ratios in one run are the
# result.
#
# Usage: bench/node.sh NODE=v2                TRIALS=30 OOM_TRIALS=10 WAKEUP_TRIALS=10
#        TRIALS=3 OOM_TRIALS=1 WAKEUP_TRIALS=2 bench/node-v2.sh   (quick)
#   BENCH=/evictd (a -bench suffix) picks sub-benchmarks of BenchmarkNode.
# Rows are kept in .cache/bench-node/rows-v2-<time>.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/node-v2.sh: needs root (the VM node's image)" >&2; exit 1; }
trials=${TRIALS:-30}
oom_trials=${OOM_TRIALS:-10}
wakeup_trials=${WAKEUP_TRIALS:-10}
mkdir -p .cache/bench-node
stamp=$(date -u +%Y%m%d-%H%M%S)
out=$PWD/.cache/bench-node/rows-v2-$stamp.jsonl
t0=$(date +%s)
echo "bench/node-v2.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; TRIALS=$trials OOM_TRIALS=$oom_trials WAKEUP_TRIALS=$wakeup_trials" >&2
EVICTD_NODE_THRESHOLD_MI=256 scripts/node-v2.sh up >&2
rc=0
EVICTD_BENCH_NODE_OUT=/var/lib/evictd-node/rows.jsonl EVICTD_BENCH_NODE_TRIALS=$trials EVICTD_BENCH_NODE_OOM_TRIALS=$oom_trials \
	EVICTD_BENCH_NODE_WAKEUP_TRIALS=$wakeup_trials \
	scripts/node-v2.sh gotest -- -test.run '^$' -test.bench "^BenchmarkNode\$${BENCH:-}" -test.benchtime 1x -test.timeout 300m -test.v >&2 || rc=$?
scripts/node-v2.sh ssh cat /var/lib/evictd-node/rows.jsonl >"$out" || rc=1
kernel=$(scripts/node-v2.sh ssh uname -r || echo '?')
scripts/node-v2.sh down >&2
echo
echo "evictd beside the kubelet v1.37.2 on the cgroup v2 node (qemu TCG, ${EVICTD_NODE_V2_SMP:-2} vCPUs, ${EVICTD_NODE_V2_MEM:-4096} MiB, guest kernel $kernel), $(date -u '+%Y-%m-%d %H:%M UTC'), host load average now $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) host CPUs; whole run $((($(date +%s) - t0) / 60)) min $((($(date +%s) - t0) % 60)) s"
echo
go run ./bench/node "$out"
exit $rc
