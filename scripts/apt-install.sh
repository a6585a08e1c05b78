#!/usr/bin/env bash
# Installs the named Debian packages that are missing, and nothing else: the
# one apt installer of the test tiers (scripts/test.sh for chromium and the shells, the node
# tier's packages in scripts/node.sh deps). No package may start a service of
# its own (Debian's containerd and etcd would bind the default socket and
# ports): policy-rc.d 101 forbids it where init scripts exist; without
# systemd the units never start anyway.
# Usage: scripts/apt-install.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
printf 'apt-install: installing %s\n' "${missing[*]}" >&2
policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 0755 /usr/sbin/policy-rc.d
	policy=1
fi
trap '[ -z "$policy" ] || rm -f /usr/sbin/policy-rc.d' EXIT
apt-get update -qq >&2
# Another apt (another checkout's tier) may hold the lock: wait for it.
DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends "${missing[@]}" >&2
