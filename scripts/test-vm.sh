#!/usr/bin/env bash
# The cgroup v2 VM tier: runs the Go tests that need a real cgroup v2 kernel
# inside throwaway qemu VMs (one VM per test binary), with `go test -exec`.
# Called by `scripts/test.sh vm` (make test-vm) and `scripts/test.sh all`
# (make test, .ci/run). See docs/testing.md.
#
# Usage: scripts/test-vm.sh [go test flags...] [packages...]
#   no arguments: the packages listed in vm_packages below
#   e.g. scripts/test-vm.sh -run TestKillGroup -v ./test/v2smoke/
#
# To put a package in the tier, add its pattern to vm_packages. Patterns that
# match no package yet are skipped, so a package can be listed before it
# exists. Its tests use test/vm/vmtest to say what they need. A pattern
# ending in @SIZE (e.g. @1536M) runs in its own VM with that much memory
# instead of the default 512M.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh

vm_packages=(
	./test/v2smoke/...         # the hierarchy itself: limits, events, PSI, pids, cgroup.kill
	./test/vm/capture/...      # every v2 file the readers parse exists and reads (and is captured)
	./internal/cgroup/v2/...   # the v2 readers
	./internal/notify/...      # wake-ups: memory.events, PSI triggers, cgroup.events
	./internal/actuate/...     # cgroup.kill and friends
	./internal/hostmode/       # the host wiring end to end: v2 wake-ups (fast poll, memory.events) → evict
	./internal/collect/...     # the Summary from a real v2 kubepods tree
	./internal/kube/           # Kubernetes mode's Summary on a real v2 kubepods tree (its apiserver tests run in the apiserver tier)
	./internal/protect/        # memory QoS on real v2: protection of page cache, memory.high throttling, OOM order
	./internal/hostmode/demo/@1536M # evictd demo on v2: its 768Mi sandbox needs a bigger guest
	./internal/hostmode/selftest/ # evictd selftest on v2: trials, the OOM killer first, SIGINT cleanup, refusal
	./internal/hostmode/trial/    # the trial harness on v2: memory.current and the v2 working set watched, eviction, OOM kill, cleanup
)

# A hard limit for the whole tier (the issue's budget is 5 minutes; this only
# guards against a hang past the per-VM limits).
tier_limit=${EVICTD_VM_TIER_TIMEOUT:-15m}
# Per-package test timeout; the VM gets 45 s more to boot and report.
pkg_timeout=${EVICTD_VM_PKG_TIMEOUT:-4m}

start=$(date +%s.%N)
./scripts/vm-deps.sh >/dev/null

# vmexec is both the host-side wrapper and the guest's /init: it must be static.
export CGO_ENABLED=0
go build -o .cache/vm/vmexec ./test/vm/cmd/vmexec
wrapper=$PWD/.cache/vm/vmexec

args=()
pkgs=()
for a in "$@"; do
	case "$a" in
	./* | github.com/*) pkgs+=("$a") ;;
	*) args+=("$a") ;;
	esac
done
if [ ${#pkgs[@]} -eq 0 ]; then
	# Keep only the listed patterns that match packages with tests today.
	for p in "${vm_packages[@]}"; do
		if [ -n "$(go list -e -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "${p%@*}" 2>/dev/null)" ]; then
			pkgs+=("$p")
		else
			echo "VM tier: ${p%@*} has no tests yet, skipped"
		fi
	done
fi
# Packages with a memory size of their own run in a go test of their own.
plain=()
sized=()
for p in "${pkgs[@]}"; do
	case "$p" in
	*@*) sized+=("$p") ;;
	*) plain+=("$p") ;;
	esac
done

stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
export EVICTD_VM_STATS=$stats

# -p 1: one VM at a time (two emulated VMs on two cores fight);
# -count=1: the result depends on the kernel, not only on the files.
# The whole tier shares one deadline.
secs() { # 15m, 900s or 900 → seconds
	case "$1" in
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}
deadline=$(($(date +%s) + $(secs "$tier_limit")))
rc=0
run() { # [memory] packages...
	local mem=$1
	shift
	local left=$((deadline - $(date +%s)))
	if [ "$left" -le 0 ]; then
		echo "VM tier: no time left for $* (EVICTD_VM_TIER_TIMEOUT=$tier_limit)" >&2
		rc=124
		return
	fi
	local r=0
	EVICTD_VM_MEM=${mem:-${EVICTD_VM_MEM:-}} timeout --kill-after=30s "$left" \
		go test -exec "$wrapper" -p 1 -count=1 -timeout "$pkg_timeout" ${args[@]+"${args[@]}"} "$@" || r=$?
	[ "$r" -eq 0 ] || rc=$r
}
[ ${#plain[@]} -eq 0 ] || run "" "${plain[@]}"
for p in ${sized[@]+"${sized[@]}"}; do
	run "${p##*@}" "${p%@*}"
done

end=$(date +%s.%N)
echo
echo "VM tier timings in seconds (vm = qemu wall clock, boot = guest uptime when"
echo "/init started, run = /init to power-off, cpu = qemu's CPU time, skew = guest"
echo "clock minus host clock at the end, clock = the guest's clock source):"
awk '{ printf "  %-28s %s %s %s %s %s %s %s\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$stats"
awk -v s="$start" -v e="$end" -v n="$(wc -l <"$stats")" 'BEGIN { printf "  %d VM(s), whole tier %.1f s\n", n, e - s }'
if [ "$rc" -eq 124 ]; then
	echo "VM tier: killed after $tier_limit (EVICTD_VM_TIER_TIMEOUT)" >&2
fi
exit "$rc"
