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
#   report   bench/report.sh    evictd-tools report on a week-sized decision log
#                                (604,800 records): time and peak heap (no root; ≈ 1 min)
#   memqos   bench/memqos.sh    memory QoS per synchronize and idle, on and off
#                                (root; ≈ 2 min; not in the default set)
#   soak     bench/soak.sh      10 minutes of cgroup churn under pressure: leaks
#                                (root; not in the default set)
#   node     bench/node.sh      evictd beside the real kubelet against the kubelet
#                                alone on the real node (root, the node tier's lock;
#                                ≈ 30–45 min; not in the default set)
#
# Usage: bench/run.sh [--quick] [policy] [collect] [agent] [report] [memqos] [soak] [node]
#   default: policy collect agent report
#   --quick: every script once in its quick mode (EVICTD_BENCH_QUICK=1: a trial
#            or two, short windows, small sizes), all seven by default: what
#            `make test` runs so that a benchmark that no longer runs fails the
#            suite. Its figures are not results and nothing judges them.
# The load average is printed before each: timings on a shared, loaded
# machine are inflated, so note it beside any number you quote.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
which=()
for a in "$@"; do
	case $a in
	--quick) export EVICTD_BENCH_QUICK=1 ;;
	policy | collect | agent | report | memqos | soak | node) which+=("$a") ;;
	*) echo "bench/run.sh: unknown benchmark $a (policy, collect, agent, report, memqos, soak or node; or --quick)" >&2; exit 2 ;;
	esac
done
if [ ${#which[@]} -eq 0 ]; then
	which=(policy collect agent report)
	[ "${EVICTD_BENCH_QUICK:-}" = 1 ] && which=(policy collect agent report memqos soak node)
fi
failed=()
for b in "${which[@]}"; do
	if [ "$b" != policy ] && [ "$b" != report ] && [ "$(id -u)" != 0 ]; then
		echo "== $b: skipped (needs root to create cgroups)"
		continue
	fi
	echo "== $b (load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs, $(date -u +%H:%M:%S) UTC${EVICTD_BENCH_QUICK:+, quick mode})"
	t0=$SECONDS
	# One that fails does not stop the others; the run fails at the end.
	if ! "bench/$b.sh"; then
		failed+=("$b")
		echo "== $b FAILED"
	fi
	echo "== $b: $((SECONDS - t0)) s"
	echo
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "bench/run.sh: failed: ${failed[*]}" >&2
	exit 1
fi
