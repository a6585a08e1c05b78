#!/usr/bin/env bash
# Cost of memory QoS in host mode (docs/qos.md), side by side:
#   1. per synchronize: internal/protect's BenchmarkApply keeping the values
#      of 500 workloads (one process each) — quiet (nothing changed: one
#      cgroup.procs read per workload) and verify (every file and process
#      read again, as once a minute);
#   2. idle CPU and memory of `evictd run` over 500 populated workload
#      cgroups with --memory-qos on and off, both running at the same time
#      (bench/idle.sh ... populated memqos).
# Needs root. Usage: bench/memqos.sh [seconds] [cgroups]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
secs=${1:-60}
n=${2:-500}
benchtime=200x
# Quick mode (bench/run.sh --quick): a few Applies, 20 cgroups idle for 5 s.
[ "${EVICTD_BENCH_QUICK:-}" = 1 ] && secs=${1:-5} n=${2:-20} benchtime=2x

echo "== per synchronize, 500 workloads (go test -bench BenchmarkApply ./internal/protect/)"
go test -run '^$' -bench BenchmarkApply -benchtime "$benchtime" ./internal/protect/ |
	awk '/^Benchmark/{printf "%-28s %12.2f ms/op %10s reads/op %8s writes/op\n", $1, $3/1e6, $5, $7}'
echo
echo "== idle evictd run, $n populated workload cgroups, ${secs}s"
exec bench/idle.sh "$secs" "$n" populated memqos
