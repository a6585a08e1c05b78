#!/bin/bash
# The cgroup v2 node inside its VM (scripts/node-v2.sh copies this file onto
# the run disk as setup.sh; the image's evictd-node.service runs it once the
# disks are mounted, as PID 1 systemd's oneshot). It brings up a single-node
# Kubernetes v1.37.2 as systemd units in evictd-node.slice: etcd (Debian's),
# kube-apiserver, containerd (Debian's, SystemdCgroup) with the node's images
# imported before the kubelet starts, kube-controller-manager,
# kube-scheduler and the kubelet with cgroupDriver: systemd. It writes the
# node's env file (the fixture's view, guest paths) and its step times.
#
# Inputs on the run disk (/opt/evictd-node/run, read-only): node.env (the
# settings), pki/, images/*.tar, images/bin/evictd. Binaries on the bins
# disk (/opt/evictd-node/bin). Everything it writes is on the root disk,
# which qemu discards at power-off (-snapshot).
set -euo pipefail
run=/opt/evictd-node/run
bin=/opt/evictd-node/bin
dir=/var/lib/evictd-node
. "$run/node.env"
times=$dir/times
mkdir -p "$dir/logs" "$dir/manifests" /etc/kubernetes
t0=$(cut -d' ' -f1 /proc/uptime)
mark() { printf '%s %s\n' "$1" "$(cut -d' ' -f1 /proc/uptime)" >>"$times"; }
mark setup-start
log() { echo "evictd-node: $*" >/dev/console; }

# PKI and kubeconfigs: made on the host (openssl is slow under emulation);
# copied where the units name them, inside the node's directory.
cp -r "$run/pki" "$dir/pki"
chmod 0600 "$dir"/pki/*.key
for k in "$run"/*.kubeconfig; do sed "s|@PKI@|$dir/pki|g" "$k" >"$dir/$(basename "$k")"; done

# ---- the no-traffic guard ----------------------------------------------------
# Every packet the guest sends that is not to itself (loopback, its own
# address), to the pods' bridge, or from the two forwarded ports (sshd,
# the API server) to qemu's end of them (10.0.2.2, where every forwarded
# connection comes from) is counted and DROPPED: the guest has no route
# out anyway (qemu user networking, restrict=on, no gateway). The one route
# besides the guest's own subnet is to the tests' canary (TEST-NET-3),
# which the guard drops and counts apart, so that the tests can show it
# counts. No IPv6 but loopback's. The chains have the v1 node's names and
# layout, so `scripts/node.sh traffic` reads them here too.
modprobe -a overlay br_netfilter bridge veth nf_conntrack xt_conntrack xt_multiport nft_compat nf_tables 2>/dev/null || true
uplink=$(ip -o -4 addr show | awk -v ip="$NODE_IP" '$4 ~ "^"ip"/" {print $2; exit}')
sysctl -qw net.ipv6.conf.default.disable_ipv6=1 "net.ipv6.conf.$uplink.disable_ipv6=1"
ip route add "$CANARY/32" dev "$uplink"
for ipt in iptables ip6tables; do
	$ipt -w -N EVICTD-NODE-OUT
	$ipt -w -A EVICTD-NODE-OUT -o lo -j RETURN
	$ipt -w -A EVICTD-NODE-OUT -o evictd0 -j RETURN
	$ipt -w -N EVICTD-NODE-FWD
done
iptables -w -A EVICTD-NODE-OUT -d 127.0.0.0/8 -j RETURN
iptables -w -A EVICTD-NODE-OUT -d "$POD_CIDR" -j RETURN
iptables -w -A EVICTD-NODE-OUT -o "$uplink" -d 10.0.2.2 -p tcp -m multiport --sports 22,6443 -j RETURN
iptables -w -A EVICTD-NODE-OUT -d "$CANARY/32" -j DROP
for ipt in iptables ip6tables; do
	$ipt -w -A EVICTD-NODE-OUT -j DROP
	$ipt -w -A EVICTD-NODE-FWD -j DROP
	$ipt -w -I OUTPUT -j EVICTD-NODE-OUT
	$ipt -w -I FORWARD -i evictd0 ! -o evictd0 -j EVICTD-NODE-FWD
done
sysctl -qw net.ipv4.ip_forward=0
mark guard

# ---- units ---------------------------------------------------------------------
# unit NAME ExecStart...: a service of the node's slice, logging to the journal
# and to logs/NAME.log.
unit() {
	local name=$1
	shift
	cat >"/run/systemd/system/evictd-$name.service" <<EOF
[Unit]
Description=evictd test node: $name
[Service]
Slice=evictd-node.slice
ExecStart=$*
Restart=no
KillMode=mixed
TimeoutStopSec=10
LimitNOFILE=1048576
StandardOutput=append:$dir/logs/$name.log
StandardError=append:$dir/logs/$name.log
EOF
	if [ "$name" = containerd ]; then
		# containerd's shims stay in its unit when it restarts, as
		# Debian's own unit does.
		sed -i 's/^KillMode=mixed/KillMode=process\nDelegate=yes\nOOMScoreAdjust=-999/' "/run/systemd/system/evictd-$name.service"
	fi
}
wait_for() { # WHAT SECONDS CMD...
	local what=$1 secs=$2 end
	shift 2
	end=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$end" ]; then
			log "$what not ready after ${secs}s"
			tail -n 20 "$dir"/logs/*.log >/dev/console 2>&1 || true
			exit 1
		fi
		sleep 1
	done
}

unit etcd /usr/bin/etcd --name node --data-dir "$dir/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster node=http://127.0.0.1:2380 --initial-cluster-state new
# The API server on every guest address: the host reaches it through the
# port forward to 10.0.2.15:6443; the guest's own clients on 127.0.0.1.
# No watch cache, as on the v1 node (Debian's etcd 3.4; see scripts/node.sh).
unit kube-apiserver "$bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
	--bind-address 0.0.0.0 --advertise-address "$NODE_IP" --secure-port 6443 \
	--endpoint-reconciler-type none --service-cluster-ip-range 10.96.0.0/24 \
	--client-ca-file "$dir/pki/ca.crt" --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
	--kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority "$dir/pki/ca.crt" \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged \
	--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/pki/sa.pub" \
	--service-account-signing-key-file "$dir/pki/sa.key" --profiling=false --watch-cache=false
unit containerd /usr/bin/containerd --config "$dir/containerd.toml"
unit kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$dir/controller-manager.kubeconfig" --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
	--root-ca-file "$dir/pki/ca.crt" --service-account-private-key-file "$dir/pki/sa.key" \
	--controllers serviceaccount-token-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,daemonset-controller,disruption-controller,replicaset-controller,deployment-controller,garbage-collector-controller,namespace-controller,pod-garbage-collector-controller,node-lifecycle-controller
unit kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
	--authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false
# --vmodule=eviction_manager=3: the end of each eviction synchronize is
# logged, for the tests' gate (test/node/gate_test.go).
# The drop-ins and the minimum reclaim flag are the v1 node's
# (scripts/node.sh), so that both nodes' kubelets read the same
# configuration the same way.
unit kubelet "$bin/kubelet" --config /var/lib/kubelet/config.yaml --config-dir "$dir/kubelet.conf.d" \
	--eviction-minimum-reclaim=nodefs.available=100Mi --kubeconfig "$dir/kubelet.kubeconfig" \
	--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --vmodule=eviction_manager=3
systemctl daemon-reload

# ---- containerd ----------------------------------------------------------------
# Debian's containerd 1.6 with the systemd cgroup driver (runc asks systemd
# for each container's scope), the local pause image, the pull guard (every
# registry's server a closed loopback port; see scripts/node.sh), pods'
# network a bridge with no gateway and no route.
mkdir -p /etc/containerd/certs.d/_default /etc/cni/net.d /var/lib/cni
cat >/etc/containerd/certs.d/_default/hosts.toml <<'EOF'
server = "http://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
EOF
cat >/etc/cni/net.d/10-evictd-node.conflist <<EOF
{"cniVersion": "0.4.0", "name": "evictd-node", "plugins": [{"type": "bridge", "bridge": "evictd0", "isGateway": false, "ipMasq": false,
 "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "dataDir": "/var/lib/cni/ipam"}}]}
EOF
cat >"$dir/containerd.toml" <<EOF
version = 2
oom_score = -999
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "evictd.local/pause:node"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_tcp_service = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = $([ "$CGROUP_DRIVER" = systemd ] && echo true || echo false)
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
EOF

# ---- the kubelet's configuration ----------------------------------------------
# As on the v1 node (scripts/node.sh): allocatable memory set by reservation,
# the memory.available hard threshold, 10 s polling, images never collected,
# no DNS; here on the unified hierarchy with the systemd driver, in the
# standard places (/var/lib/kubelet, /var/log/pods), as a user's node has them.
mem_mi=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
reserved_mi=$((mem_mi - ALLOCATABLE_MI - THRESHOLD_MI))
[ "$reserved_mi" -gt 0 ] || { log "the guest has ${mem_mi} MiB; the node needs more than $((ALLOCATABLE_MI + THRESHOLD_MI)) MiB"; exit 1; }
mkdir -p /var/lib/kubelet
cat >/var/lib/kubelet/config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization:
  mode: Webhook
cgroupDriver: $CGROUP_DRIVER
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
staticPodPath: $dir/manifests
resolvConf: ""
# A cluster DNS address, as on the v1 node (its event recorder's spam filter
# otherwise drops the node's EvictionThresholdMet); nothing listens on it.
clusterDNS: [127.0.0.1]
clusterDomain: cluster.local
systemReserved:
  memory: ${reserved_mi}Mi
EOF
# The v1 node's shared settings (maxPods, thresholds, image GC off):
# scripts/node.sh's kubelet_node_yaml, written by the host.
cat "$run/kubelet-node.yaml" >>/var/lib/kubelet/config.yaml
cp -r "$run/kubelet.conf.d" "$dir/kubelet.conf.d"
# The kubelet's configuration where the tests (and the DaemonSet's hostPath)
# look for it.
ln -sf /var/lib/kubelet/config.yaml "$dir/kubelet.yaml"
mark configs

# ---- bring-up --------------------------------------------------------------------
systemctl start evictd-etcd evictd-containerd
wait_for etcd 120 curl -fsS --max-time 2 http://127.0.0.1:2379/health
mark etcd
systemctl start evictd-kube-apiserver
wait_for containerd 120 ctr --timeout 2s version
for img in pause work evictd; do
	ctr --timeout 120s -n k8s.io images import --platform linux/amd64 "$run/images/$img.tar" >/dev/null
done
mark containerd-images
# The waits ask the API server with curl: a kubectl under emulation costs
# about 2 s of CPU to start, which the starting API server needs more.
api() { curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" "https://127.0.0.1:6443$1"; }
wait_for kube-apiserver 600 api /readyz
mark apiserver
systemctl start evictd-kube-controller-manager evictd-kube-scheduler evictd-kubelet
node_ready() { api "/api/v1/nodes/$NODE_NAME" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; }
wait_for "node Ready" 600 node_ready
mark node-ready
wait_for "default service account" 300 api /api/v1/namespaces/default/serviceaccounts/default
wait_for kube-root-ca.crt 300 api /api/v1/namespaces/default/configmaps/kube-root-ca.crt
mark ready
# EVICTD_NODE_CGROUP: a cgroup of the node's daemons that a test may put a
# process into (containerd's unit, holding it and the shims: a leaf; the
# slice above it has children and so takes no process on cgroup v2). The
# guard here counts every process's packets anyway.
cat >"$dir/env" <<EOF
EVICTD_NODE_DIR=$dir
KUBECONFIG=$dir/admin.kubeconfig
EVICTD_NODE_NAME=$NODE_NAME
EVICTD_NODE_BIN=$bin
EVICTD_NODE_IMAGES=$run/images
EVICTD_NODE_KUBELET=https://127.0.0.1:10250
EVICTD_NODE_KUBELET_ROOT=/var/lib/kubelet
EVICTD_NODE_POD_LOGS=/var/log/pods
EVICTD_NODE_CONTAINERD=/run/containerd/containerd.sock
EVICTD_NODE_CGROUP=/sys/fs/cgroup/evictd.slice/evictd-node.slice/evictd-containerd.service
EVICTD_NODE_CGROUP_DRIVER=$CGROUP_DRIVER
EVICTD_NODE_SYSTEMD=1
EVICTD_NODE_THRESHOLD=${THRESHOLD_MI}Mi
EVICTD_NODE_ALLOCATABLE=${ALLOCATABLE_MI}Mi
EVICTD_NODE_MAX_PODS=$MAX_PODS
EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION=false
EVICTD_NODE_TIMEOUT_SCALE=$TIMEOUT_SCALE
EOF
log "node Ready: $(tr '\n' ' ' <"$times")(uptime seconds; setup started at $t0)"
