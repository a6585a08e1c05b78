#!/usr/bin/env bash
# Idle cost of `evictd run` on a host with 500 workload cgroups: CPU (% of
# one core) and memory (RSS, peak RSS) over 60 s with no pressure, for the
# default wake-ups of this host and with the adaptive fast poll forced on,
# side by side (both run at the same time, each on a workload root of its
# own holding the same cgroups). Targets: ≤ 0.5 % CPU, ≤ 30 MiB.
# With "populated" as third argument each cgroup holds one sleeping process,
# so every workload is active and its stats are read on every synchronize
# (empty cgroups are skipped: eviction never reads an inactive pod's stats).
# With "memqos" as fourth argument the pair is --memory-qos on vs off instead
# (bench/memqos.sh; docs/qos.md); with "pages", the binary's start-up pages
# released (the default) vs kept mapped (--release-startup-pages=false),
# with their RSS split into anonymous memory and the binary's file pages
# (docs/agent.md#memory).
# Needs root. Usage: bench/idle.sh [seconds] [cgroups] [empty|populated] [fastpoll|memqos|pages]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
secs=${1:-60}
n=${2:-500}
fill=${3:-empty}
pair=${4:-fastpoll}
go build -o .cache/bench-evictd ./cmd/evictd
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
	memroot=/sys/fs/cgroup; mode=v2
else
	memroot=/sys/fs/cgroup/memory; mode=v1
fi
# Each agent gets a workload root of its own, with the same n cgroups (and
# sleepers): two agents on one root are refused by the root lock
# (internal/hostmode's one-agent-per-root lock against two agents evicting
# the same workloads), so side by side means two identical roots.
rels=(/evictd-bench-idle-$$-a /evictd-bench-idle-$$-b)
pids=()
sleepers=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"} ${sleepers[@]+"${sleepers[@]}"}; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for rel in "${rels[@]}"; do
		for d in "$memroot$rel"/*/; do rmdir "$d" 2>/dev/null || true; done
		rmdir "$memroot$rel" 2>/dev/null || true
	done
	rm -f .cache/bench-idle-$$-*.log
}
trap cleanup EXIT INT TERM
for rel in "${rels[@]}"; do
	root=$memroot$rel
	mkdir "$root"
	if [ "$mode" = v2 ]; then echo +memory >"$root/cgroup.subtree_control"; fi
	for i in $(seq 1 "$n"); do mkdir "$root/w$i"; done
	if [ "$fill" = populated ]; then
		for i in $(seq 1 "$n"); do
			sleep 100000 &
			sleepers+=($!)
			echo $! >"$root/w$i/cgroup.procs"
		done
	fi
done

declare -A label
start_one() { # name, workload root, extra flags...
	local name=$1 rel=$2
	shift 2
	.cache/bench-evictd run --workload-root "$rel" --decision-log "" --state-file "" --metrics-addr "" \
		--eviction-hard 'memory.available<100Mi' "$@" 2>.cache/bench-idle-$$-${#pids[@]}.log &
	pids+=($!)
	label[$!]=$name
}
if [ "$pair" = memqos ]; then
	start_one "--memory-qos=true ($mode)" "${rels[0]}" --memory-qos=true
	start_one "--memory-qos=false ($mode)" "${rels[1]}" --memory-qos=false
elif [ "$pair" = pages ]; then
	start_one "start-up pages released" "${rels[0]}"
	start_one "start-up pages kept mapped" "${rels[1]}" --release-startup-pages=false
else
	start_one "default wake-ups ($mode)" "${rels[0]}"
	start_one "fast poll forced on" "${rels[1]}" --fast-poll on
fi

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
sleep 5 # start-up and the first synchronizes are not idle
# An agent that exited (refused its flags or its root) makes no row: say why.
alive() {
	local i=0 p
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			echo "bench/idle.sh: evictd run (${label[$p]}) exited:" >&2
			cat ".cache/bench-idle-$$-$i.log" >&2
			return 1
		fi
		i=$((i + 1))
	done
}
alive
declare -A t0
for p in "${pids[@]}"; do t0[$p]=$(ticks "$p"); done
sleep "$secs"
alive
printf '%-28s %10s %10s %10s %10s %10s %10s\n' "evictd run ($n $fill cgroups)" "CPU %" "RSS MiB" "ratio RSS" "anon MiB" "file MiB" "peak MiB"
base=
for p in "${pids[@]}"; do
	t1=$(ticks "$p")
	rss=$(awk '/VmRSS/{print $2}' "/proc/$p/status")
	anon=$(awk '/RssAnon/{print $2}' "/proc/$p/status")
	file=$(awk '/RssFile/{print $2}' "/proc/$p/status")
	hwm=$(awk '/VmHWM/{print $2}' "/proc/$p/status")
	base=${base:-$rss}
	awk -v l="${label[$p]}" -v d=$((t1 - t0[$p])) -v hz="$hz" -v s="$secs" -v r="$rss" -v b="$base" -v a="$anon" -v f="$file" -v h="$hwm" \
		'BEGIN{printf "%-28s %10.2f %10.1f %9.2fx %10.1f %10.1f %10.1f\n", l, 100*d/hz/s, r/1024, r/b, a/1024, f/1024, h/1024}'
done
echo "CPU % = user+system time over ${secs}s after a 5 s warm-up, of one core. Targets: <= 0.5 % and <= 30 MiB. $(date -u '+%Y-%m-%d %H:%M UTC'), load average now: $(cut -d' ' -f1-3 /proc/loadavg)."
