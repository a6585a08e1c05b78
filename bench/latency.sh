#!/usr/bin/env bash
# Detection latency of evictd on the real kernel, side by side: the kernel
# wake-up this host offers (cgroup v1: memcg threshold eventfd; cgroup v2:
# fast poll + memory.events) against a kubelet-like 10 s poll. Each trial is
# a 512Mi sandbox cgroup with a hog ramping at 256Mi/s across a hard
# threshold; prints p50/p99 of crossing → decision and crossing → gone.
# Needs root. Takes about 2-3 minutes with the default 50 trials.
# Usage: bench/latency.sh [-trials N] [-variants wakeup,poll] [-poll-parallel N]
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o .cache/bench-latency ./bench/latency
exec .cache/bench-latency "$@"
