#!/usr/bin/env bash
# bench/report.sh — `evictd-tools report` on a week-sized decision log: 604,800
# records (a week at one per second, made from the real demo's records, an
# eviction every 10 minutes; ≈ 900 MiB), rendered once. Prints the wall and
# CPU time, the throughput and the peak live heap (sampled every 5 ms).
# No root; about a minute (most of it writing the log).
#
# Usage: bench/report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
# Quick mode (bench/run.sh --quick): an hour of records instead of a week.
[ "${EVICTD_BENCH_QUICK:-}" = 1 ] && export EVICTD_BENCH_REPORT_RECORDS=3600
go test ./internal/report/ -run '^$' -bench '^BenchmarkRenderWeek$' -benchtime 1x >"$out"
awk '
/^BenchmarkRenderWeek/ {
	for (f = 3; f < NF; f += 2) v[$(f + 1)] = $f
	printf "%-10s %10s %10s %10s %12s %14s\n", "records", "log", "wall", "cpu", "throughput", "peak heap"
	printf "%-10d %6.0f MiB %9.1fs %9.1fs %7.0f MB/s %10.1f MiB\n", v["records"], v["log-MiB"], v["ns/op"] / 1e9, v["cpu-s/op"], v["MB/s"], v["peak-heap-MiB"]
	found = 1
}
END { if (!found) { print "bench/report.sh: no benchmark line"; exit 1 } }
' "$out" || { cat "$out"; exit 1; }
