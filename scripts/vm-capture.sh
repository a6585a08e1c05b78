#!/usr/bin/env bash
# Regenerates internal/cgroup/v2/testdata/captured/: real cgroup v2 file
# contents recorded in the VM by test/vm/capture (see the README there).
# Usage: scripts/vm-capture.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
dest=internal/cgroup/v2/testdata/captured
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
EVICTD_VM_OUTDIR=$tmp scripts/test-vm.sh -run '^TestCaptureV2Files$' -v ./test/vm/capture/
if [ -z "$(ls -A "$tmp")" ]; then
	echo "vm-capture: the VM sent no files" >&2
	exit 1
fi
mkdir -p "$dest"
# Replace the scenario folders, keep the hand-written README.md.
find "$dest" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
cp -R "$tmp"/. "$dest"/
echo "vm-capture: wrote $(find "$dest" -type f ! -name README.md | wc -l) files under $dest"
