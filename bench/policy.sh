#!/usr/bin/env bash
# bench/policy.sh — runs the policy engine's Step benchmarks and prints a
# table against the targets of issue 2 item 10 (110 pods < 200 µs, 1,000 pods
# < 2 ms per synchronize), with allocations per step.
#
# Two times per step: wall clock (ns/op) and CPU time (cpu-ns/op: user+system
# time of the benchmark process, GC included). On a shared, loaded host the
# wall clock mostly measures waiting for a CPU, so the targets are judged on
# CPU time; on a quiet machine the two agree.
#
# Usage: bench/policy.sh [COUNT]   (COUNT runs per benchmark, default 5; the
# table shows medians).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
count="${1:-5}"
benchtime=1s
# Quick mode (bench/run.sh --quick, EVICTD_BENCH_QUICK=1): one short run.
[ "${EVICTD_BENCH_QUICK:-}" = 1 ] && count=1 benchtime=20x
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

go test ./internal/policy/ -run '^$' -bench '^BenchmarkStep$' -benchmem -count "$count" -benchtime "$benchtime" >"$out"

awk '
function median(arr, m,    a, b, t, v) {
	for (a = 1; a <= m; a++) v[a] = arr[a]
	for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[b] < v[a]) { t = v[a]; v[a] = v[b]; v[b] = t }
	return (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
}
/^BenchmarkStep\// {
	name = $1; sub(/^BenchmarkStep\//, "", name); sub(/-[0-9]+$/, "", name)
	i = ++n[name]
	for (f = 3; f < NF; f += 2) {
		if ($(f + 1) == "ns/op") wall[name, i] = $f
		if ($(f + 1) == "cpu-ns/op") cpu[name, i] = $f
		if ($(f + 1) == "allocs/op") allocs[name] = $f
		if ($(f + 1) == "B/op") bytes[name] = $f
	}
	if (!(name in seen)) { seen[name] = 1; order[++k] = name }
}
END {
	printf "%-26s %11s %11s %9s %9s %7s %8s\n", "benchmark", "wall/step", "cpu/step", "target", "cpu/tgt", "allocs", "bytes"
	for (j = 1; j <= k; j++) {
		name = order[j]; m = n[name]
		delete w; delete c
		for (a = 1; a <= m; a++) { w[a] = wall[name, a] + 0; c[a] = cpu[name, a] + 0 }
		mw = median(w, m); mc = median(c, m)
		target = (name ~ /pods=110\//) ? 200000 : 2000000
		printf "%-26s %9.1fµs %9.1fµs %7.0fµs %8.2fx %7s %8s\n", name, mw / 1000, mc / 1000, target / 1000, mc / target, allocs[name], bytes[name]
	}
}' "$out"
echo
echo "cpu/tgt < 1 meets the target. Load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPU(s)."
