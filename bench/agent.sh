#!/usr/bin/env bash
# The agent's benchmarks, one after the other (needs root; about 6 minutes):
#   1. detection latency, kernel wake-up vs 10 s poll   (bench/latency.sh)
#   2. OOM avoidance at 100Mi/s, 500Mi/s, 2Gi/s         (bench/latency.sh -oom)
#   3. idle cost with 500 cgroups over 60 s              (bench/idle.sh)
# v2 numbers need a cgroup v2 host (the VM tier's 512 MiB guest is too small
# and too slow under emulation to say anything about latency).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== detection latency"; bench/latency.sh "$@"
echo; echo "== OOM avoidance"; bench/latency.sh -oom -trials 10
echo; echo "== idle cost"; bench/idle.sh 60 500
