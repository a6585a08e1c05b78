#!/usr/bin/env bash
# The cgroup v2 node tier's guest image (docs/testing.md, "The cgroup v2
# node tier"): a Debian userland with systemd as PID 1, made from Debian's
# packages only, cached under .cache/node-v2/:
#
#   rootfs/    debootstrap (minbase) of the host's Debian release from the
#              host's own apt mirror, with systemd, dbus, udev, containerd,
#              runc, the CNI plugins, etcd, iptables/nftables, an ssh server
#              and the modules of the VM tier's cloud kernel (the one the VM
#              boots: .cache/vm/vmlinux, scripts/vm-deps.sh), configured for
#              a throwaway node (no network but a static address with no
#              route, no timers, volatile journal, no login)
#   root.img   that folder as an ext4 image (mkfs.ext4 -d), booted read-only
#              by qemu (-snapshot: writes go to a per-run file)
#   bins.img   the Kubernetes binaries of .cache/node/bin (scripts/node-bins.sh)
#              as an ext4 image, rebuilt when their key changes
#
# Each is rebuilt only when its key changes (.cache/node-v2/*.key: this
# script, the package list, the kernel package; the binaries' key). The
# cloud kernel has virtio-blk as a module but NVMe built in, so the disks are
# NVMe namespaces and no initramfs is needed.
#
# Usage: scripts/node-v2-image.sh          build what is stale, print the cache dir
#        scripts/node-v2-image.sh rootfs   root.img only
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=$root/.cache/node-v2
log() { printf 'node-v2-image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "building the guest image needs root (debootstrap, chroot)"

# The guest's packages, all from Debian's main archive. systemd-sysv makes
# systemd PID 1; dbus is what the systemd cgroup driver talks to (runc and
# the kubelet create their scopes and slices through systemd's D-Bus API);
# udev names the disks; openssh-server is the host's only way in besides
# the API server's port.
guest_packages=(systemd systemd-sysv dbus udev kmod iproute2 iptables nftables procps
	containerd runc containernetworking-plugins etcd-server openssh-server curl)

mkdir -p "$cache"

# The host's apt mirror for its own release (never a host named here): the
# guest is the host's Debian, from where the host gets it.
mirror() {
	local codename
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null |
		awk -v c="$codename" '$2 == c && $3 == "main" {print $1; exit}'
}

# The debootstrap (rootfs/, minutes) is keyed on what it installs; the
# configured image (root.img, seconds from rootfs/) on that and on
# configure_rootfs, so a change of the guest's configuration does not
# download Debian again.
rootfs_key() {
	{
		sed -n '/^rootfs_build() {/,/^}/p' "$0"
		echo "${guest_packages[*]}"
		cat "$root/.cache/vm/kernel.package"
		. /etc/os-release && echo "$VERSION_CODENAME"
	} | sha256sum | cut -d' ' -f1
}

image_key() {
	{
		rootfs_key
		sed -n '/^configure_rootfs() {/,/^}/p' "$0"
		sed -n '/^ext4_image() {/,/^}/p' "$0"
	} | sha256sum | cut -d' ' -f1
}

rootfs_build() {
	local tmp=$cache/rootfs.tmp m codename kpkg kver work t0
	t0=$(date +%s)
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	m=$(mirror)
	[ -n "$m" ] || die "no apt source for $codename main on this host (apt-get indextargets): cannot debootstrap"
	scripts/apt-install.sh debootstrap e2fsprogs
	rm -rf "$tmp" "$cache/rootfs" "$cache/rootfs.key"
	log "debootstrap $codename (minbase + ${guest_packages[*]})"
	# Services must not start in the chroot (etcd's and containerd's
	# postinst would try): policy-rc.d forbids it.
	mkdir -p "$tmp/usr/sbin"
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 0755 "$tmp/usr/sbin/policy-rc.d"
	DEBIAN_FRONTEND=noninteractive debootstrap --variant=minbase --components=main \
		--include="$(IFS=,; echo "${guest_packages[*]}")" "$codename" "$tmp" "$m" >"$cache/debootstrap.log" 2>&1 ||
		{ tail -n 30 "$cache/debootstrap.log" >&2; die "debootstrap failed (log: $cache/debootstrap.log)"; }
	rm -f "$tmp/usr/sbin/policy-rc.d"
	log "debootstrap done in $(($(date +%s) - t0)) s"

	# The kernel's modules (netfilter, bridge, veth, overlay are modules in
	# the cloud kernel), from the package the VM tier boots.
	kpkg=$(cat "$root/.cache/vm/kernel.package")
	work=$(mktemp -d "$cache/kernel.XXXXXX")
	chmod 0777 "$work"
	(cd "$work" && apt-get download -qq "$kpkg" >&2)
	dpkg -x "$work"/*.deb "$work/x"
	kver=$(ls "$work/x/lib/modules")
	mkdir -p "$tmp/lib/modules"
	rm -rf "$tmp/lib/modules/$kver"
	cp -a "$work/x/lib/modules/$kver" "$tmp/lib/modules/"
	rm -rf "$work"
	chroot "$tmp" depmod "$kver"

	mv "$tmp" "$cache/rootfs"
	log "rootfs ready in $(($(date +%s) - t0)) s ($(du -sm "$cache/rootfs" | cut -f1) MiB)"
}

# configure_rootfs DIR: a node that boots to multi-user with nothing but
# what it needs; the node itself (units, configs, PKI) comes on the run disk.
configure_rootfs() {
	local r=$1
	echo evictd-v2 >"$r/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 evictd-v2\n::1 localhost\n' >"$r/etc/hosts"
	: >"$r/etc/machine-id" # systemd makes one at boot
	rm -f "$r/var/lib/dbus/machine-id"
	cat >"$r/etc/fstab" <<'EOF'
/dev/nvme0n1 / ext4 rw,noatime 0 1
LABEL=evictd-bins /opt/evictd-node/bin ext4 ro,noatime,nofail,x-systemd.device-timeout=60s 0 0
LABEL=evictd-run /opt/evictd-node/run ext4 ro,noatime,nofail,x-systemd.device-timeout=60s 0 0
tmpfs /tmp tmpfs mode=1777,size=256m 0 0
EOF
	mkdir -p "$r/opt/evictd-node/bin" "$r/opt/evictd-node/run"
	# No resolver, no route out: one static address for the host's port
	# forwards (qemu user networking, restrict=on), no gateway.
	: >"$r/etc/resolv.conf"
	mkdir -p "$r/etc/systemd/network"
	cat >"$r/etc/systemd/network/10-eth.network" <<'EOF'
[Match]
Type=ether
[Network]
Address=10.0.2.15/24
LinkLocalAddressing=no
IPv6AcceptRA=no
EOF
	chroot "$r" systemctl enable systemd-networkd.service >/dev/null 2>&1
	# Debian's own services of the node's packages stay off: the run disk's
	# units start etcd and containerd with the node's configuration.
	chroot "$r" systemctl disable etcd.service containerd.service >/dev/null 2>&1 || true
	chroot "$r" systemctl mask etcd.service containerd.service >/dev/null 2>&1
	# Nothing periodic or interactive: timers, logins, time sync (no network).
	for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer dpkg-db-backup.timer \
		systemd-timesyncd.service getty@tty1.service serial-getty@ttyS0.service console-getty.service \
		systemd-networkd-wait-online.service e2scrub_reap.service; do
		chroot "$r" systemctl mask "$u" >/dev/null 2>&1 || true
	done
	mkdir -p "$r/etc/systemd/journald.conf.d"
	printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=64M\nForwardToConsole=no\n' >"$r/etc/systemd/journald.conf.d/evictd.conf"
	# ssh: root with the run's key only (the image holds none).
	mkdir -p "$r/etc/ssh/sshd_config.d"
	cat >"$r/etc/ssh/sshd_config.d/evictd.conf" <<'EOF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile /opt/evictd-node/run/authorized_keys
UseDNS no
EOF
	# The node: the run disk's setup script, started once the disks are
	# mounted (a unit of the image, so the image needs no rebuild when the
	# node's configuration changes).
	cat >"$r/etc/systemd/system/evictd-node.service" <<'EOF'
[Unit]
Description=evictd test node (the run disk's setup)
After=local-fs.target network.target dbus.service
Requires=dbus.service
# The run and bins disks are nofail mounts, which local-fs.target does not
# wait for.
RequiresMountsFor=/opt/evictd-node/run /opt/evictd-node/bin
ConditionPathExists=/opt/evictd-node/run/setup.sh
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash /opt/evictd-node/run/setup.sh
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
EOF
	chroot "$r" systemctl enable evictd-node.service >/dev/null 2>&1
	# Keep the image small: no apt lists or archives, docs, locales.
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/usr/share/locale/*
}

# ext4_image DIR IMG LABEL EXTRA_MIB: DIR as an ext4 image with EXTRA_MIB
# free (sparse, so the free space costs nothing on the host's disk).
ext4_image() {
	local dir=$1 img=$2 label=$3 extra=$4 mib
	mib=$(($(du -sm "$dir" | cut -f1) * 11 / 10 + extra))
	rm -f "$img.tmp"
	truncate -s "${mib}M" "$img.tmp"
	mkfs.ext4 -q -F -L "$label" -E root_owner=0:0 -d "$dir" "$img.tmp" >&2
	mv "$img.tmp" "$img"
}

t0=$(date +%s)
[ -s "$root/.cache/vm/kernel.package" ] || scripts/vm-deps.sh >/dev/null
key=$(rootfs_key)
if [ ! -d "$cache/rootfs" ] || [ "$(cat "$cache/rootfs.key" 2>/dev/null)" != "$key" ]; then
	rootfs_build
	echo "$key" >"$cache/rootfs.key"
fi
key=$(image_key)
if [ ! -f "$cache/root.img" ] || [ "$(cat "$cache/root.key" 2>/dev/null)" != "$key" ]; then
	t1=$(date +%s)
	rm -rf "$cache/rootfs.cfg"
	cp -a "$cache/rootfs" "$cache/rootfs.cfg"
	configure_rootfs "$cache/rootfs.cfg"
	# Free space for containerd's content and snapshots, etcd, the pods'
	# writable layers and logs.
	ext4_image "$cache/rootfs.cfg" "$cache/root.img" evictd-root 2048
	rm -rf "$cache/rootfs.cfg"
	echo "$key" >"$cache/root.key"
	log "root.img ($(du -m --apparent-size "$cache/root.img" | cut -f1) MiB, $(du -m "$cache/root.img" | cut -f1) MiB on disk) in $(($(date +%s) - t1)) s"
fi

if [ "${1:-}" = rootfs ]; then
	echo "$cache"
	exit 0
fi
bins=$(scripts/node-bins.sh)
bkey=$(cat "$bins/.key")
if [ ! -f "$cache/bins.img" ] || [ "$(cat "$cache/bins.key" 2>/dev/null)" != "$bkey" ]; then
	t1=$(date +%s)
	stage=$(mktemp -d "$cache/bins.XXXXXX")
	cp -a "$bins"/kube* "$stage/"
	ext4_image "$stage" "$cache/bins.img" evictd-bins 16
	rm -rf "$stage"
	echo "$bkey" >"$cache/bins.key"
	log "bins.img in $(($(date +%s) - t1)) s"
fi
log "guest images ready in $(($(date +%s) - t0)) s"
echo "$cache"
