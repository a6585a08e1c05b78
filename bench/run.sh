#!/usr/bin/env bash
# bench/run.sh — every benchmark script of bench/, one after the other, each
# printing its own table (`make bench` calls this). About 10 minutes in all.
#
#   policy   bench/policy.sh    Engine.Step per synchronize, 110 and 1,000 pods
#                                (no root; ≈ 1–2 min)
#   collect  bench/collect.sh   evictd vs opencontainers/cgroups per cgroup, full
#                                and eviction-only Summary of 100 pods × 3 containers
#                                (root, cgroup v1 memory controller; ≈ 1–2 min)
#   agent    bench/agent.sh     detection latency, OOM avoidance, idle cost with
#                                500 cgroups; v2 rows in the qemu VM (root; ≈ 20 min)
#   report   bench/report.sh    evictd report on a week-sized decision log (604,800
#                                records): time and peak heap (no root; ≈ 1 min)
#   node     bench/node.sh      evictd beside the real kubelet against the kubelet
#                                alone on the real node (root, the node tier's lock;
#                                ≈ 30–45 min; not in the default set)
#
# Usage: bench/run.sh [policy] [collect] [agent] [report] [node]   (default: all but node)
# The load average is printed before each: timings on a shared, loaded
# machine are inflated, so note it beside any number you quote.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(policy collect agent report)
for b in "${which[@]}"; do
	case $b in
	policy | collect | agent | report | node) ;;
	*) echo "bench/run.sh: unknown benchmark $b (policy, collect, agent, report or node)" >&2; exit 2 ;;
	esac
	if [ "$b" != policy ] && [ "$b" != report ] && [ "$(id -u)" != 0 ]; then
		echo "== $b: skipped (needs root to create cgroups)"
		continue
	fi
	echo "== $b (load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs, $(date -u +%H:%M:%S) UTC)"
	"bench/$b.sh"
	echo
done
