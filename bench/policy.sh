#!/usr/bin/env bash
# bench/policy.sh — runs the policy engine's Step benchmarks and prints a
# table against the targets of issue 2 item 10 (110 pods < 200 µs, 1,000 pods
# < 2 ms per synchronize), with allocations per step.
#
# Usage: bench/policy.sh [COUNT]   (COUNT runs per benchmark, default 5; the
# table shows the median). Run it on a quiet machine: timings on a loaded
# host are inflated.
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-5}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

go test ./internal/policy/ -run '^$' -bench '^BenchmarkStep$' -benchmem -count "$count" >"$out"

awk -v count="$count" '
/^BenchmarkStep\// {
	name = $1; sub(/^BenchmarkStep\//, "", name); sub(/-[0-9]+$/, "", name)
	ns[name, ++n[name]] = $3; allocs[name] = $7; bytes[name] = $5
	if (!(name in seen)) { seen[name] = 1; order[++k] = name }
}
END {
	printf "%-30s %12s %10s %10s %10s  %s\n", "benchmark", "median/step", "target", "ratio", "allocs", "bytes"
	for (i = 1; i <= k; i++) {
		name = order[i]; m = n[name]
		# median of the runs (simple sort)
		for (a = 1; a <= m; a++) v[a] = ns[name, a] + 0
		for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[b] < v[a]) { t = v[a]; v[a] = v[b]; v[b] = t }
		med = (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
		target = (name ~ /pods=110\//) ? 200000 : 2000000
		printf "%-30s %10.1fµs %8.0fµs %9.2fx %10s  %s\n", name, med / 1000, target / 1000, med / target, allocs[name], bytes[name]
	}
}' "$out"
echo
echo "ratio < 1 meets the target; load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPU(s)"
