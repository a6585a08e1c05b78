#!/usr/bin/env bash
# Prints the version `make build` and `make image` stamp into evictd, then
# the commit and the commit's time (Unix seconds, the image's creation time,
# so that the same tree gives the same image), one per line:
#
#   v0.1.0                              a tagged commit
#   v0.1.0-3-g1a2b3c4d5e6f              3 commits after v0.1.0
#   v0.0.0-20261202054200-1a2b3c4d5e6f  no tag yet (Go's pseudo-version form)
#   …-dirty                             uncommitted changes in the tree
#
# Every form is a valid image tag and a valid semantic version. Outside a git
# checkout (a source archive) it prints v0.0.0-unknown, no commit, and 0.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	printf 'v0.0.0-unknown\n\n0\n'
	exit 0
fi
rev=$(git rev-parse HEAD)
epoch=$(git log -1 --format=%ct HEAD)
dirty=
# Only tracked files count: build outputs under .cache/ and bin/ are ignored.
git diff --quiet HEAD -- 2>/dev/null || dirty=-dirty
if v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 HEAD 2>/dev/null); then
	:
else
	v=v0.0.0-$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)-${rev:0:12}
fi
printf '%s%s\n%s\n%s\n' "$v" "$dirty" "$rev" "$epoch"
