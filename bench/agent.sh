#!/usr/bin/env bash
# The agent's benchmarks, one after the other (needs root; about 8 minutes):
#   1. detection latency: v1 eventfd on this host, v2 wake-ups in the qemu VM,
#      and a kubelet-like 10 s poll, side by side     (bench/latency.sh)
#   2. OOM avoidance at 100Mi/s, 500Mi/s, 2Gi/s (v2 scaled to the VM)
#                                                     (bench/latency.sh -oom)
#   3. idle cost with 500 empty and 500 populated cgroups over 60 s
#                                                     (bench/idle.sh)
# The v2 rows run under software emulation: they are an upper bound for a
# real v2 host (bench/latency.sh prints the measured slowdown).
# EVICTD_BENCH_VM=0 skips the VM rows.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
# Quick mode (bench/run.sh --quick, EVICTD_BENCH_QUICK=1): one trial per
# row, 20 cgroups idle for 5 s.
trials=() oom_trials=10 idle=(60 500)
if [ "${EVICTD_BENCH_QUICK:-}" = 1 ]; then
	trials=(-trials 1 -poll-parallel 1) oom_trials=1 idle=(5 20)
fi
echo "== detection latency"; bench/latency.sh ${trials[@]+"${trials[@]}"} "$@"
echo; echo "== OOM avoidance"; bench/latency.sh -oom -trials "$oom_trials"
echo; echo "== idle cost"; bench/idle.sh "${idle[@]}" empty; bench/idle.sh "${idle[@]}" populated
