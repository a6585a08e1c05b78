#!/usr/bin/env bash
# Installs what the cgroup v2 VM tier needs, from Debian packages only, and
# caches the kernel under .cache/vm/ so that a second run does nothing:
#   - qemu-system-x86 (apt-get install; software emulation, no KVM needed)
#   - Debian's cloud kernel (linux-image-*-cloud-amd64), fetched with
#     `apt-get download` and unpacked with `dpkg -x` — never installed into
#     /boot. The cloud kernel has the serial console, initramfs, memcg, pids,
#     cpu, io and PSI built in; only zram (swap for reclaim tests) is a
#     module, kept in .cache/vm/modules/ with the order to load them.
#   - busybox-static, unpacked the same way into .cache/vm/busybox: the guest's
#     /bin (sh, sleep, touch, ...) for tests that run ordinary commands.
#   - the same kernel uncompressed (.cache/vm/vmlinux), when lz4 can unpack it.
# Prints the path of the kernel image on its last line.
# Usage: scripts/vm-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cache=.cache/vm
kernel=$cache/vmlinuz
# The meta package that names the current cloud kernel of this Debian release.
kernel_meta=linux-image-cloud-amd64

log() { printf 'vm-deps: %s\n' "$*" >&2; }

updated=
apt_update_once() {
	if [ -z "$updated" ]; then
		log "apt-get update"
		apt-get update -qq >&2
		updated=1
	fi
}

if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	apt_update_once
	log "installing qemu-system-x86"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >&2
fi

# zram as swap for tests of memory.low/min/high reclaim: the VM has no disk,
# and the cloud kernel builds zram, zsmalloc and lzo-rle as modules. Loaded
# by /init in this order.
modules=(mm/zsmalloc.ko crypto/lzo-rle.ko drivers/block/zram/zram.ko)

if [ ! -s "$kernel" ] || [ ! -s "$cache/modules/order" ]; then
	apt_update_once
	# The meta package depends on the versioned image, e.g.
	# linux-image-6.1.0-35-cloud-amd64 (or its -unsigned variant).
	pkg=$(apt-cache depends "$kernel_meta" 2>/dev/null |
		awk '/Depends: linux-image-[0-9].*-cloud-amd64/ {print $2; exit}')
	if [ -z "$pkg" ]; then
		log "cannot resolve $kernel_meta to a kernel package (apt-cache depends $kernel_meta)"
		exit 1
	fi
	log "fetching $pkg"
	mkdir -p "$cache"
	work=$(mktemp -d "$PWD/$cache/download.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	chmod 0777 "$work" # apt-get download drops privileges to _apt when it can
	(cd "$work" && apt-get download -qq "$pkg" >&2)
	dpkg -x "$work"/*.deb "$work/root"
	img=$(ls "$work"/root/boot/vmlinuz-* | head -n1)
	cp "$work"/root/boot/config-* "$cache/kernel.config"
	rm -rf "$cache/modules" && mkdir -p "$cache/modules"
	for m in "${modules[@]}"; do
		cp "$work"/root/lib/modules/*/kernel/"$m" "$cache/modules/"
		basename "$m" >>"$cache/modules/order"
	done
	echo "$pkg" >"$cache/kernel.package"
	cp "$img" "$kernel.tmp" && mv "$kernel.tmp" "$kernel"
	rm -f "$cache/vmlinux" "$cache/vmlinux.unavailable" # made again from this image below
	rm -rf "$work"
	trap - EXIT
	log "kernel cached at $kernel ($(cat "$cache/kernel.package"))"
fi

# An uncompressed vmlinux boots straight through its PVH entry point, skipping
# the BIOS and the in-guest decompression: about 20% less CPU per VM under
# emulation. The Debian image is LZ4-compressed (CONFIG_KERNEL_LZ4); the
# stream starts at the legacy LZ4 magic 02 21 4c 18. If this ever fails (a
# different compression), vmexec falls back to vmlinuz.
vmlinux=$cache/vmlinux
if [ ! -s "$vmlinux" ] && [ ! -e "$cache/vmlinux.unavailable" ]; then
	if ! command -v lz4 >/dev/null 2>&1; then
		apt_update_once
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lz4 >&2
	fi
	off=$(grep -aobUP '\x02\x21\x4c\x18' "$kernel" | head -n1 | cut -d: -f1 || true)
	if [ -n "$off" ]; then
		# lz4 complains about the bytes after the stream; the ELF check decides.
		tail -c +$((off + 1)) "$kernel" | lz4 -dc >"$vmlinux.tmp" 2>/dev/null || true
	fi
	if [ -s "$vmlinux.tmp" ] && [ "$(head -c 4 "$vmlinux.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
		mv "$vmlinux.tmp" "$vmlinux"
		log "uncompressed kernel cached at $vmlinux"
	else
		rm -f "$vmlinux.tmp"
		touch "$cache/vmlinux.unavailable"
		log "could not uncompress $kernel (not LZ4?); booting the compressed image"
	fi
fi

busybox=$cache/busybox
if [ ! -x "$busybox" ]; then
	apt_update_once
	log "fetching busybox-static"
	mkdir -p "$cache"
	work=$(mktemp -d "$PWD/$cache/download.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	chmod 0777 "$work"
	(cd "$work" && apt-get download -qq busybox-static >&2)
	dpkg -x "$work"/*.deb "$work/root"
	cp "$work/root/bin/busybox" "$busybox.tmp" && mv "$busybox.tmp" "$busybox"
	rm -rf "$work"
	trap - EXIT
	log "busybox cached at $busybox"
fi

echo "$kernel"
