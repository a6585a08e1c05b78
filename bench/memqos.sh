#!/usr/bin/env bash
# Cost of memory QoS in host mode (docs/qos.md), side by side:
#   1. per synchronize: internal/protect's BenchmarkApply keeping the values
#      of 500 workloads (one process each) — quiet (nothing changed: one
#      cgroup.procs read per workload) and verify (every file and process
#      read again, as once a minute);
#   2. idle CPU and memory of `evictd run` over 500 populated workload
#      cgroups with --memory-qos on and off, both running at the same time.
# Needs root. Usage: bench/memqos.sh [seconds] [cgroups]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
n=${2:-500}

echo "== per synchronize, 500 workloads (go test -bench BenchmarkApply ./internal/protect/)"
go test -run '^$' -bench BenchmarkApply -benchtime 200x ./internal/protect/ |
	awk '/^Benchmark/{printf "%-28s %12.2f ms/op %10s reads/op %8s writes/op\n", $1, $3/1e6, $5, $7}'

go build -o .cache/bench-evictd ./cmd/evictd
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
	memroot=/sys/fs/cgroup; mode=v2
else
	memroot=/sys/fs/cgroup/memory; mode=v1
fi
rel=/evictd-bench-memqos-$$
root=$memroot$rel
pids=()
sleepers=()
cleanup() {
	for p in "${pids[@]}" "${sleepers[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for d in "$root"/*/; do rmdir "$d" 2>/dev/null || true; done
	rmdir "$root" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
mkdir "$root"
[ "$mode" = v2 ] && echo +memory >"$root/cgroup.subtree_control"
for i in $(seq 1 "$n"); do
	mkdir "$root/w$i"
	sleep 100000 &
	sleepers+=($!)
	echo $! >"$root/w$i/cgroup.procs"
done

declare -A label
start_one() { # name, extra flags...
	local name=$1; shift
	.cache/bench-evictd run --workload-root "$rel" --decision-log "" --state-file "" --metrics-addr "" \
		--eviction-hard 'memory.available<100Mi' "$@" 2>/dev/null &
	pids+=($!)
	label[$!]=$name
}
start_one "--memory-qos=true ($mode)" --memory-qos=true
start_one "--memory-qos=false ($mode)" --memory-qos=false

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
sleep 5 # start-up and the first synchronizes (the writes) are not idle
declare -A t0
for p in "${pids[@]}"; do t0[$p]=$(ticks "$p"); done
sleep "$secs"
echo
echo "== idle evictd run, $n populated workload cgroups, ${secs}s"
printf '%-28s %10s %10s %10s\n' "evictd run" "CPU %" "RSS MiB" "peak MiB"
for p in "${pids[@]}"; do
	t1=$(ticks "$p")
	rss=$(awk '/VmRSS/{print $2}' "/proc/$p/status")
	hwm=$(awk '/VmHWM/{print $2}' "/proc/$p/status")
	awk -v l="${label[$p]}" -v d=$((t1 - t0[$p])) -v hz="$hz" -v s="$secs" -v r="$rss" -v h="$hwm" \
		'BEGIN{printf "%-28s %10.2f %10.1f %10.1f\n", l, 100*d/hz/s, r/1024, h/1024}'
done
echo "CPU % = user+system time over ${secs}s after a 5 s warm-up, of one core. $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)."
