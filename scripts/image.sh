#!/usr/bin/env bash
# evictd's release image (make image, make push; docs/install.md).
#
#   scripts/image.sh build [NAME]   the agent evictd (cmd/evictd only: evictd-tools,
#                                   report and simulate --plot, is a workstation
#                                   tool and not in the image) for linux/amd64 and
#                                   linux/arm64 (static,
#                                   -trimpath, the version stamped from git), as one
#                                   OCI image index in .cache/image/evictd.tar, named
#                                   NAME (default evictd:<version>); prints NAME DIGEST
#   scripts/image.sh push REF [-insecure]
#                                   pushes that archive to a registry as REF
#                                   (credentials: docker login / crane auth login)
#   scripts/image.sh tool           builds tools/image and prints its path
#
# The same tree gives the same image, byte for byte: every time in it is the
# commit's (scripts/version.sh), the binaries are built with -trimpath and
# without cgo, and the layers are written in a fixed order (tools/image).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/.cache/image
platforms=(linux/amd64 linux/arm64)

tool() {
	mkdir -p "$out"
	(cd tools/image && CGO_ENABLED=0 go build -trimpath -o "$out/image-tool" .)
	echo "$out/image-tool"
}

build() {
	local t name version rev epoch args=() p bin
	{ read -r version; read -r rev; read -r epoch; } < <(scripts/version.sh)
	name=${1:-evictd:$version}
	t=$(tool)
	for p in "${platforms[@]}"; do
		bin=$out/bin/${p/\//-}/evictd
		mkdir -p "$(dirname "$bin")"
		CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath \
			-ldflags "-s -w -X github.com/evictd/evictd/internal/version.stamped=$version -X github.com/evictd/evictd/internal/version.revision=$rev" \
			-o "$bin" ./cmd/evictd
		args+=(-platform "$p=$bin")
	done
	"$t" build -o "$out/evictd.tar" -name "$name" -entrypoint /evictd -created "$epoch" "${args[@]}" \
		-label org.opencontainers.image.title=evictd \
		-label org.opencontainers.image.version="$version" \
		-label org.opencontainers.image.revision="$rev" \
		-label org.opencontainers.image.source=https://github.com/evictd/evictd \
		-label org.opencontainers.image.licenses=Apache-2.0
}

push() {
	[ $# -ge 1 ] || { echo "usage: scripts/image.sh push REGISTRY/REPOSITORY:TAG [-insecure]" >&2; exit 2; }
	[ -f "$out/evictd.tar" ] || { echo "no $out/evictd.tar: run make image first" >&2; exit 1; }
	local ref=$1 t
	shift
	t=$(tool)
	"$t" push "$@" "$out/evictd.tar" "$ref"
}

case "${1:-}" in
build) shift && build "$@" ;;
push) shift && push "$@" ;;
tool) tool ;;
*) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
