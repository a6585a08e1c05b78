#!/usr/bin/env bash
# Detection latency of evictd on the real kernel, side by side in one table:
#   - the kernel wake-up this host offers (cgroup v1: memcg threshold eventfd),
#   - the cgroup v2 wake-ups (fast poll, memory.events, PSI) in the VM tier's
#     qemu guest (pure cgroup v2 kernel, 1G, one vCPU under software
#     emulation: an upper bound for a real v2 host, see docs/agent.md),
#   - a kubelet-like 10 s poll.
# Each trial is a 512Mi sandbox cgroup with a hog ramping at 256Mi/s across a
# hard threshold (448Mi available); prints p50/p99 of crossing → wake-up,
# → decision and → workload gone, the wake-up that fired, and the load
# average. Needs root. About 3-4 minutes with the default 50 trials (the VM
# part ≈ 2 of them); -oom counts kernel OOM kills before eviction instead
# (about 3 minutes with -trials 10).
# Usage: bench/latency.sh [-trials N] [-vm-trials N] [-variants wakeup,poll] [-poll-parallel N] [-oom]
#   EVICTD_BENCH_VM=0 skips the VM (host rows only).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
# Static: the same binary runs as the guest's benchmark (vmexec refuses a
# dynamically linked one; the initramfs has no libc).
export CGO_ENABLED=0
go build -o .cache/bench-latency ./bench/latency
vm=()
if [ "${EVICTD_BENCH_VM:-1}" != 0 ]; then
	./scripts/vm-deps.sh >/dev/null
	go build -o .cache/vm/vmexec ./test/vm/cmd/vmexec
	vm=(-vm "$PWD/.cache/vm/vmexec")
fi
exec .cache/bench-latency "${vm[@]}" "$@"
