#!/usr/bin/env bash
# The real-node tier's cluster: a single-node Kubernetes v1.37.2 (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# containerd) on this machine, on loopback, under one work directory.
#
# Usage:
#   scripts/node.sh up         bring a node up (tearing down a stale one first);
#                              the last line printed is KUBECONFIG=<admin kubeconfig>
#   scripts/node.sh down       tear every node of this checkout down (also an
#                              interrupted one: it works from the run's records)
#   scripts/node.sh test       the tier: build, then the Go tests of test/node/
#                              (which bring the node up and down themselves)
#   scripts/node.sh deps|images|env|traffic|snapshot|check   (the steps, see below)
#
# up reads three kubelet settings from the environment (bench/node.sh sets
# them; the tests use the defaults): EVICTD_NODE_THRESHOLD_MI (the
# memory.available hard threshold, 300), EVICTD_NODE_MAX_PODS (30) and
# EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION (false).
#
# Layout: .cache/node/bin (Kubernetes binaries, scripts/node-bins.sh),
# .cache/node/images (OCI archives), .cache/node/run/<id>/ (one node: PKI,
# kubeconfigs, configs, etcd and containerd data, kubelet root, logs, and the
# records teardown works from: pids, before/). docs/testing.md explains it.
#
# Only one node per machine: the kubelet's pod cgroups (/kubepods) and the
# host-wide directories it writes are not per run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolchain.sh
root=$PWD
cache=$root/.cache/node
runs=$cache/run
images=$cache/images

# The pod network: a local bridge, never routed (isGateway false, no routes,
# no masquerade, ip_forward left off).
bridge=evictd0
pod_cidr=10.88.0.0/24
# Node allocatable memory, set by reservation so pods meet real pressure
# without starving the machine, and the kubelet's hard threshold on it.
allocatable_mi=1536
# The kubelet settings a run may change (bench/node.sh does; the tests use
# the defaults): the memory.available hard threshold, which is also the
# headroom between the allocatable threshold and the kubepods cgroup's limit
# (capacity − reserved), where the kernel OOM-kills; maxPods; and
# kernelMemcgNotification (the kubelet's memcg threshold eventfds on v1).
threshold_mi=${EVICTD_NODE_THRESHOLD_MI:-300}
max_pods=${EVICTD_NODE_MAX_PODS:-30}
memcg_notification=${EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION:-false}
# Debian packages the tier runs (no build): see docs/testing.md for why.
packages=(containerd runc etcd-server iptables nftables containernetworking-plugins curl openssl iproute2)
# iptables chains of our own: the no-traffic guard and counter.
chain_out=EVICTD-NODE-OUT
chain_fwd=EVICTD-NODE-FWD
# Where the tests send their one canary packet (TEST-NET-3, RFC 5737).
canary=203.0.113.7
# sysctls the cluster may change (the kubelet's kernel tunables, forwarding,
# and the huge page pool TestSummaryWithHugePages reserves, in case its own
# cleanup never ran): recorded before a run and restored by teardown.
sysctls=(net.ipv4.ip_forward net.ipv6.conf.all.forwarding vm.overcommit_memory vm.panic_on_oom vm.nr_hugepages
	kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes
	net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables)
# Directories the kubelet, containerd and CNI write outside the work
# directory (and /var/lib/evictd, the hostPath of evictd's DaemonSet for its
# state file): removed by teardown when they did not exist before the run.
# Left behind, the next node's evictd restored the last node's conditions.
host_dirs=(/var/lib/kubelet /var/log/containers /var/log/pods /run/containerd /run/netns /var/lib/cni /var/lib/containerd /opt/containerd /var/lib/evictd)
# Kubernetes' own iptables chains (v4 and v6, every table).
kube_chains='KUBE-FIREWALL|KUBE-KUBELET-CANARY|KUBE-IPTABLES-HINT'

log() { printf 'node: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now_ms() { date +%s%3N; }

# ---- deps: Debian packages, busybox, binaries, images -----------------------

deps() {
	scripts/apt-install.sh "${packages[@]}"
	if [ ! -x "$cache/busybox/bin/busybox" ]; then
		log "fetching busybox-static (unpacked into .cache/node/busybox, not installed)"
		local tmp
		tmp=$(mktemp -d)
		chmod 0777 "$tmp" # apt-get download drops privileges to _apt when it can
		(cd "$tmp" && apt-get download -qq busybox-static >&2) || { apt-get update -qq >&2 && (cd "$tmp" && apt-get download -qq busybox-static >&2); }
		rm -rf "$cache/busybox" && mkdir -p "$cache/busybox"
		dpkg -x "$tmp"/busybox-static_*.deb "$cache/busybox"
		rm -rf "$tmp"
	fi
}

bins() { scripts/node-bins.sh; }

# The images, as OCI archives, made by tools/image (the project's one way
# of making images): pause and work (busybox + hog) for this machine's
# platform, and evictd as `make image` builds its release image (linux/amd64
# and linux/arm64 in one index, version stamped from git; the node imports
# its own platform). Static binaries, rebuilt from Go's cache in seconds;
# images/bin/evictd is the amd64 binary in the image, for the tests that run
# evictd on the host.
build_images() {
	local b=$images/bin t
	mkdir -p "$b"
	CGO_ENABLED=0 go build -trimpath -o "$b/" ./test/node/cmd/pause ./test/node/cmd/hog
	t=$(scripts/image.sh tool)
	"$t" build -o "$images/pause.tar" -name evictd.local/pause:node -entrypoint /pause -platform "linux/amd64=$b/pause" >/dev/null
	"$t" build -o "$images/work.tar" -name evictd.local/work:node -entrypoint /hog -platform "linux/amd64=$b/hog" \
		-busybox "linux/amd64=$cache/busybox/bin/busybox" >/dev/null
	scripts/image.sh build evictd.local/evictd:node >&2
	cp "$root/.cache/image/evictd.tar" "$images/evictd.tar"
	cp "$root/.cache/image/bin/linux-amd64/evictd" "$b/evictd"
}

# ---- up ---------------------------------------------------------------------

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		if ! ss -Htln "sport = :$p" | grep -q . && ! grep -qw "$p" "$dir/ports" 2>/dev/null; then
			echo "$p" >>"$dir/ports"
			echo "$p"
			return
		fi
	done
}

# start NAME CMD...: runs a daemon in the run's cgroup (unified hierarchy),
# in its own session, logging to logs/NAME.log, and records its PID.
start() {
	local name=$1
	shift
	# fd 9 is node.sh's lock: a daemon that kept it would hold it forever.
	(exec 9>&- && echo "$BASHPID" >"$cg/cgroup.procs" && exec setsid "$@") >"$dir/logs/$name.log" 2>&1 </dev/null &
	echo "$name $!" >>"$dir/pids"
}

# run_in_cg CMD...: a short command in the run's cgroup (its packets count).
run_in_cg() { (exec 9>&- && echo "$BASHPID" >"$cg/cgroup.procs" && exec "$@"); }

# wait_for WHAT SECONDS CMD...: polls CMD every 100 ms.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local end=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$end" ]; then
			log "$what not ready after ${secs}s; last lines of the logs:"
			tail -n 15 "$dir"/logs/*.log >&2 || true
			return 1
		fi
		check_alive
		sleep 0.1
	done
}

check_alive() {
	local name pid
	while read -r name pid; do
		kill -0 "$pid" 2>/dev/null || { log "$name (pid $pid) died; its log:"; tail -n 30 "$dir/logs/$name.log" >&2; exit 1; }
	done <"$dir/pids"
}

# Certificates (EC P-256, openssl): one CA signs the apiserver's and the
# kubelet's serving certificates and every client certificate.
pki() {
	local p=$dir/pki
	mkdir -p "$p"
	openssl ecparam -name prime256v1 -genkey -noout -out "$p/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$p/ca.key" -subj /CN=evictd-node-ca -days 2 -out "$p/ca.crt" 2>/dev/null
	cert() { # name subject [subjectAltName]
		openssl ecparam -name prime256v1 -genkey -noout -out "$p/$1.key" 2>/dev/null
		openssl req -new -key "$p/$1.key" -subj "$2" -out "$p/$1.csr" 2>/dev/null
		local ext=$p/$1.ext
		printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$4" >"$ext"
		[ -z "$3" ] || echo "subjectAltName=$3" >>"$ext"
		openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 \
			-extfile "$ext" -out "$p/$1.crt" 2>/dev/null
		rm -f "$p/$1.csr" "$ext"
	}
	# The node's name and address: 127.0.0.1 here; scripts/node-v2.sh (the
	# VM's node, which sources this file) sets its own.
	local name=${node_name:-127.0.0.1} sans=${node_sans:-}
	cert apiserver /CN=kube-apiserver "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc$sans" serverAuth
	cert kubelet-serving "/CN=$name" "IP:127.0.0.1,DNS:localhost$sans" serverAuth
	cert admin "/O=system:masters/CN=evictd-node-admin" "" clientAuth
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "" clientAuth
	cert controller-manager /CN=system:kube-controller-manager "" clientAuth
	cert scheduler /CN=system:kube-scheduler "" clientAuth
	cert node "/O=system:nodes/CN=system:node:$name" "" clientAuth
	openssl ecparam -name prime256v1 -genkey -noout -out "$p/sa.key" 2>/dev/null
	openssl ec -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
}

kubeconfig() { # name user
	cat >"$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: node
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority: $dir/pki/ca.crt
users:
- name: $1
  user:
    client-certificate: $dir/pki/$2.crt
    client-key: $dir/pki/$2.key
contexts:
- name: node
  context: {cluster: node, user: $1}
current-context: node
EOF
}

# record_before: what teardown restores or compares (per run, in before/).
record_before() {
	local b=$dir/before
	mkdir -p "$b"
	for s in "${sysctls[@]}"; do
		if v=$(sysctl -n "$s" 2>/dev/null); then printf '%s\t%s\n' "$s" "$v"; fi
	done >"$b/sysctls"
	for d in "${host_dirs[@]}"; do if [ -e "$d" ]; then echo "$d"; fi; done >"$b/dirs"
	{ ip netns list 2>/dev/null || true; } | awk '{print $1}' >"$b/netns"
	ipt_tables >"$b/tables"
}

containerd_config() {
	local c=$dir/containerd
	mkdir -p "$c/root" "$c/state" "$dir/cni/net.d"
	# Pull guard: every registry's server is a closed loopback port (the
	# _default directory), so a pull fails on loopback without resolving a
	# name. containerd 1.6.20 rejects a hosts.toml without a [host] tree
	# ("invalid `host` tree") and then pulls from the registry itself: it
	# looked Docker Hub up once, which the no-traffic guard dropped.
	mkdir -p "$dir/certs.d/_default"
	cat >"$dir/certs.d/_default/hosts.toml" <<EOF
server = "http://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
EOF
	cat >"$dir/cni/net.d/10-evictd-node.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "evictd-node",
  "plugins": [{
    "type": "bridge", "bridge": "$bridge", "isGateway": false, "ipMasq": false, "hairpinMode": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "dataDir": "$dir/cni/ipam"}
  }]
}
EOF
	cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "evictd.local/pause:node"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_tcp_service = true
  # This host's bounding set lacks CAP_SYS_RESOURCE: nothing may lower an
  # oom_score_adj, and runc fails every sandbox unless the adjustment is
  # restricted to values at or above the current one.
  restrict_oom_score_adj = true
  # Pod network namespaces under the work directory, not /run/netns.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/certs.d"
EOF
}

kubelet_config() {
	local mem_mi reserved_mi
	[[ $threshold_mi =~ ^[1-9][0-9]*$ ]] || die "EVICTD_NODE_THRESHOLD_MI=$threshold_mi: want a positive number of MiB"
	[[ $max_pods =~ ^[1-9][0-9]*$ ]] && [ "$max_pods" -le 250 ] || die "EVICTD_NODE_MAX_PODS=$max_pods: want 1 to 250 (the pod range $pod_cidr holds 253 addresses)"
	case $memcg_notification in true | false) ;; *) die "EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION=$memcg_notification: want true or false" ;; esac
	mem_mi=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
	reserved_mi=$((mem_mi - allocatable_mi - threshold_mi))
	[ "$reserved_mi" -gt 0 ] || die "this machine has ${mem_mi} MiB of memory; the node needs more than $((allocatable_mi + threshold_mi)) MiB"
	mkdir -p "$dir/kubelet" "$dir/manifests" "$dir/pod-logs" "$dir/volume-plugins"
	cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
imageServiceEndpoint: unix://$dir/containerd/containerd.sock
staticPodPath: $dir/manifests
podLogsDir: $dir/pod-logs
volumePluginDir: $dir/volume-plugins
resolvConf: ""
# A cluster DNS address, as every real node has: without one the kubelet
# writes a Warning event "MissingClusterDNS" on the NODE for every pod it
# starts, and its event recorder passes only 25 events per object and type
# (client-go's spam filter, then one per 5 min): after ~12 pods it silently
# dropped the node's EvictionThresholdMet that TestKubeletEvictsMemoryHog
# reads. No DNS server runs: 127.0.0.1 is the pod's own loopback (the host's
# for hostNetwork pods, where nothing listens on port 53 either), so a
# lookup fails at once and no packet leaves loopback.
clusterDNS: [127.0.0.1]
clusterDomain: cluster.local
kernelMemcgNotification: $memcg_notification
systemReserved:
  memory: ${reserved_mi}Mi
EOF
	kubelet_node_yaml >>"$dir/kubelet.yaml"
}

# kubelet_node_yaml: the kubelet settings both nodes share (scripts/node-v2.sh
# puts them on the VM node's run disk): pods, the pods' allocatable
# enforced, the memory.available hard threshold, image GC off.
kubelet_node_yaml() {
	cat <<EOF
maxPods: $max_pods
enforceNodeAllocatable: [pods]
evictionHard:
  memory.available: ${threshold_mi}Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
  imagefs.inodesFree: 1%
evictionPressureTransitionPeriod: 20s
# The images are imported, never pulled: garbage collection must not drop them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
	# Drop-ins (--config-dir), merged over kubelet.yaml as JSON merge
	# patches in lexical order, subdirectories included, *.conf only: the
	# kubelet's disk thresholds become nodefs.available 2% (10-disk.conf's
	# 4%, then 20-sub/10-disk.conf's 2%) and imagefs.inodesFree none (null
	# removes it); README is skipped. Memory thresholds are the file's, which
	# is all the DaemonSet's evictd reads (it mounts the file alone) and all
	# the tests' pressure is about; test/node's TestKubeletConfigDropIns
	# checks that evictd reads the rest as the kubelet does (its /configz).
	mkdir -p "$dir/kubelet.conf.d/20-sub"
	cat >"$dir/kubelet.conf.d/10-disk.conf" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  nodefs.available: 4%
  imagefs.inodesFree: null
EOF
	cat >"$dir/kubelet.conf.d/20-sub/10-disk.conf" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  nodefs.available: 2%
EOF
	cat >"$dir/kubelet.conf.d/README" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
evictionHard:
  memory.available: 5Gi
EOF
}

up() {
	local t0 id
	[ "$(id -u)" = 0 ] || die "the node needs root (cgroups, mounts, iptables)"
	down_all
	other_node_up
	[ -x "$cache/busybox/bin/busybox" ] || deps
	bindir=$(bins)
	build_images # the tree under test's evictd; seconds when Go's cache is warm
	t0=$(now_ms) # from here: bring-up proper, without a stale run's teardown and the builds
	id=$(date +%Y%m%d-%H%M%S)-$$
	dir=$runs/$id
	mkdir -p "$dir/logs"
	# A failed bring-up leaves nothing either (its logs go to last-logs).
	trap 'rc=$?; if [ $rc != 0 ]; then log "bring-up failed; tearing down"; down_run "$dir"; fi' EXIT
	: >"$dir/pids"
	: >"$dir/ports"
	record_before
	cg=/sys/fs/cgroup/unified/evictd-node-$id
	[ -d /sys/fs/cgroup/unified ] || cg=/sys/fs/cgroup/evictd-node-$id # pure cgroup v2
	mkdir "$cg"
	echo "$cg" >"$dir/cgroup"
	guard_on
	local t_pki t_etcd t_api t_ctrd t_kubelet
	etcd_port=$(free_port)
	etcd_peer_port=$(free_port)
	apiserver_port=$(free_port)
	cm_port=$(free_port)
	sched_port=$(free_port)
	kubelet_port=$(free_port)
	kubelet_healthz_port=$(free_port)
	pki
	for k in admin:admin controller-manager:controller-manager scheduler:scheduler kubelet:node; do
		kubeconfig "${k%%:*}" "${k#*:}"
	done
	t_pki=$(now_ms)

	start etcd /usr/bin/etcd --name node --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "node=http://127.0.0.1:$etcd_peer_port" --initial-cluster-state new
	# Configure containerd meanwhile, start it once etcd answers.
	containerd_config
	kubelet_config
	wait_for etcd 30 curl -fsS --max-time 2 "http://127.0.0.1:$etcd_port/health"
	t_etcd=$(now_ms)

	# No watch cache: Debian's etcd 3.4 cannot answer the cache's progress
	# requests ("RequestWatchProgress feature is not supported"), so a
	# resource's cache only advances on a write of that resource. After
	# TestAPIServerOutage restarts the server, clients whose informers hold
	# a newer resource version than a fresh cache ("Too large resource
	# version") went stale for minutes: the controller manager never saw
	# the test's namespace deleted. Served from etcd, lists and watches are
	# always current; one node's load does not need the cache.
	start kube-apiserver "$bindir/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$apiserver_port" \
		--endpoint-reconciler-type none --service-cluster-ip-range 10.96.0.0/24 \
		--client-ca-file "$dir/pki/ca.crt" --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
		--kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$dir/pki/ca.crt" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/pki/sa.pub" \
		--service-account-signing-key-file "$dir/pki/sa.key" --profiling=false --watch-cache=false
	# containerd and the images meanwhile: the images are imported BEFORE
	# the kubelet starts (a runtime asked for an image it lacks resolves
	# the registry's name).
	start containerd /usr/bin/containerd --config "$dir/containerd/config.toml"
	wait_for containerd 30 ctr -a "$dir/containerd/containerd.sock" --timeout 2s version
	for img in pause work evictd; do
		run_in_cg ctr -a "$dir/containerd/containerd.sock" --timeout 60s -n k8s.io images import --platform linux/amd64 "$images/$img.tar" >/dev/null
	done
	t_ctrd=$(now_ms)
	wait_for kube-apiserver 60 "$bindir/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout 2s get --raw /readyz
	t_api=$(now_ms)

	start kube-controller-manager "$bindir/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$dir/controller-manager.kubeconfig" --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$cm_port" --leader-elect=false --use-service-account-credentials \
		--root-ca-file "$dir/pki/ca.crt" --service-account-private-key-file "$dir/pki/sa.key" \
		--controllers serviceaccount-token-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,daemonset-controller,disruption-controller,replicaset-controller,deployment-controller,garbage-collector-controller,namespace-controller,pod-garbage-collector-controller,node-lifecycle-controller
	start kube-scheduler "$bindir/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
		--authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
	# One eviction setting by flag, as distributions still pass some
	# (harmless here: the disk never fills): evictd finds it on the
	# kubelet's command line in /proc. --vmodule=eviction_manager=3: the
	# eviction manager logs the end of each synchronize ("no resources are
	# starved"), which the tests' gate waits for (test/node/gate_test.go).
	start kubelet "$bindir/kubelet" --config "$dir/kubelet.yaml" --config-dir "$dir/kubelet.conf.d" \
		--eviction-minimum-reclaim=nodefs.available=100Mi --kubeconfig "$dir/kubelet.kubeconfig" \
		--hostname-override 127.0.0.1 --root-dir "$dir/kubelet" --vmodule=eviction_manager=3
	wait_for "node Ready" 90 node_ready
	guard_pods
	wait_for "default service account" 30 "$bindir/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout 2s get serviceaccount default
	wait_for "kube-root-ca.crt" 30 "$bindir/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout 2s get configmap kube-root-ca.crt
	t_kubelet=$(now_ms)
	cat >"$dir/env" <<EOF
EVICTD_NODE_DIR=$dir
KUBECONFIG=$dir/admin.kubeconfig
EVICTD_NODE_BIN=$bindir
EVICTD_NODE_IMAGES=$images
EVICTD_NODE_KUBELET=https://127.0.0.1:$kubelet_port
EVICTD_NODE_KUBELET_ROOT=$dir/kubelet
EVICTD_NODE_POD_LOGS=$dir/pod-logs
EVICTD_NODE_CONTAINERD=$dir/containerd/containerd.sock
EVICTD_NODE_CGROUP=$cg
EVICTD_NODE_THRESHOLD=${threshold_mi}Mi
EVICTD_NODE_ALLOCATABLE=${allocatable_mi}Mi
EVICTD_NODE_MAX_PODS=$max_pods
EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION=$memcg_notification
EOF
	log "Ready in $(((t_kubelet - t0) / 1000)).$(((t_kubelet - t0) % 1000 / 100)) s (PKI $((t_pki - t0)) ms, etcd $((t_etcd - t0)) ms, containerd and images $((t_ctrd - t0)) ms, apiserver $((t_api - t0)) ms, kubelet Ready $((t_kubelet - t0)) ms); run dir $dir"
	echo "KUBECONFIG=$dir/admin.kubeconfig"
}

node_ready() {
	"$bindir/kubectl" --kubeconfig "$dir/admin.kubeconfig" --request-timeout 2s get node 127.0.0.1 \
		-o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' | grep -qx True
}

# ---- the no-traffic guard -----------------------------------------------------
#
# Every packet that a process of the cluster (the daemons, the shims, and
# what they start and keep in the run's cgroup) sends to an address outside
# 127.0.0.0/8, ::1 and the pod range is counted and DROPPED in OUTPUT, and so
# is everything forwarded from the pods' bridge. Other processes on the
# machine (another checkout fetching Go modules) are not counted: the rule
# matches the run's cgroup (xt_cgroup on the unified hierarchy). A non-zero
# count fails the tier; nothing counted ever leaves the machine.

# cg_rel: the run's cgroup as the unified hierarchy names it (/evictd-node-<id>).
cg_rel() {
	local p=${cg#/sys/fs/cgroup/unified}
	echo "${p#/sys/fs/cgroup}"
}

guard_rules() { # -I|-D
	local op=$1 path
	path=$(cg_rel)
	iptables -w "$op" OUTPUT -m cgroup --path "$path" -j "$chain_out"
	ip6tables -w "$op" OUTPUT -m cgroup --path "$path" -j "$chain_out"
	# Routed out of the bridge only: frames bridged between two pods also
	# pass FORWARD here (br_netfilter), with the bridge as the output.
	iptables -w "$op" FORWARD -i "$bridge" ! -o "$bridge" -j "$chain_fwd"
	ip6tables -w "$op" FORWARD -i "$bridge" ! -o "$bridge" -j "$chain_fwd"
}

guard_on() {
	iptables -w -N "$chain_out"
	iptables -w -A "$chain_out" -d 127.0.0.0/8 -j RETURN
	iptables -w -A "$chain_out" -d "$pod_cidr" -j RETURN
	# The tests' canary (TEST-NET-3), counted apart, then everything else.
	iptables -w -A "$chain_out" -d "$canary/32" -j DROP
	iptables -w -A "$chain_out" -j DROP
	ip6tables -w -N "$chain_out"
	ip6tables -w -A "$chain_out" -d ::1/128 -j RETURN
	ip6tables -w -A "$chain_out" -j DROP
	iptables -w -N "$chain_fwd"
	iptables -w -A "$chain_fwd" -j DROP
	ip6tables -w -N "$chain_fwd"
	ip6tables -w -A "$chain_fwd" -j DROP
	guard_rules -I
}

# guard_pods: runc moves the containers' processes into the kubelet's
# kubepods cgroup in the unified hierarchy too (hybrid host), out of the
# run's cgroup: count theirs as well (a hostNetwork pod's packets pass the
# host's OUTPUT; other pods' pass FORWARD, if anything). The kubelet made
# that cgroup when it started; xt_cgroup needs it to exist.
guard_pods() {
	local kp=${cg%/*}/kubepods
	if [ ! -d "$kp" ]; then
		log "no $kp: hostNetwork pods' packets are not counted"
		return 0
	fi
	iptables -w -I OUTPUT -m cgroup --path /kubepods -j "$chain_out"
	ip6tables -w -I OUTPUT -m cgroup --path /kubepods -j "$chain_out"
}

# traffic: the number of packets the guard has counted (and dropped), and
# of those the number sent to the canary address: "<total> <canary>".
traffic() {
	local n=0 k=0 c
	for ipt in iptables ip6tables; do
		for ch in "$chain_out" "$chain_fwd"; do
			c=$({ $ipt -w -L "$ch" -n -v -x 2>/dev/null || true; } | awk -v a="$canary" '$3 == "DROP" {s += $1; if ($9 == a) k += $1} END {print s + 0, k + 0}')
			n=$((n + ${c% *}))
			k=$((k + ${c#* }))
		done
	done
	echo "$n $k"
}

# ---- down -------------------------------------------------------------------

# kill_cgroup_procs DIR...: SIGKILLs every process in these cgroup trees.
kill_cgroup_procs() {
	local d p
	for d in "$@"; do
		[ -d "$d" ] || continue
		while read -r p; do
			[ -n "$p" ] && [ "$p" != $$ ] && kill -9 "$p" 2>/dev/null || true
		done < <(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
	done
}

pods_cgroups() { find /sys/fs/cgroup -maxdepth 2 -type d -name 'kubepods*' 2>/dev/null; }

# down_run DIR: tears one node down from its records, whatever state it is in.
down_run() {
	dir=$1
	local t0 name pid cg=
	t0=$(now_ms)
	[ -f "$dir/cgroup" ] && cg=$(cat "$dir/cgroup")
	# 1. The kubelet first (it would restart containers), then the pods'
	#    processes through their cgroups, then the control plane, the
	#    shims and containerd: everything left in the run's cgroup.
	if [ -f "$dir/pids" ]; then
		stop_pids $(awk '$1 == "kubelet" {print $2}' "$dir/pids")
	fi
	for _ in 1 2 3; do kill_cgroup_procs $(pods_cgroups); done
	if [ -f "$dir/pids" ]; then
		# The control plane and containerd together, then etcd (the
		# apiserver stops before etcd).
		stop_pids $(awk '$1 != "etcd" {print $2}' "$dir/pids")
		stop_pids $(awk '$1 == "etcd" {print $2}' "$dir/pids")
	fi
	for _ in 1 2 3; do
		[ -n "$cg" ] && kill_cgroup_procs "$cg"
		sleep 0.1
	done
	# 2. Mounts: the containers' rootfs and shm, the kubelet's bind mount of
	#    its root dir and pods' volumes, network namespaces. Deepest first.
	unmount_all
	# 3. Network: namespaces the run made, the bridge.
	local before_ns=$dir/before/netns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		if [ ! -f "$before_ns" ] || ! grep -qx "$ns" "$before_ns"; then
			case $ns in cni-*) ip netns delete "$ns" 2>/dev/null || true ;; esac
		fi
	done
	ip link delete "$bridge" 2>/dev/null || true
	# 4. Cgroups: the kubelet's pods cgroups in every hierarchy, ours.
	for d in $(pods_cgroups); do
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	if [ -n "$cg" ] && [ -d "$cg" ]; then
		guard_rules -D 2>/dev/null || true
		rmdir "$cg" 2>/dev/null || log "cannot remove $cg: $(cat "$cg/cgroup.procs" 2>/dev/null | wc -l) processes left"
	fi
	# 5. iptables: Kubernetes' chains (v4 and v6) and the guard's, and the
	#    tables they brought.
	remove_chains
	remove_new_tables
	# 6. sysctls and host directories, as recorded before the run.
	if [ -f "$dir/before/sysctls" ]; then
		while IFS=$'\t' read -r k v; do
			[ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -qw "$k=$v" >/dev/null || log "cannot restore $k=$v"
		done <"$dir/before/sysctls"
	fi
	if [ -f "$dir/before/dirs" ]; then
		for d in "${host_dirs[@]}"; do
			grep -qx "$d" "$dir/before/dirs" || rm -rf "$d"
		done
	fi
	# Keep the logs of the last run for a post-mortem, drop the rest.
	rm -rf "$cache/last-logs" && mv "$dir/logs" "$cache/last-logs" 2>/dev/null || true
	rm -rf "$dir"
	log "down in $(((($(now_ms) - t0)) / 1000)).$(((($(now_ms) - t0)) % 1000 / 100)) s ($(basename "$dir")); logs in $cache/last-logs"
}

# stop_pids PID...: SIGTERM, up to 5 s for all, then SIGKILL. Only PIDs
# still in the run's cgroup: a recycled PID belongs to someone else.
stop_pids() {
	local pid live=() i
	for pid in "$@"; do
		if kill -0 "$pid" 2>/dev/null && { [ -z "${cg:-}" ] || grep -q ":$(cg_rel)\$" "/proc/$pid/cgroup" 2>/dev/null; }; then
			kill -TERM "$pid" 2>/dev/null && live+=("$pid")
		fi
	done
	for i in $(seq 50); do
		[ ${#live[@]} -gt 0 ] || return 0
		local still=()
		for pid in "${live[@]}"; do kill -0 "$pid" 2>/dev/null && still+=("$pid"); done
		live=("${still[@]}")
		[ ${#live[@]} -gt 0 ] || return 0
		sleep 0.1
	done
	kill -KILL "${live[@]}" 2>/dev/null || true
}

our_mounts() {
	# Mount points (field 5 of mountinfo), deepest first, that the cluster made.
	awk -v d="$dir" '{print $5}' /proc/self/mountinfo |
		grep -E "^($dir|/run/containerd|/run/netns/cni-|/var/lib/kubelet)" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-
}

unmount_all() {
	local m
	for _ in 1 2 3; do
		while read -r m; do
			[ -n "$m" ] && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; }
		done < <(our_mounts)
	done
	[ -z "$(our_mounts)" ] || log "mounts left: $(our_mounts | tr '\n' ' ')"
}

# ipt_tables: the iptables tables that exist, as "<nft family> <table>".
ipt_tables() {
	{ iptables-save 2>/dev/null || true; } | sed -n 's/^\*/ip /p'
	{ ip6tables-save 2>/dev/null || true; } | sed -n 's/^\*/ip6 /p'
}

# remove_new_tables: with the nf_tables backend, the tables the kubelet's
# chains brought (nat, mangle, ...) stay behind empty once the chains are
# gone: delete those that did not exist before the run and hold nothing.
remove_new_tables() {
	local fam t ipt
	[ -f "$dir/before/tables" ] && command -v nft >/dev/null && iptables -V | grep -q nf_tables || return 0
	ipt_tables | while read -r fam t; do
		grep -qx "$fam $t" "$dir/before/tables" && continue
		ipt=iptables
		[ "$fam" = ip6 ] && ipt=ip6tables
		if ! $ipt -w -t "$t" -S | grep -qE '^-(A|N) '; then
			nft delete table "$fam" "$t" 2>/dev/null || log "cannot delete the empty table $fam $t"
		fi
	done
}

remove_chains() {
	local ipt t rule
	for ipt in iptables ip6tables; do
		for t in filter nat mangle; do
			# Rules that jump to the chains, then the chains.
			{ $ipt -w -t "$t" -S 2>/dev/null || true; } | { grep -E "^-A .* -j ($kube_chains|$chain_out|$chain_fwd)( |\$)" || true; } | while read -r rule; do
				eval "$ipt -w -t $t -D ${rule#-A }" 2>/dev/null || true
			done
			for ch in $($ipt -w -t "$t" -S 2>/dev/null | awk -v re="^($kube_chains|$chain_out|$chain_fwd)\$" '$1 == "-N" && $2 ~ re {print $2}'); do
				$ipt -w -t "$t" -F "$ch" 2>/dev/null || true
				$ipt -w -t "$t" -X "$ch" 2>/dev/null || true
			done
		done
	done
}

down_all() {
	local d
	[ -d "$runs" ] || return 0
	for d in "$runs"/*/; do
		[ -d "$d" ] && down_run "${d%/}"
	done
	return 0
}

# ---- checks -------------------------------------------------------------------

# snapshot: the machine's state that a node changes, for a before/after
# comparison (the leave-nothing test): pods cgroups, mounts, the cluster's
# processes, iptables (no counters), the sysctls it touches, links,
# namespaces, the host directories.
snapshot() {
	echo "# cgroups"
	find /sys/fs/cgroup -maxdepth 2 -type d \( -name 'kubepods*' -o -name 'evictd-node-*' -o -name k8s.io \) 2>/dev/null | sort || true
	echo "# mounts"
	awk '{print $5}' /proc/self/mountinfo | grep -E '^/run/containerd|/kubelet|^/run/netns|\.cache/node' | sort || true
	echo "# processes"
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		# Ours by executable (the Kubernetes commands, the images'
		# binaries) or by cgroup (the run's, or the kubelet's top-level
		# kubepods; other tests on this machine nest fake ones deeper, and
		# may run an etcd or containerd of their own).
		case $exe in
		"$cache"/*) echo "${p#/proc/} $exe" ;;
		*) if grep -qE ':/(kubepods|evictd-node-)' "$p/cgroup" 2>/dev/null; then echo "${p#/proc/} $exe (in a cluster cgroup)"; fi ;;
		esac
	done | sort
	echo "# iptables"
	for ipt in iptables ip6tables; do
		command -v "$ipt-save" >/dev/null && "$ipt-save" 2>/dev/null | grep -vE '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//' || true
	done
	echo "# sysctls"
	for s in "${sysctls[@]}"; do echo "$s = $(sysctl -n "$s" 2>/dev/null)"; done
	echo "# links"
	ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
	echo "# netns"
	ip netns list 2>/dev/null | awk '{print $1}' | sort || true
	echo "# dirs"
	for d in "${host_dirs[@]}"; do if [ -e "$d" ]; then echo "$d"; fi; done
}

# check: the leftovers a reviewer looks for.
check() {
	local bad=0
	if ls -d /sys/fs/cgroup/*/kubepods* 2>/dev/null; then bad=1; fi
	if grep -E '^/run/containerd|/kubelet' <(awk '{print $5}' /proc/self/mountinfo); then bad=1; fi
	if iptables -S 2>/dev/null | grep KUBE; then bad=1; fi
	if [ "$bad" = 1 ]; then log "leftovers (above)"; return 1; fi
	log "no leftovers (kubepods cgroups, mounts, KUBE iptables chains)"
}

# other_node_up refuses to bring a node up while another one is: the lock
# serializes up and down only, and a node brought up by `make node-up` in
# another worktree stays up after its `up` released the lock. A second
# bring-up would collide with it (the guard's chains exist) and its failure
# teardown would then remove what the first one runs on (the kubelet's
# kubepods cgroups, the guard's and Kubernetes' chains, the bridge) — which
# happened once. Checked before anything is changed.
other_node_up() {
	local why=
	if ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/kubepods* >/dev/null 2>&1; then why="kubepods cgroups exist"; fi
	if iptables -w -S "$chain_out" >/dev/null 2>&1; then why="${why:+$why, }the guard chain $chain_out exists"; fi
	if ip link show "$bridge" >/dev/null 2>&1; then why="${why:+$why, }the bridge $bridge exists"; fi
	[ -z "$why" ] || die "another node is up on this machine ($why); wait until its owner takes it down (make node-down in its worktree)"
}

# lock: one node per machine, and a node in use is not torn down by
# another `up`: up and down take /tmp/evictd-node.lock (as fd 9, which the
# daemons close), and the tier (or test/node's Main) holds it for the whole
# run and says so with EVICTD_NODE_LOCKED=1.
lock() {
	[ "${EVICTD_NODE_LOCKED:-}" = 1 ] && return 0
	exec 9>/tmp/evictd-node.lock
	flock -w 120 9 || die "another node is in use (/tmp/evictd-node.lock held for 120 s)"
}

# ---- the tier -------------------------------------------------------------------

tier() {
	local t0 t1 t2
	t0=$(date +%s)
	deps
	bins >/dev/null
	scripts/tool-bins.sh helm >/dev/null
	scripts/tool-bins.sh prometheus >/dev/null
	build_images
	t1=$(date +%s)
	log "binaries and images ready in $((t1 - t0)) s"
	local rc=0
	lock
	# helm and Prometheus for the Helm install and the real Prometheus
	# (test/node/ops_test.go), built from the module proxy and cached.
	EVICTD_HELM=$(scripts/tool-bins.sh helm) EVICTD_PROMETHEUS=$(scripts/tool-bins.sh prometheus) \
		EVICTD_NODE_LOCKED=1 EVICTD_TEST_NODE=1 go test -count=1 -p 1 -v -timeout 20m ./test/node/ || rc=$?
	# The tests tear the node down themselves; this catches a killed run.
	EVICTD_NODE_LOCKED=1 down_all
	check || rc=1
	t2=$(date +%s)
	log "tests, up and down in $((t2 - t1)) s"
	return $rc
}

# scripts/node-v2.sh sources this file for its steps (deps, images, PKI).
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case "${1:-}" in
deps) deps ;;
bins) bins ;;
images) deps && build_images ;;
up) lock && up ;;
down) lock && down_all && check ;;
traffic) traffic ;;
snapshot) snapshot ;;
check) check ;;
env) d=$(ls -d "$runs"/*/ 2>/dev/null | tail -n 1) && cat "${d}env" ;;
test) tier ;;
*) sed -n '2,27p' "$0" >&2; exit 2 ;;
esac
