#!/usr/bin/env bash
# Benchmarks evictd's cgroup collection against opencontainers/cgroups on the
# same 500 real cgroup v1 memory cgroups, and the time and allocations of a
# full Summary for 100 pods × 3 containers; prints a table and the ratio.
# Needs root and the cgroup v1 memory controller at /sys/fs/cgroup/memory.
# Usage: bench/collect.sh [-rounds N] [-benchtime 1s]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
cd bench/collect
# Quick mode (bench/run.sh --quick): one short round.
[ "${EVICTD_BENCH_QUICK:-}" = 1 ] && set -- -rounds 1 -benchtime 20ms "$@"
exec go run . "$@"
