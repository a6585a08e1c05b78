#!/usr/bin/env bash
# Soak: `evictd run` for a long time (default 10 minutes) on a workload root
# where cgroups are created and removed all the time under memory pressure —
# every 0.3 s a new cgroup with a hog of 40–160 MiB that lives 2–8 s, in a
# root limited to 1 GiB with a 300Mi threshold, so the agent evicts as it
# goes. It prints the agent's descriptors, goroutines and RSS at the start
# and at the end (after the churn stops and the agent has synchronized
# again): a leak shows as an end well above the start. Not a test tier: it
# runs for minutes. Needs root.
#
# --hostile adds what must not stop evictd from evicting (issue 23): the
# decision log is standard output into a pipe nobody reads (stalled after
# its first 64 KiB), and bench/soakhostile holds 300 idle keep-alive and 300
# slow-header connections to the metrics server, re-dialling each one the
# server closes, probes /healthz every 2 s, and samples the root's memory
# every 5 ms to count the threshold's crossings and match each with an
# eviction evictd logged.
#
# Usage: bench/soak.sh [seconds] [--hostile]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
secs= hostile=
for a in "$@"; do
	case $a in
	--hostile) hostile=1 ;;
	*[!0-9]* | '') echo "usage: bench/soak.sh [seconds] [--hostile]" >&2; exit 2 ;;
	*) secs=$a ;;
	esac
done
# Quick mode (bench/run.sh --quick): 10 s of churn.
[ -n "$secs" ] || { secs=600; [ "${EVICTD_BENCH_QUICK:-}" = 1 ] && secs=10; }
go build -o .cache/bench-evictd ./cmd/evictd
bin=$PWD/.cache/bench-evictd
[ -z "$hostile" ] || go build -o .cache/bench-soakhostile ./bench/soakhostile
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
	memroot=/sys/fs/cgroup; mode=v2; limitfile=memory.max
else
	memroot=/sys/fs/cgroup/memory; mode=v1; limitfile=memory.limit_in_bytes
fi
rel=/evictd-soak-$$
root=$memroot$rel
tmp=$(mktemp -d)
port=$((20000 + $$ % 20000))
agent=
hostile_pid=
stall_pid=
hogs=()
cleanup() {
	for p in "${hogs[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	[ -n "$hostile_pid" ] && kill "$hostile_pid" 2>/dev/null || true
	[ -n "$agent" ] && kill "$agent" 2>/dev/null || true
	[ -n "$stall_pid" ] && kill "$stall_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	for d in "$root"/*/; do rmdir "$d" 2>/dev/null || true; done
	rmdir "$root" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
mkdir "$root"
[ "$mode" = v2 ] && echo +memory >"$root/cgroup.subtree_control"
echo $((1 << 30)) >"$root/$limitfile"

if [ -n "$hostile" ]; then
	# A reader that never reads: the pipe holds 64 KiB, then stalls.
	mkfifo "$tmp/stall"
	sleep $((secs + 3600)) <"$tmp/stall" &
	stall_pid=$!
	"$bin" run --workload-root "$rel" --state-file "$tmp/state.json" --decision-log - \
		--metrics-addr "127.0.0.1:$port" --eviction-hard 'memory.available<300Mi' 2>"$tmp/agent.log" >"$tmp/stall" &
else
	"$bin" run --workload-root "$rel" --state-file "$tmp/state.json" --decision-log "$tmp/decisions.jsonl" \
		--metrics-addr "127.0.0.1:$port" --eviction-hard 'memory.available<300Mi' 2>"$tmp/agent.log" &
fi
agent=$!

metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2} END {printf "%d", s}'; }
sample() { # label
	local fds rss gor
	fds=$(ls "/proc/$agent/fd" | wc -l)
	rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$agent/status")
	gor=$(metric go_goroutines)
	printf '%-8s %12s %12s %12s\n' "$1" "$fds" "$gor" "$rss"
}
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
sleep 2
echo "evictd soak on cgroup $mode, $secs s of churn${hostile:+ with a connection flood and a stalled decision-log pipe}, $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %12s %12s %12s\n' "" "descriptors" "goroutines" "RSS MiB"
sample start
if [ -n "$hostile" ]; then
	.cache/bench-soakhostile -metrics "127.0.0.1:$port" -root "$root" -limit $((1 << 30)) -threshold $((300 << 20)) \
		-agent-log "$tmp/agent.log" >"$tmp/hostile.txt" 2>&1 &
	hostile_pid=$!
fi

declare -A cg
created=0
end=$((SECONDS + secs))
exec 3>&2 2>/dev/null # bash reports every evicted (killed) hog; keep the table readable
while [ $SECONDS -lt $end ]; do
	created=$((created + 1))
	d="$root/c$created"
	mkdir "$d"
	mib=$((40 + RANDOM % 121))
	life=$((2 + RANDOM % 7))
	EVICTD_HOG_SCRIPT="alloc ${mib}Mi; sleep ${life}s" EVICTD_HOG_CGROUPS="$d" "$bin" 2>/dev/null &
	hogs+=($!)
	cg[$!]=$d
	# Remove the cgroups whose hog has exited (or was evicted).
	alive=()
	for p in "${hogs[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			alive+=("$p")
		else
			wait "$p" 2>/dev/null || true
			rmdir "${cg[$p]}" 2>/dev/null || true
			unset "cg[$p]"
		fi
	done
	hogs=("${alive[@]}")
	sleep 0.3
done
if [ -n "$hostile" ]; then
	kill -TERM "$hostile_pid"
	wait "$hostile_pid" || true
	hostile_pid=
fi
for p in "${hogs[@]}"; do kill -9 "$p" 2>/dev/null || true; done
wait "${hogs[@]}" 2>/dev/null || true
hogs=()
for _ in 1 2 3 4 5; do
	for c in "$root"/c*/; do rmdir "$c" 2>/dev/null || true; done
	sleep 1
done
exec 2>&3 3>&-
sleep 12 # at least one synchronize after the churn
sample end
echo "cgroups created and removed: $created; evictions: $(metric evictd_evictions_total);" \
	"synchronize errors: $(metric evictd_synchronize_errors_total); healthz: $(curl -s "http://127.0.0.1:$port/healthz")"
if [ -n "$hostile" ]; then
	cat "$tmp/hostile.txt"
	echo "dropped: decision-log records $(metric 'evictd_output_dropped_total{output="decision-log"}')," \
		"log lines $(metric 'evictd_output_dropped_total{output="log"}');" \
		"synchronize errors by stage: $(curl -s "http://127.0.0.1:$port/metrics" | awk '/^evictd_synchronize_errors_total\{/ {printf "%s ", $0}')"
	if grep -q "too many open files" "$tmp/agent.log"; then echo "evictd ran out of descriptors:"; grep -m3 "too many open files" "$tmp/agent.log"; fi
fi
