#!/usr/bin/env bash
# The cgroup v2 node tier: a single-node Kubernetes v1.37.2 (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet with
# cgroupDriver: systemd, containerd with SystemdCgroup) in a qemu VM booted
# from a Debian image with systemd as PID 1 (scripts/node-v2-image.sh), the
# VM tier's cgroup v2 cloud kernel under software emulation. The host
# reaches the guest only through two port forwards on 127.0.0.1 (the API
# server and ssh; qemu user networking with restrict=on): nothing else
# crosses a host interface, and the guest has no route out.
#
# Usage:
#   scripts/node-v2.sh up       boot a node (tearing down a stale one first); the
#                               last line printed is KUBECONFIG=<admin kubeconfig>,
#                               for the host's kubectl
#   scripts/node-v2.sh down     stop every VM node of this checkout (qemu by PID)
#                               and remove its files
#   scripts/node-v2.sh test     the tier: build, up, the Go tests of test/node/ in
#                               the guest (EVICTD_NODE_V2_RUN picks them), the
#                               no-traffic count inside the guest, down, and the
#                               leave-nothing check on the host
#   scripts/node-v2.sh gotest [go test flags] [-- test binary flags]
#                               build test/node's test binary and run it in the
#                               running node's guest (e.g. -- -test.run TestNodeReady -test.v)
#   scripts/node-v2.sh ssh [CMD...]   a shell (or CMD) in the running node's guest
#   scripts/node-v2.sh traffic|env|check|deps
#
# Settings (environment): EVICTD_NODE_V2_MEM (guest memory, 4096 MiB),
# EVICTD_NODE_V2_SMP (vCPUs, 2), and as on the v1 node EVICTD_NODE_THRESHOLD_MI
# (300), EVICTD_NODE_MAX_PODS (30). docs/testing.md explains the tier and what
# each step costs.
#
# One VM node at a time per machine (/tmp/evictd-node-v2.lock): it changes
# nothing on the host but its own files and two loopback ports, so it does
# not need the v1 node's lock, but two emulated nodes on two cores would
# starve each other.
set -euo pipefail
cd "$(dirname "$0")/.."
# The v1 node's steps this tier shares: deps, build_images, pki.
. scripts/node.sh
root=$PWD
v2cache=$root/.cache/node-v2
v2runs=$v2cache/run
mem_mi=${EVICTD_NODE_V2_MEM:-4096}
smp=${EVICTD_NODE_V2_SMP:-2}
# The tests' hang guards (test/node's WaitFor) are stretched this much in
# the guest: under emulation a pod takes a minute to start where it takes
# seconds on the host. A guard only bounds a hang.
timeout_scale=${EVICTD_NODE_V2_TIMEOUT_SCALE:-5}
guest_ip=10.0.2.15
guest_name=evictd-v2
# The tests the tier runs in the guest (test/node's, by name): see
# docs/testing.md for what each proves on v2.
tests=${EVICTD_NODE_V2_RUN:-'^(TestNodeReady|TestPodsOfEachQoSClass|TestSummaryWithHugePages|TestNoTrafficGuardCountsALeak|TestPullsStayOnLoopback|TestEvictdEvictsFirst|TestGrowthStopOnNode|TestSameOrderAsKubelet|TestMemoryQoSNeverFights)$'}

v2log() { printf 'node-v2: %s\n' "$*" >&2; }

v2deps() {
	deps # the v1 node's: Debian packages on the host (openssl, curl), busybox
	scripts/vm-deps.sh >/dev/null
	build_images
	scripts/node-v2-image.sh >/dev/null
}

# Waits up to 75 min: a whole v2 benchmark (bench/node.sh NODE=v2) holds
# the node about an hour, and a suite run beside one should wait for it,
# not fail.
v2lock() {
	exec 8>/tmp/evictd-node-v2.lock
	if ! flock -n 8; then
		v2log "another VM node is in use (/tmp/evictd-node-v2.lock): waiting for it, up to 75 min"
		flock -w 4500 8 || { v2log "another VM node is still in use after 75 min (/tmp/evictd-node-v2.lock)"; exit 1; }
	fi
}

# ---- up ---------------------------------------------------------------------

# guest_kubeconfig NAME USER: a kubeconfig for the guest's own clients (the
# API server on the guest's loopback); @PKI@ becomes the guest's PKI folder.
guest_kubeconfig() {
	cat >"$stage/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: node
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "@PKI@/ca.crt"}
users:
- name: $1
  user: {client-certificate: "@PKI@/$2.crt", client-key: "@PKI@/$2.key"}
contexts:
- name: node
  context: {cluster: node, user: $1}
current-context: node
EOF
}

v2up() {
	[ "$(id -u)" = 0 ] || die "the VM node needs root (the guest image is built with debootstrap)"
	v2down_all
	local t0 t_built t_boot t_ssh t_ready id qemu_pid
	t0=$(now_ms)
	v2deps
	bindir=$(scripts/node-bins.sh)
	t_built=$(now_ms)
	id=$(date +%Y%m%d-%H%M%S)-$$
	dir=$v2runs/$id
	stage=$dir/disk
	mkdir -p "$stage/images/bin"
	trap 'rc=$?; if [ $rc != 0 ]; then v2log "bring-up failed; the guest console is in $dir/console.log"; tail -n 40 "$dir/console.log" 2>/dev/null | sed "s/\x1b\[[0-9;]*[A-Za-z]//g" >&2; v2down_run "$dir"; fi' EXIT

	# The run disk: the guest's setup, its settings, PKI, kubeconfigs, the
	# images and evictd, the ssh key that lets the host in.
	node_name=$guest_name node_sans=",IP:$guest_ip,DNS:$guest_name" dir=$stage pki
	for k in admin:admin controller-manager:controller-manager scheduler:scheduler kubelet:node; do
		guest_kubeconfig "${k%%:*}" "${k#*:}"
	done
	cp scripts/node-v2-guest.sh "$stage/setup.sh"
	# (Its drop-ins, kubelet.conf.d, go on the run disk too.)
	dir=$stage kubelet_node_yaml >"$stage/kubelet-node.yaml"
	cp "$images"/pause.tar "$images"/work.tar "$images"/evictd.tar "$stage/images/"
	cp "$images/bin/evictd" "$stage/images/bin/"
	[[ $threshold_mi =~ ^[1-9][0-9]*$ ]] || die "EVICTD_NODE_THRESHOLD_MI=$threshold_mi: want a positive number of MiB"
	[[ $max_pods =~ ^[1-9][0-9]*$ ]] && [ "$max_pods" -le 250 ] || die "EVICTD_NODE_MAX_PODS=$max_pods: want 1 to 250"
	[[ $mem_mi =~ ^[1-9][0-9]*$ ]] || die "EVICTD_NODE_V2_MEM=$mem_mi: want MiB"
	[[ $smp =~ ^[1-9][0-9]*$ ]] || die "EVICTD_NODE_V2_SMP=$smp: want a number of vCPUs"
	cat >"$stage/node.env" <<EOF
NODE_NAME=$guest_name
NODE_IP=$guest_ip
POD_CIDR=$pod_cidr
CANARY=$canary
CGROUP_DRIVER=systemd
ALLOCATABLE_MI=$allocatable_mi
THRESHOLD_MI=$threshold_mi
MAX_PODS=$max_pods
TIMEOUT_SCALE=$timeout_scale
EOF
	ssh-keygen -q -t ed25519 -N '' -C "evictd-node-v2-$id" -f "$dir/ssh.key"
	cp "$dir/ssh.key.pub" "$stage/authorized_keys"
	ext4_image_small "$stage" "$dir/run.img" evictd-run

	# Two loopback ports, forwarded by qemu to the guest's API server and sshd.
	: >"$dir/ports"
	api_port=$(free_port)
	ssh_port=$(free_port)
	cat >"$dir/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: node-v2
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$stage/pki/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$stage/pki/admin.crt", client-key: "$stage/pki/admin.key"}
contexts:
- name: node-v2
  context: {cluster: node-v2, user: admin}
current-context: node-v2
EOF
	local kernel=$root/.cache/vm/vmlinux
	[ -s "$kernel" ] || kernel=$root/.cache/vm/vmlinuz
	# -snapshot for every disk: the images stay as built, the guest's
	# writes go to qemu's temporary files (in the run's folder) and vanish
	# with it. NVMe because the cloud kernel has it built in (virtio-blk is
	# a module, and there is no initramfs).
	TMPDIR=$dir qemu-system-x86_64 -name "evictd-node-v2-$id" -nodefaults -display none -no-reboot \
		-accel tcg,thread=multi -cpu max -m "${mem_mi}M" -smp "$smp" \
		-kernel "$kernel" \
		-append "root=/dev/nvme0n1 rw rootfstype=ext4 console=ttyS0 panic=-1 quiet loglevel=4 systemd.show_status=false cryptomgr.notests initcall_blacklist=crypto_kdf108_init,load_system_certificate_list tsc=reliable" \
		-drive "file=$v2cache/root.img,if=none,id=root,format=raw,snapshot=on" \
		-drive "file=$v2cache/bins.img,if=none,id=bins,format=raw,snapshot=on" \
		-drive "file=$dir/run.img,if=none,id=run,format=raw,snapshot=on" \
		-device nvme,id=nvme0,serial=evictd-node-v2 \
		-device nvme-ns,drive=root,bus=nvme0,nsid=1 -device nvme-ns,drive=bins,bus=nvme0,nsid=2 -device nvme-ns,drive=run,bus=nvme0,nsid=3 \
		-netdev "user,id=n0,restrict=on,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:$api_port-$guest_ip:6443,hostfwd=tcp:127.0.0.1:$ssh_port-$guest_ip:22" \
		-device virtio-net-pci,netdev=n0 \
		-serial "file:$dir/console.log" -daemonize -pidfile "$dir/qemu.pid" 8>&- 9>&-
	qemu_pid=$(cat "$dir/qemu.pid")
	t_boot=$(now_ms)
	cat >"$dir/env.host" <<EOF
KUBECONFIG=$dir/admin.kubeconfig
EVICTD_NODE_V2_DIR=$dir
EVICTD_NODE_V2_SSH_PORT=$ssh_port
EVICTD_NODE_V2_API_PORT=$api_port
EVICTD_NODE_V2_QEMU_PID=$qemu_pid
EOF
	v2wait "ssh into the guest" 600 gssh true
	t_ssh=$(now_ms)
	# The guest's setup (scripts/node-v2-guest.sh) ends when the node is Ready.
	v2wait "the guest's node" 900 gssh test -s /var/lib/evictd-node/env
	v2wait "the API server through the port forward" 60 "$bindir/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout 5s get node "$guest_name"
	t_ready=$(now_ms)
	gssh cat /var/lib/evictd-node/env >"$dir/env"
	trap - EXIT
	v2log "Ready in $(((t_ready - t0) / 1000)) s: images and disks $(((t_built - t0) / 1000)) s, qemu started, ssh answers $(((t_ssh - t_boot) / 1000)) s after, node Ready $(((t_ready - t_boot) / 1000)) s after (guest uptime at each step: $(gssh cat /var/lib/evictd-node/times | tr '\n' ' ')); ${mem_mi} MiB, $smp vCPUs; run dir $dir"
	echo "KUBECONFIG=$dir/admin.kubeconfig"
}

# ext4_image_small DIR IMG LABEL: a small folder as an ext4 image.
ext4_image_small() {
	local mib=$(($(du -sm "$1" | cut -f1) * 12 / 10 + 16))
	truncate -s "${mib}M" "$2"
	mkfs.ext4 -q -F -L "$3" -E root_owner=0:0 -d "$1" "$2" >&2
}

# v2wait WHAT SECONDS CMD...: polls CMD every second while qemu lives.
v2wait() {
	local what=$1 secs=$2 end
	shift 2
	end=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		kill -0 "$(cat "$dir/qemu.pid")" 2>/dev/null || die "$what: the VM stopped"
		[ "$(date +%s)" -lt "$end" ] || die "$what: not after ${secs}s"
		sleep 3
	done
}

# gssh CMD...: CMD in the guest of the run $dir, as root, over the forwarded port.
gssh() {
	local port
	port=$(awk -F= '$1 == "EVICTD_NODE_V2_SSH_PORT" {print $2}' "$dir/env.host")
	# One connection, kept open and shared (ControlMaster): an ssh handshake
	# costs the emulated guest a second of CPU.
	ssh -q -i "$dir/ssh.key" -p "$port" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=8 \
		-o ControlMaster=auto -o ControlPath="$dir/ssh.sock" -o ControlPersist=yes root@127.0.0.1 "$@" 8>&- 9>&-
}

# current: the running node's run directory (the newest).
current() {
	dir=$(ls -d "$v2runs"/*/ 2>/dev/null | tail -n 1)
	dir=${dir%/}
	[ -n "$dir" ] && [ -f "$dir/env.host" ] || die "no VM node is running (scripts/node-v2.sh up)"
}

# ---- down -------------------------------------------------------------------

# v2down_run DIR: stops the run's qemu (by the PID it wrote, only while that
# PID still runs this run's qemu) and removes the run's files.
v2down_run() {
	local d=$1 pid t0
	t0=$(now_ms)
	# The shared ssh connection first, then the VM.
	[ -S "$d/ssh.sock" ] && ssh -q -o ControlPath="$d/ssh.sock" -O exit root@127.0.0.1 2>/dev/null || true
	if [ -f "$d/qemu.pid" ]; then
		pid=$(cat "$d/qemu.pid")
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$d/run.img"; then
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		fi
	fi
	rm -rf "$v2cache/last-console.log"
	[ -f "$d/console.log" ] && cp "$d/console.log" "$v2cache/last-console.log"
	rm -rf "$d"
	v2log "down in $(((($(now_ms) - t0)) / 1000)).$(((($(now_ms) - t0)) % 1000 / 100)) s ($(basename "$d")); the guest's console in $v2cache/last-console.log"
}

v2down_all() {
	local d
	[ -d "$v2runs" ] || return 0
	for d in "$v2runs"/*/; do
		[ -d "$d" ] && v2down_run "${d%/}"
	done
	return 0
}

# v2check: nothing of a VM node left on the host: no process (qemu, ssh)
# naming a run folder, no run folder (so no port forward listening either:
# qemu holds those).
v2check() {
	local bad=0 p
	for p in /proc/[0-9]*; do
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$v2runs/"; then
			v2log "process ${p#/proc/} of a VM node still runs: $(tr '\0' ' ' <"$p/cmdline" | cut -c1-120)"
			bad=1
		fi
	done
	if [ -n "$(ls -A "$v2runs" 2>/dev/null)" ]; then
		v2log "run folders left: $(ls "$v2runs" | tr '\n' ' ')"
		bad=1
	fi
	[ "$bad" = 0 ] || return 1
	v2log "no leftovers (qemu, run folders, port forwards)"
}

# ---- tests ----------------------------------------------------------------------

# v2gotest [go test -c flags] [-- test binary flags]: test/node's tests, built
# static on the host, run in the guest against its node, from a copy of the
# files they read at the same absolute path as here (the package's testdata,
# deploy/, scripts/node.sh and the toolchain.sh it sources for the traffic
# count, busybox for the canary).
v2gotest() {
	local build=() targs=() seen=
	for a in "$@"; do
		if [ "$a" = -- ]; then seen=1; elif [ -n "$seen" ]; then targs+=("$a"); else build+=("$a"); fi
	done
	current
	CGO_ENABLED=0 go test -c -trimpath ${build[@]+"${build[@]}"} -o "$dir/node.test" ./test/node/
	tar -C / -cf - "${root#/}/test/node/testdata" "${root#/}/deploy" "${root#/}/scripts/node.sh" "${root#/}/scripts/toolchain.sh" "${root#/}/.cache/node/busybox/bin/busybox" |
		gssh "tar -C / -xf - && mkdir -p /var/lib/evictd-node/test"
	gssh "cat >/var/lib/evictd-node/test/node.test && chmod +x /var/lib/evictd-node/test/node.test" <"$dir/node.test"
	# The benchmark's settings go along (bench/node-v2.sh sets them).
	local pass=() kv
	while IFS= read -r kv; do pass+=("$kv"); done < <(env | grep -E '^EVICTD_BENCH_NODE_[A-Z_]+=' || true)
	gssh "cd ${root@Q}/test/node && env ${pass[*]@Q} EVICTD_TEST_NODE=1 EVICTD_NODE_DIR=/var/lib/evictd-node EVICTD_NODE_LOCKED=1 /var/lib/evictd-node/test/node.test ${targs[*]@Q}"
}

# v2traffic: what the guest's guard counted: "<total> <canary>".
v2traffic() {
	current
	gssh "${root@Q}/scripts/node.sh traffic"
}

v2tier() {
	local t0 t1 t2 rc=0 n
	t0=$(date +%s)
	v2lock
	v2deps
	t1=$(date +%s)
	v2log "images and disks ready in $((t1 - t0)) s"
	v2up >/dev/null || { v2down_all; return 1; }
	current
	v2gotest -- -test.v -test.count=1 -test.timeout=45m -test.run "$tests" || rc=$?
	# The no-traffic check, counted inside the guest: every packet it sent
	# to an address outside loopback, the pod range and the answers to the
	# host's own connections, less the canaries the tests sent on purpose.
	if n=$(v2traffic); then
		if [ "$((${n% *} - ${n#* }))" -ne 0 ]; then
			v2log "FAIL: no-traffic check: the guest sent $((${n% *} - ${n#* })) packet(s) off loopback and the pod range (dropped by its guard)"
			rc=1
		else
			v2log "no-traffic check: 0 packets left the guest's loopback and pod range (${n#* } canary packet(s) counted apart)"
		fi
	else
		v2log "FAIL: no-traffic check: cannot read the guest's counters"
		rc=1
	fi
	v2down_all
	v2check || rc=1
	t2=$(date +%s)
	v2log "tier: images $((t1 - t0)) s, up, tests and down $((t2 - t1)) s"
	return $rc
}

case "${1:-}" in
deps) v2deps ;;
up) v2lock && v2up ;;
down) v2down_all && v2check ;;
test) v2tier ;;
gotest) shift && v2gotest "$@" ;;
ssh) shift && current && gssh "$@" ;;
traffic) v2traffic ;;
env) current && cat "$dir/env.host" "$dir/env" ;;
check) v2check ;;
*) sed -n '2,36p' "$0" >&2; exit 2 ;;
esac
