#!/usr/bin/env python3
"""Writes the scenario corpus, testdata/scenarios/*.yaml.

The scenarios re-express, with our own data, the cases of the kubelet's
pkg/kubelet/eviction/eviction_manager_test.go listed in spec section 9.1, plus
the quirks of docs/kubelet-parity.md. This script only writes INPUTS: every
expected outcome (<name>.kubelet.json) comes from running the real upstream
eviction manager on them (scripts/test-parity.sh -update).

Usage: python3 parity/corpus/gen.py   (from the repository root)
"""
import os
import sys

import yaml

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "scenarios")

KI, MI, GI = 1 << 10, 1 << 20, 1 << 30
UNITS = {"Ki": KI, "Mi": MI, "Gi": GI, "k": 1000, "M": 10**6}


def b(q):
    """Bytes (or a count) of a quantity string such as '1500Mi' or '5k'."""
    if isinstance(q, int):
        return q
    for u, m in UNITS.items():
        if q.endswith(u):
            return int(float(q[: -len(u)]) * m)
    return int(q)


def seconds(d):
    mult = {"s": 1, "m": 60, "h": 3600}
    total, num = 0, ""
    for ch in d:
        if ch.isdigit() or ch == ".":
            num += ch
        else:
            total += float(num) * mult[ch]
            num = ""
    return int(total)


def ts(at):
    s = seconds(at)
    return "2026-01-01T%02d:%02d:%02dZ" % (s // 3600, s // 60 % 60, s % 60)


# Pod priorities used throughout (our own choice of numbers).
LOW, DEFAULT, HIGH = 100, 1000, 100000
SYSTEM_CRITICAL = 2000000000


def res(cpu=None, memory=None, disk=None):
    r = {}
    if cpu:
        r["cpu"] = cpu
    if memory:
        r["memory"] = memory
    if disk:
        r["ephemeral-storage"] = disk
    return r


def container(name, requests=None, limits=None, restart=None):
    c = {"name": name, "image": "registry.example/%s:1" % name}
    r = {}
    if requests:
        r["requests"] = requests
    if limits:
        r["limits"] = limits
    if r:
        c["resources"] = r
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(name, priority=DEFAULT, requests=None, limits=None, ns="default", containers=None, init=None,
        volumes=None, annotations=None, tgps=None, pod_resources=None):
    meta = {"name": name, "namespace": ns, "uid": "uid-" + name}
    if annotations:
        meta["annotations"] = annotations
    spec = {"containers": containers or [container(name, requests, limits)]}
    if init:
        spec["initContainers"] = init
    if volumes:
        spec["volumes"] = volumes
    spec["priority"] = priority
    if tgps is not None:
        spec["terminationGracePeriodSeconds"] = tgps
    if pod_resources:
        spec["resources"] = pod_resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def emptydir(name, size=None, medium=None):
    e = {}
    if size:
        e["sizeLimit"] = size
    if medium:
        e["medium"] = medium
    return {"name": name, "emptyDir": e}


class PS:
    """Stats of one pod: memory working set, per-container disk use, volumes, processes."""

    def __init__(self, p, mem=None, rootfs=None, logs=None, rootfs_inodes=None, logs_inodes=None,
                 volumes=None, eph=None, procs=None, containers=None):
        self.p = p
        self.mem = mem
        self.c = containers  # {name: dict(mem=, rootfs=, logs=, rootfs_inodes=, logs_inodes=)}
        if self.c is None:
            self.c = {}
            for c in p["spec"]["containers"]:
                self.c[c["name"]] = dict(mem=mem, rootfs=rootfs, logs=logs, rootfs_inodes=rootfs_inodes,
                                         logs_inodes=logs_inodes)
        self.volumes = volumes or {}  # {name: (usedBytes, inodesUsed)}
        self.eph = eph
        self.procs = procs

    def json(self, at):
        m = self.p["metadata"]
        out = {"podRef": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"]},
               "startTime": "2025-12-31T23:00:00Z", "containers": []}
        for name, c in self.c.items():
            cs = {"name": name, "startTime": "2025-12-31T23:00:00Z"}
            if c.get("mem") is not None:
                cs["memory"] = {"time": ts(at), "workingSetBytes": b(c["mem"])}
            for key, used, inodes in (("rootfs", c.get("rootfs"), c.get("rootfs_inodes")),
                                      ("logs", c.get("logs"), c.get("logs_inodes"))):
                if used is None and inodes is None:
                    continue
                fs = {"time": ts(at)}
                if used is not None:
                    fs["usedBytes"] = b(used)
                if inodes is not None:
                    fs["inodesUsed"] = b(inodes)
                cs[key] = fs
            out["containers"].append(cs)
        if self.mem is not None:
            out["memory"] = {"time": ts(at), "workingSetBytes": b(self.mem)}
        if self.volumes:
            out["volume"] = []
            for name, (used, inodes) in self.volumes.items():
                v = {"time": ts(at), "name": name}
                if used is not None:
                    v["usedBytes"] = b(used)
                if inodes is not None:
                    v["inodesUsed"] = b(inodes)
                out["volume"].append(v)
        if self.eph is not None:
            out["ephemeral-storage"] = {"time": ts(at), "usedBytes": b(self.eph)}
        if self.procs is not None:
            out["process_stats"] = {"process_count": self.procs}
        return out


def fs(avail, cap, ifree=None, inodes=None, at="0s"):
    f = {"time": ts(at), "availableBytes": b(avail), "capacityBytes": b(cap), "usedBytes": b(cap) - b(avail)}
    if ifree is not None:
        f["inodesFree"] = b(ifree)
        f["inodes"] = b(inodes)
        f["inodesUsed"] = b(inodes) - b(ifree)
    return f


def summary(at, pods=(), mem=None, alloc=None, nodefs=None, imagefs=None, containerfs=None, pids=None,
            stale_at=None, raw_mem=None):
    """A /stats/summary at step time `at`.

    mem=(available, capacity) for node memory; alloc=(available, capacity) for the
    "pods" system container; nodefs/imagefs/containerfs=(avail, cap[, ifree, inodes]);
    pids=(maxpid, curproc). Stats are stamped `at` unless stale_at says otherwise.
    """
    t = stale_at or at
    node = {"nodeName": "node-1", "startTime": "2025-12-31T00:00:00Z"}
    if mem is not None:
        avail, cap = b(mem[0]), b(mem[1])
        node["memory"] = {"time": ts(t), "availableBytes": avail, "usageBytes": cap - avail + 256 * MI,
                          "workingSetBytes": cap - avail}
    if raw_mem is not None:
        node["memory"] = dict(raw_mem, time=ts(t))
    if alloc is not None:
        avail, cap = b(alloc[0]), b(alloc[1])
        node["systemContainers"] = [{"name": "pods", "startTime": "2025-12-31T00:00:00Z",
                                     "memory": {"time": ts(t), "availableBytes": avail,
                                                "usageBytes": cap - avail + 128 * MI,
                                                "workingSetBytes": cap - avail}}]
    if nodefs is not None:
        node["fs"] = fs(*nodefs, at=t)
    if imagefs is not None or containerfs is not None:
        node["runtime"] = {}
        if imagefs is not None:
            node["runtime"]["imageFs"] = fs(*imagefs, at=t)
        if containerfs is not None:
            node["runtime"]["containerFs"] = fs(*containerfs, at=t)
    if pids is not None:
        node["rlimit"] = {"time": ts(t), "maxpid": pids[0], "curproc": pids[1]}
    return {"node": node, "pods": [p.json(t) for p in pods]}


def kubelet_config(**fields):
    kc = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    kc.update(fields)
    return kc


def step(at, summ, pods=None, after=None):
    s = {"at": at, "summary": summ}
    if pods is not None:
        s["pods"] = {"apiVersion": "v1", "kind": "PodList", "items": pods}
    if after is not None:
        s["afterReclaim"] = after
    return s


SCENARIOS = []


def scenario(name, about, config, steps, filesystems=None):
    SCENARIOS.append((name, about, config, steps, filesystems))


# ---------------------------------------------------------------- memory --

def memory_pods():
    """Five pods spanning QoS classes, priorities and usage (TestMemoryPressure's shape)."""
    pods = [
        pod("guaranteed-low-priority-high-usage", LOW, res("100m", "1Gi"), res("100m", "1Gi")),
        pod("burstable-below-requests", DEFAULT, res("100m", "100Mi"), res("200m", "1Gi")),
        pod("burstable-above-requests", DEFAULT, res("100m", "100Mi"), res("200m", "1Gi")),
        pod("best-effort-high-priority-high-usage", HIGH),
        pod("best-effort-low-priority-low-usage", LOW),
    ]
    usage = ["900Mi", "50Mi", "400Mi", "400Mi", "100Mi"]
    return pods, [PS(p, mem=u) for p, u in zip(pods, usage)]


def mem_summary(at, stats, avail, alloc_avail="6Gi", cap="8Gi", alloc_cap="7Gi", **kw):
    return summary(at, stats, mem=(avail, cap), alloc=(alloc_avail, alloc_cap), **kw)


def build_memory():
    pods, st = memory_pods()
    cfg = kubelet_config(evictionHard={"memory.available": "1Gi"},
                         evictionSoft={"memory.available": "2Gi"},
                         evictionSoftGracePeriod={"memory.available": "2m"},
                         evictionMaxPodGracePeriod=5,
                         evictionPressureTransitionPeriod="5m")
    scenario("memory-pressure-soft-then-hard",
             "TestMemoryPressure: a soft threshold (2Gi, grace 2m) raises MemoryPressure at once but evicts only "
             "after its grace period, with evictionMaxPodGracePeriod; a hard threshold (1Gi) evicts at once with "
             "grace 1; the condition stays for the 5m transition period after pressure ends.",
             cfg,
             [step("0s", mem_summary("0s", st, "2Gi"), pods),
              step("1m", mem_summary("1m", st, "1500Mi")),
              step("4m", mem_summary("4m", st, "1500Mi")),
              step("24m", mem_summary("24m", st, "3Gi")),
              step("25m", mem_summary("25m", st, "500Mi")),
              step("26m", mem_summary("26m", st, "2Gi")),
              step("31m", mem_summary("31m", st, "2Gi"))])

    pods = [pod("below-requests", DEFAULT, res(memory="1Gi"), res(memory="1Gi")),
            pod("above-requests", DEFAULT, res(memory="100Mi"), res(memory="1Gi"))]
    st = [PS(pods[0], mem="900Mi"), PS(pods[1], mem="700Mi")]
    scenario("memory-pressure-verify-pod-status",
             "TestMemoryPressure_VerifyPodStatus: hard memory.available<2Gi with 1500Mi available evicts the pod "
             "above its request; the message names the threshold, the availability and the offending container.",
             kubelet_config(evictionHard={"memory.available": "2Gi"}),
             [step("0s", mem_summary("0s", st, "1500Mi"), pods)])

    pods, st = memory_pods()
    scenario("allocatable-memory-pressure",
             "TestAllocatableMemoryPressure: with enforceNodeAllocatable [pods] (the default) every hard "
             "memory.available threshold is copied to allocatableMemory.available, observed on the 'pods' system "
             "container; the node has memory to spare but the pods cgroup does not.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", mem_summary("0s", st, "4Gi", alloc_avail="3Gi"), pods),
              step("10s", mem_summary("10s", st, "4Gi", alloc_avail="800Mi")),
              step("20s", mem_summary("20s", st, "4Gi", alloc_avail="3Gi"))])

    scenario("allocatable-not-derived-without-enforcement",
             "With enforceNodeAllocatable empty no allocatableMemory.available copy exists: the same starved pods "
             "cgroup raises nothing.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}, enforceNodeAllocatable=["none"]),
             [step("0s", mem_summary("0s", st, "4Gi", alloc_avail="800Mi"), pods)])

    pods, st = memory_pods()
    scenario("min-reclaim",
             "TestMinReclaim: hard memory.available<1Gi with a 500Mi minimum reclaim; once met, the threshold stays "
             "met (and keeps evicting) until available >= 1.5Gi.",
             kubelet_config(evictionHard={"memory.available": "1Gi"},
                            evictionMinimumReclaim={"memory.available": "500Mi"}),
             [step("0s", mem_summary("0s", st, "2Gi"), pods),
              step("10s", mem_summary("10s", st, "500Mi")),
              step("20s", mem_summary("20s", st, "1.2Gi")),
              step("30s", mem_summary("30s", st, "2Gi")),
              step("40s", mem_summary("40s", st, "1.2Gi"))])

    pods, st = memory_pods()
    scenario("several-memory-thresholds-at-once",
             "Quirk (spec 3.5): hard and soft memory.available and the allocatable copy met in the same "
             "synchronize; the kubelet sorts them from a map, so any one may govern the grace period and the "
             "message's threshold and availability. The pod chosen is the same.",
             kubelet_config(evictionHard={"memory.available": "1Gi"},
                            evictionSoft={"memory.available": "2Gi"},
                            evictionSoftGracePeriod={"memory.available": "1m"},
                            evictionMaxPodGracePeriod=30),
             [step("0s", mem_summary("0s", st, "1800Mi"), pods),
              step("2m", mem_summary("2m", st, "800Mi", alloc_avail="600Mi"))])

    pods, st = memory_pods()
    scenario("soft-grace-zero-acts-as-hard",
             "Quirk: a soft threshold with grace period 0s is a hard threshold (hard means grace 0): it evicts at "
             "once, with a grace period of 1s rather than evictionMaxPodGracePeriod.",
             kubelet_config(evictionHard={"memory.available": "100Mi"},
                            evictionSoft={"memory.available": "1Gi"},
                            evictionSoftGracePeriod={"memory.available": "0s"},
                            evictionMaxPodGracePeriod=30),
             [step("0s", mem_summary("0s", st, "800Mi"), pods)])

    tg = [pod("be-short-termination", LOW, tgps=10), pod("be-long-termination", LOW, tgps=120),
          pod("be-no-termination", LOW)]
    st = [PS(tg[0], mem="300Mi"), PS(tg[1], mem="200Mi"), PS(tg[2], mem="100Mi")]
    scenario("soft-grace-uses-termination-grace-period",
             "Soft evictions use min(evictionMaxPodGracePeriod, terminationGracePeriodSeconds); a pod without "
             "terminationGracePeriodSeconds gets evictionMaxPodGracePeriod.",
             kubelet_config(evictionHard={"memory.available": "100Mi"},
                            evictionSoft={"memory.available": "1Gi"},
                            evictionSoftGracePeriod={"memory.available": "30s"},
                            evictionMaxPodGracePeriod=60),
             [step("0s", mem_summary("0s", st, "800Mi"), tg),
              step("40s", mem_summary("40s", st, "800Mi")),
              step("50s", mem_summary("50s", st, "800Mi")),
              step("60s", mem_summary("60s", st, "800Mi"))])

    scenario("soft-grace-max-pod-grace-zero",
             "evictionMaxPodGracePeriod defaults to 0, so soft evictions override the pod's grace period with 0.",
             kubelet_config(evictionHard={"memory.available": "100Mi"},
                            evictionSoft={"memory.available": "1Gi"},
                            evictionSoftGracePeriod={"memory.available": "30s"}),
             [step("0s", mem_summary("0s", st, "800Mi"), tg),
              step("40s", mem_summary("40s", st, "800Mi"))])

    pods, st = memory_pods()
    scenario("soft-threshold-grace-restarts",
             "A soft threshold that stops being met before its grace period elapses forgets its first-observed "
             "time: the grace period starts again when it is met again.",
             kubelet_config(evictionHard={"memory.available": "100Mi"},
                            evictionSoft={"memory.available": "2Gi"},
                            evictionSoftGracePeriod={"memory.available": "1m"},
                            evictionMaxPodGracePeriod=10),
             [step("0s", mem_summary("0s", st, "1500Mi"), pods),
              step("50s", mem_summary("50s", st, "3Gi")),
              step("1m10s", mem_summary("1m10s", st, "1500Mi")),
              step("2m", mem_summary("2m", st, "1500Mi")),
              step("2m20s", mem_summary("2m20s", st, "1500Mi"))])

    pods, st = memory_pods()
    scenario("transition-period-zero-means-default",
             "Quirk: evictionPressureTransitionPeriod: 0s is the zero value, which the kubelet's defaulting "
             "replaces with 5m; MemoryPressure stays for 5 minutes after the last pressure.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}, evictionPressureTransitionPeriod="0s"),
             [step("0s", mem_summary("0s", st, "500Mi"), pods),
              step("10s", mem_summary("10s", st, "3Gi")),
              step("5m", mem_summary("5m", st, "3Gi")),
              step("5m10s", mem_summary("5m10s", st, "3Gi"))])

    pods, st = memory_pods()
    scenario("transition-period-short",
             "evictionPressureTransitionPeriod 30s: the condition is reported while the last pressure is less "
             "than 30s old, and cleared at exactly 30s.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}, evictionPressureTransitionPeriod="30s"),
             [step("0s", mem_summary("0s", st, "500Mi"), pods),
              step("10s", mem_summary("10s", st, "3Gi")),
              step("29s", mem_summary("29s", st, "3Gi")),
              step("30s", mem_summary("30s", st, "3Gi"))])

    pods, st = memory_pods()
    huge = (1 << 64) - 512 * MI  # limit - workingSet computed in uint64 with workingSet 512Mi above the limit
    scenario("memory-available-unsigned-underflow",
             "Quirk (issue #52386): when the working set exceeds the limit, availableBytes wraps around in uint64 "
             "and the kubelet reads it as a negative int64 (-512Mi): the threshold is met and the message shows a "
             "negative availability.",
             kubelet_config(evictionHard={"memory.available": "10%"}),
             [step("0s", summary("0s", st, raw_mem={"availableBytes": huge, "usageBytes": 8 * GI + 768 * MI,
                                                    "workingSetBytes": 8 * GI + 512 * MI},
                                 alloc=("6Gi", "7Gi")), pods)])

    ties = [pod("tie-a", LOW), pod("tie-b", LOW), pod("tie-c", LOW), pod("bigger", HIGH)]
    st = [PS(ties[0], mem="200Mi"), PS(ties[1], mem="200Mi"), PS(ties[2], mem="200Mi"), PS(ties[3], mem="1Gi")]
    scenario("memory-ranking-ties",
             "Ties: three BestEffort pods with equal priority and usage; the kubelet's sort keeps their input "
             "order for short lists, so the first listed is evicted first, one per synchronize.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", mem_summary("0s", st, "500Mi"), ties),
              step("10s", mem_summary("10s", st, "500Mi")),
              step("20s", mem_summary("20s", st, "500Mi"))])

    many = [pod("tie-%02d" % i, LOW) for i in range(20)]
    mst = [PS(p, mem="%dMi" % (100 * ((i * 7) % 3 + 1))) for i, p in enumerate(many)]
    scenario("memory-ranking-ties-many-pods",
             "Ties among more than 12 pods (three usage groups): the kubelet's sort.Sort is pattern-defeating "
             "quicksort there, not insertion sort, so equal pods need not come out in input order; the order is "
             "deterministic for a given input, and evictd must reproduce it.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("%ds" % (10 * i), mem_summary("%ds" % (10 * i), mst, "500Mi"), many if i == 0 else None)
              for i in range(10)])

    ns = [pod("with-stats-high-usage", LOW), pod("no-stats", HIGH, res(memory="1Gi"), res(memory="1Gi")),
          pod("with-stats-low-usage", LOW)]
    st = [PS(ns[0], mem="2Gi"), PS(ns[2], mem="10Mi")]
    scenario("pods-without-stats",
             "A pod without stats ranks before every pod with stats, whatever its priority and requests; its "
             "message has no container part.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", mem_summary("0s", st, "500Mi"), ns),
              step("10s", mem_summary("10s", st, "500Mi"))])

    pods, st = memory_pods()
    scenario("stale-stats-not-acted-on-twice",
             "The kubelet acts on a threshold only when its observation is newer than the previous one: a second "
             "synchronize that sees the same stats timestamp keeps the condition but evicts nothing.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", mem_summary("0s", st, "500Mi"), pods),
              step("10s", mem_summary("10s", st, "500Mi", stale_at="0s")),
              step("20s", mem_summary("20s", st, "500Mi"))])

    pl = [pod("pod-level", LOW, containers=[container("app"), container("helper")],
              pod_resources={"requests": {"memory": "200Mi"}, "limits": {"memory": "2Gi"}}),
          pod("other", HIGH)]
    st = [PS(pl[0], mem="900Mi", containers={"app": dict(mem="600Mi"), "helper": dict(mem="300Mi")}),
          PS(pl[1], mem="100Mi")]
    scenario("memory-pod-level-resources-message",
             "With PodLevelResources (beta, on) and pod-level requests, the memory eviction message gains a "
             "'Pod <name> was using …' part; containers without requests are listed as above request 0.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", mem_summary("0s", st, "500Mi"), pl)])

    order = [pod("guaranteed-innocent", HIGH, res("100m", "1Gi"), res("100m", "1Gi")),
             pod("high-priority-hog", HIGH, res(memory="100Mi")),
             pod("best-effort-hog", LOW),
             pod("burstable-modest", DEFAULT, res(memory="500Mi"), res(memory="1Gi"))]
    ost = [PS(order[0], mem="800Mi"), PS(order[1], mem="2Gi"), PS(order[2], mem="1500Mi"),
           PS(order[3], mem="600Mi")]
    scenario("priority-memory-eviction-ordering",
             "e2e PriorityMemoryEvictionOrdering: while memory stays low the kubelet evicts one pod per "
             "synchronize: pods above their requests first (lowest priority first), then by usage above request; "
             "the Guaranteed pod within its request goes last.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("%ds" % (10 * i), mem_summary("%ds" % (10 * i), ost, "500Mi"), order if i == 0 else None)
              for i in range(5)])

    crit = [pod("static-critical", SYSTEM_CRITICAL, ns="kube-system",
                annotations={"kubernetes.io/config.source": "file"}),
            pod("mirror", DEFAULT, ns="kube-system",
                annotations={"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.source": "api"}),
            pod("system-critical-priority", SYSTEM_CRITICAL, ns="kube-system")]
    regular = pod("regular", HIGH, res(memory="1Gi"), res(memory="1Gi"))
    st = [PS(crit[0], mem="1500Mi"), PS(crit[1], mem="1Gi"), PS(crit[2], mem="900Mi"), PS(regular, mem="100Mi")]
    scenario("static-critical-pods-not-evicted",
             "TestStaticCriticalPodsAreNotEvicted: static, mirror and system-critical-priority pods are never "
             "evicted even when they rank first; when only they exist nothing is evicted, and once a regular pod "
             "appears it is evicted instead.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", mem_summary("0s", st[:3], "500Mi"), crit),
              step("10s", mem_summary("10s", st, "500Mi"), crit + [regular])])


# ------------------------------------------------------------------- pid --

def build_pid():
    pods = [pod("below-requests"), pod("above-requests")]
    st = [PS(pods[0], procs=50), PS(pods[1], procs=400)]
    scenario("pid-pressure-verify-pod-status",
             "TestPIDPressure_VerifyPodStatus: pid.available<1200 with maxpid 1500 and 1000 processes (500 "
             "available); the message has no container part for pids.",
             kubelet_config(evictionHard={"pid.available": "1200"}),
             [step("0s", summary("0s", st, pids=(1500, 1000)), pods)])

    pods = [pod("high-priority-high-usage", HIGH), pod("default-priority-low-usage", DEFAULT),
            pod("default-priority-medium-usage", DEFAULT), pod("low-priority-high-usage", LOW),
            pod("low-priority-low-usage", LOW)]
    procs = [900, 100, 400, 600, 50]
    st = [PS(p, procs=n) for p, n in zip(pods, procs)]
    cfg = kubelet_config(evictionHard={"pid.available": "1200"}, evictionSoft={"pid.available": "1500"},
                         evictionSoftGracePeriod={"pid.available": "2m"}, evictionMaxPodGracePeriod=5)
    scenario("pid-pressure-soft-then-hard",
             "TestPIDPressure: PID ranking is priority, then process count; soft threshold then hard threshold, "
             "PIDPressure persisting for the transition period.",
             cfg,
             [step("0s", summary("0s", st, pids=(4000, 2000)), pods),
              step("1m", summary("1m", st, pids=(4000, 2800))),
              step("4m", summary("4m", st, pids=(4000, 2800))),
              step("24m", summary("24m", st, pids=(4000, 2000))),
              step("25m", summary("25m", st, pids=(4000, 3500))),
              step("26m", summary("26m", st, pids=(4000, 2000))),
              step("31m", summary("31m", st, pids=(4000, 2000)))])

    scenario("pid-available-negative",
             "pid.available is maxpid - curproc in int64 and may be negative (more tasks than pid_max).",
             kubelet_config(evictionHard={"pid.available": "10%"}),
             [step("0s", summary("0s", st, pids=(1000, 1200)), pods)])


# ------------------------------------------------------------------ disk --

LAYOUTS = {
    "no-imagefs": dict(dedicatedImageFs=False, splitContainerFs=False),
    "imagefs": dict(dedicatedImageFs=True, splitContainerFs=False),
    "split": dict(dedicatedImageFs=True, splitContainerFs=True),
}


def disk_summary(at, stats, layout, node="16Gi", image="16Gi", cfs=None, cap="32Gi",
                 node_inodes=None, image_inodes=None, cfs_inodes=None, inode_cap="1M"):
    """Per layout, what cadvisor reports: one filesystem (node = image = container), a dedicated image
    filesystem shared by images and writable layers, or split (writable layers on the node filesystem)."""
    def f(avail, ifree):
        t = (avail, cap)
        if ifree is not None:
            t += (ifree, inode_cap)
        return t
    if layout == "no-imagefs":
        n = f(node, node_inodes)
        return summary(at, stats, mem=("6Gi", "8Gi"), alloc=("5Gi", "7Gi"), nodefs=n, imagefs=n, containerfs=n)
    if layout == "imagefs":
        i = f(image, image_inodes)
        return summary(at, stats, mem=("6Gi", "8Gi"), alloc=("5Gi", "7Gi"), nodefs=f(node, node_inodes),
                       imagefs=i, containerfs=i)
    n = f(node, node_inodes)
    c = f(cfs or node, cfs_inodes if cfs_inodes is not None else node_inodes)
    return summary(at, stats, mem=("6Gi", "8Gi"), alloc=("5Gi", "7Gi"), nodefs=n,
                   imagefs=f(image, image_inodes), containerfs=c)


def disk_pods():
    local = [emptydir("scratch")]
    pods = [
        pod("low-priority-high-usage", LOW, res("100m", "1Gi"), res("100m", "1Gi")),
        pod("below-requests", DEFAULT, res("100m", "100Mi", "1Gi"), res("200m", "1Gi")),
        pod("above-requests", DEFAULT, res("100m", "100Mi", "100Mi"), res("200m", "1Gi")),
        pod("high-priority-high-usage", HIGH, volumes=local),
        pod("low-priority-low-usage", LOW),
    ]
    st = [PS(pods[0], rootfs="900Mi", logs="20Mi", rootfs_inodes="9k", logs_inodes="100"),
          PS(pods[1], rootfs="10Mi", logs="50Mi", rootfs_inodes="100", logs_inodes="500"),
          PS(pods[2], rootfs="400Mi", logs="10Mi", rootfs_inodes="4k", logs_inodes="100"),
          PS(pods[3], rootfs="1Mi", logs="1Mi", rootfs_inodes="10", logs_inodes="10",
             volumes={"scratch": ("400Mi", "8k")}),
          PS(pods[4], rootfs="100Mi", logs="1Mi", rootfs_inodes="1k", logs_inodes="10")]
    return pods, st


def build_disk():
    for layout, signal, where in (("no-imagefs", "nodefs", "node"), ("imagefs", "imagefs", "image"),
                                  ("split", "nodefs", "node"), ("split", "imagefs", "image"),
                                  ("imagefs", "nodefs", "node")):
        pods, st = disk_pods()

        def s(at, avail):
            return disk_summary(at, st, layout, **{where: avail})
        name = "disk-pressure-%s-%s" % (signal, layout)
        scenario(name,
                 "TestDiskPressureNodeFs (%s layout, %s.available): soft 2Gi/2m then hard 1Gi; disk ranking is "
                 "exceeds-ephemeral-request, priority, usage minus request over the filesystems this signal "
                 "measures in this layout; node-level reclaim (which frees nothing here) runs first where the "
                 "layout has reclaim functions for the signal." % (layout, signal),
                 kubelet_config(evictionHard={signal + ".available": "1Gi"},
                                evictionSoft={signal + ".available": "2Gi"},
                                evictionSoftGracePeriod={signal + ".available": "2m"},
                                evictionMaxPodGracePeriod=5),
                 [step("0s", s("0s", "16Gi"), pods),
                  step("1m", s("1m", "1.5Gi")),
                  step("4m", s("4m", "1.5Gi")),
                  step("24m", s("24m", "16Gi")),
                  step("25m", s("25m", "750Mi")),
                  step("26m", s("26m", "16Gi")),
                  step("31m", s("31m", "16Gi"))],
                 filesystems=LAYOUTS[layout])

    pods = [pod("below-requests", DEFAULT, res(disk="1Gi")), pod("above-requests", DEFAULT, res(disk="100Mi"))]
    st = [PS(pods[0], rootfs="100Mi", logs="100Mi"), PS(pods[1], rootfs="600Mi", logs="100Mi")]
    for layout in ("no-imagefs", "imagefs", "split"):
        scenario("disk-pressure-verify-pod-status-%s" % layout,
                 "TestDiskPressureNodeFs_VerifyPodStatus (%s layout): hard nodefs.available<2Gi with 1.5Gi "
                 "available; the message names the container above its ephemeral-storage request "
                 "(rootfs + logs)." % layout,
                 kubelet_config(evictionHard={"nodefs.available": "2Gi"}),
                 [step("0s", disk_summary("0s", st, layout, node="1.5Gi"), pods)],
                 filesystems=LAYOUTS[layout])

    scenario("split-filesystem-with-separate-disk-gc-off",
             "Quirk: a split filesystem with the KubeletSeparateDiskGC gate off makes the first synchronize fail; "
             "the layout is remembered anyway, so no ranking functions are ever built and nothing is ever evicted.",
             kubelet_config(featureGates={"KubeletSeparateDiskGC": False},
                            evictionHard={"nodefs.available": "2Gi"}),
             [step("0s", disk_summary("0s", st, "split", node="1.5Gi"), pods),
              step("10s", disk_summary("10s", st, "split", node="1.5Gi"))],
             filesystems=LAYOUTS["split"])

    # Node-level reclaim.
    for layout, signal, where in (("no-imagefs", "nodefs", "node"), ("imagefs", "imagefs", "image"),
                                  ("split", "nodefs", "node"), ("split", "imagefs", "image")):
        pods, st = disk_pods()

        def s(at, avail):
            return disk_summary(at, st, layout, **{where: avail})
        scenario("node-reclaim-%s-%s" % (signal, layout),
                 "TestNodeReclaimFuncs (%s layout, %s.available<1Gi, min reclaim 500Mi): the layout's reclaim "
                 "functions run before any eviction; when they bring availability to threshold + min reclaim no "
                 "pod is evicted, when they free too little a pod is evicted." % (layout, signal),
                 kubelet_config(evictionHard={signal + ".available": "1Gi"},
                                evictionMinimumReclaim={signal + ".available": "500Mi"}),
                 [step("0s", s("0s", "16Gi"), pods),
                  step("10s", s("10s", "750Mi"), after=s("10s", "2Gi")),
                  step("20s", s("20s", "16Gi")),
                  step("30s", s("30s", "750Mi"), after=s("30s", "1.2Gi")),
                  step("40s", s("40s", "900Mi"))],
                 filesystems=LAYOUTS[layout])

    # Inodes.
    for layout, signal, where in (("no-imagefs", "nodefs", "node_inodes"), ("imagefs", "imagefs", "image_inodes"),
                                  ("split", "nodefs", "node_inodes"), ("imagefs", "nodefs", "node_inodes")):
        pods, st = disk_pods()

        def s(at, ifree):
            kw = {"node_inodes": "900k", "image_inodes": "900k"}
            kw[where] = ifree
            return disk_summary(at, st, layout, **kw)
        scenario("inode-pressure-%s-%s" % (signal, layout),
                 "TestInodePressureFsInodes (%s layout, %s.inodesFree): soft 400k/2m then hard 200k out of 1M "
                 "inodes; ranking by inodes used (the ephemeral-storage request is still subtracted); messages "
                 "have no container part." % (layout, signal),
                 kubelet_config(evictionHard={signal + ".inodesFree": "200k"},
                                evictionSoft={signal + ".inodesFree": "400k"},
                                evictionSoftGracePeriod={signal + ".inodesFree": "2m"},
                                evictionMaxPodGracePeriod=5),
                 [step("0s", s("0s", "900k"), pods),
                  step("1m", s("1m", "300k")),
                  step("4m", s("4m", "300k")),
                  step("24m", s("24m", "900k")),
                  step("25m", s("25m", "100k")),
                  step("31m", s("31m", "900k"))],
                 filesystems=LAYOUTS[layout])

    # Which volumes count as the pod's local disk usage.
    vols = [("hostpath", {"name": "data", "hostPath": {"path": "/srv/data"}}, "700Mi", "1Mi"),
            ("emptydir", {"name": "data", "emptyDir": {}}, "600Mi", "1Mi"),
            ("configmap", {"name": "data", "configMap": {"name": "settings"}}, "500Mi", "1Mi"),
            ("secret", {"name": "data", "secret": {"secretName": "creds"}}, "900Mi", "5Mi"),
            ("downwardapi", {"name": "data", "downwardAPI": {"items": []}}, "800Mi", "4Mi"),
            ("memory-emptydir", {"name": "data", "emptyDir": {"medium": "Memory"}}, "1000Mi", "3Mi"),
            ("pvc", {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}}, "1100Mi", "2Mi")]
    vp, vst = [], []
    for kind, vol, used, root in vols:
        p = pod("volume-" + kind, DEFAULT, volumes=[vol])
        vp.append(p)
        vst.append(PS(p, rootfs=root, logs="1Mi", volumes={"data": (used, "100")}))
    scenario("disk-ranking-local-volumes",
             "Disk ranking on nodefs counts hostPath volumes and the local ephemeral ones (emptyDir on disk, "
             "configMap, gitRepo) but not secret, downwardAPI, memory-backed emptyDir or PVC volumes, whatever "
             "their stats say: one pod per synchronize while the pressure lasts shows the order.",
             kubelet_config(evictionHard={"nodefs.available": "1Gi"}),
             [step("%ds" % (10 * i), disk_summary("%ds" % (10 * i), vst, "no-imagefs", node="500Mi"),
                   vp if i == 0 else None) for i in range(7)])

    ip = [pod("many-inodes-with-storage-request", DEFAULT, res(disk="1Gi")),
          pod("few-inodes-no-request", DEFAULT)]
    ist = [PS(ip[0], rootfs="10Mi", logs="1Mi", rootfs_inodes="50k", logs_inodes="10"),
           PS(ip[1], rootfs="10Mi", logs="1Mi", rootfs_inodes="5k", logs_inodes="10")]
    scenario("inode-ranking-subtracts-storage-request",
             "Quirk: ranking for inodes subtracts the pod's ephemeral-storage request (bytes) from its inode "
             "count, so a pod with a storage request ranks after a pod using ten times fewer inodes.",
             kubelet_config(evictionHard={"nodefs.inodesFree": "100k"}),
             [step("0s", disk_summary("0s", ist, "no-imagefs", node_inodes="50k"), ip)])

    both = disk_pods()
    mboth = memory_pods()
    bp = both[0] + mboth[0]
    bst = [PS(p, rootfs=s.c[p["metadata"]["name"]]["rootfs"], logs=s.c[p["metadata"]["name"]]["logs"], mem="10Mi")
           for p, s in zip(both[0], both[1])] + mboth[1]
    scenario("memory-and-disk-pressure-memory-first",
             "Memory and disk thresholds met together: memory thresholds always sort first (byEvictionPriority), "
             "so the memory ranking decides and no node-level reclaim runs; both conditions are reported.",
             kubelet_config(evictionHard={"memory.available": "1Gi", "nodefs.available": "2Gi"}),
             [step("0s", summary("0s", bst, mem=("500Mi", "8Gi"), alloc=("5Gi", "7Gi"), nodefs=("1Gi", "32Gi"),
                                 imagefs=("1Gi", "32Gi"), containerfs=("1Gi", "32Gi")), bp)])

    pods, st = disk_pods()
    scenario("disk-percentage-threshold",
             "Percentages resolve against capacity and truncate: nodefs.available<10.5% of 32Gi.",
             kubelet_config(evictionHard={"nodefs.available": "10.5%"}),
             [step("0s", disk_summary("0s", st, "no-imagefs", node="3.4Gi"), pods),
              step("10s", disk_summary("10s", st, "no-imagefs", node="3.3Gi"))])

    scenario("containerfs-threshold-overridden",
             "User containerfs.* thresholds are overwritten from nodefs (split layout) and the conflict is only "
             "logged: containerfs.available<10Gi has no effect, the nodefs value (1Gi) is used.",
             kubelet_config(evictionHard={"nodefs.available": "1Gi", "containerfs.available": "10Gi"}),
             [step("0s", disk_summary("0s", st, "split", node="5Gi"), pods),
              step("10s", disk_summary("10s", st, "split", node="900Mi"))],
             filesystems=LAYOUTS["split"])

    mixed = pods + [pod("fork-bomb", LOW)]
    mst = st + [PS(mixed[-1], procs=3000)]
    scenario("disk-and-pid-pressure-at-once",
             "Quirk (spec 3.5): a disk and a PID threshold met together; the kubelet picks the one to act on from "
             "a map, so the reclaimed resource, the node-level reclaim and the evicted pod vary between runs.",
             kubelet_config(evictionHard={"nodefs.available": "1Gi", "pid.available": "1000"}),
             [step("0s", summary("0s", mst, mem=("6Gi", "8Gi"), alloc=("5Gi", "7Gi"), nodefs=("500Mi", "32Gi"),
                                 imagefs=("500Mi", "32Gi"), containerfs=("500Mi", "32Gi"), pids=(4000, 3500)),
                    mixed)])


# ----------------------------------------------------- config and quirks --

def build_config_quirks():
    pods, st = disk_pods()
    mpods, mst = memory_pods()
    allp = pods + mpods
    allst = [PS(p, rootfs=s.c[p["metadata"]["name"]]["rootfs"], logs=s.c[p["metadata"]["name"]]["logs"],
                mem="50Mi") for p, s in zip(pods, st)] + mst

    def low(at):
        return summary(at, allst, mem=("90Mi", "8Gi"), alloc=("90Mi", "7Gi"),
                       nodefs=("1Gi", "32Gi", "1000", "1M"), imagefs=("1Gi", "32Gi", "1000", "1M"),
                       containerfs=("1Gi", "32Gi", "1000", "1M"))
    scenario("defaults-when-eviction-hard-absent",
             "No evictionHard: the kubelet uses its Linux defaults (memory.available<100Mi, nodefs.available<10%, "
             "nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%).",
             kubelet_config(),
             [step("0s", low("0s"), allp)])
    scenario("eviction-hard-empty-map",
             "Quirk: evictionHard: {} in the config file decodes to an empty, non-nil map, so loadConfigFile does "
             "not apply the defaults and no hard threshold exists at all (not 'absent' as spec 2.3 says).",
             kubelet_config(evictionHard={}),
             [step("0s", low("0s"), allp)])
    scenario("partial-eviction-hard-drops-defaults",
             "Quirk: an evictionHard that sets one signal replaces all the defaults; nodefs at 3% free raises "
             "nothing because no disk threshold exists any more.",
             kubelet_config(evictionHard={"memory.available": "50Mi"}),
             [step("0s", low("0s"), allp)])
    scenario("merge-default-eviction-settings",
             "mergeDefaultEvictionSettings: true adds the defaults the user left out (user values win), so the "
             "same partial evictionHard keeps the disk defaults.",
             kubelet_config(evictionHard={"memory.available": "50Mi"}, mergeDefaultEvictionSettings=True),
             [step("0s", low("0s"), allp)])
    scenario("disable-signal-zero-percent",
             "Quirk: '0%' silently drops the threshold; evictionHard {memory.available: 0%} disables every hard "
             "threshold (the other defaults are gone too).",
             kubelet_config(evictionHard={"memory.available": "0%"}),
             [step("0s", low("0s"), allp)])
    scenario("disable-signal-hundred-percent",
             "Quirk: '100%' silently drops the threshold as well; here the disk thresholds are disabled while "
             "memory and inodes keep theirs.",
             kubelet_config(evictionHard={"memory.available": "50Mi", "nodefs.available": "100%",
                                          "imagefs.available": "100%", "nodefs.inodesFree": "5%"}),
             [step("0s", low("0s"), allp)])
    scenario("zero-point-zero-percent-not-dropped",
             "Quirk: '0.0%' is not '0%': it parses to a percentage of 0, which is kept and can only be met when "
             "availability is negative.",
             kubelet_config(evictionHard={"memory.available": "0.0%"}),
             [step("0s", low("0s"), allp),
              step("10s", summary("10s", allst, raw_mem={"availableBytes": (1 << 64) - MI,
                                                         "workingSetBytes": 8 * GI + MI}, alloc=("1Gi", "7Gi")))])


# -------------------------------------------------- local storage limits --

def build_storage_limits():
    def nodefs_ok(at, stats, layout="no-imagefs"):
        return disk_summary(at, stats, layout)

    cfg = kubelet_config(evictionHard={"memory.available": "100Mi", "nodefs.available": "1Gi"})
    p = pod("emptydir-over-limit", HIGH, volumes=[emptydir("cache", "100Mi")])
    q = pod("emptydir-under-limit", LOW, volumes=[emptydir("cache", "1Gi")])
    st = [PS(p, rootfs="1Mi", logs="1Mi", volumes={"cache": ("200Mi", "10")}),
          PS(q, rootfs="1Mi", logs="1Mi", volumes={"cache": ("200Mi", "10")})]
    scenario("storage-limit-emptydir",
             "TestStorageLimitEvictions (emptyDir): usage above an emptyDir sizeLimit evicts the pod with grace 1 "
             "and no node pressure; a pod under its sizeLimit stays.",
             cfg, [step("0s", nodefs_ok("0s", st), [p, q])])

    p = pod("memory-emptydir-over-limit", HIGH, volumes=[emptydir("shm", "64Mi", "Memory")])
    st = [PS(p, rootfs="1Mi", logs="1Mi", volumes={"shm": ("128Mi", "10")})]
    scenario("storage-limit-memory-emptydir",
             "A memory-backed emptyDir above its sizeLimit is evicted too (the exemption needs the alpha gate "
             "InPlacePodVerticalScalingMemoryBackedVolumes, off by default).",
             cfg, [step("0s", nodefs_ok("0s", st), [p])])

    scenario("storage-limit-memory-emptydir-gate-on",
             "TestEmptyDirLimitEviction: with the alpha gate InPlacePodVerticalScalingMemoryBackedVolumes on, a "
             "memory-backed emptyDir is left to the kernel's tmpfs limit and never evicted for its sizeLimit.",
             kubelet_config(evictionHard={"memory.available": "100Mi", "nodefs.available": "1Gi"},
                            featureGates={"InPlacePodVerticalScalingMemoryBackedVolumes": True}),
             [step("0s", nodefs_ok("0s", st), [p])])

    p = pod("container-rootfs-over-limit", HIGH, res(disk="50Mi"), res(disk="100Mi"))
    q = pod("container-logs-over-limit", HIGH, res(disk="50Mi"), res(disk="100Mi"))
    r = pod("container-under-limit", HIGH, res(disk="50Mi"), res(disk="1Gi"))
    st = [PS(p, rootfs="150Mi", logs="1Mi"), PS(q, rootfs="1Mi", logs="150Mi"), PS(r, rootfs="150Mi", logs="1Mi")]
    scenario("storage-limit-container",
             "TestStorageLimitEvictions (rootfs, logs): a container whose writable layer plus logs exceed its "
             "ephemeral-storage limit gets its pod evicted; every such pod in one synchronize.",
             cfg, [step("0s", nodefs_ok("0s", st), [p, q, r])])
    scenario("storage-limit-container-imagefs",
             "With a dedicated imagefs the writable layer is not counted against the container limit (it is not on "
             "the node filesystem); only logs are: the rootfs-heavy pod stays.",
             cfg, [step("0s", nodefs_ok("0s", st, "imagefs"), [p, q, r])],
             filesystems=LAYOUTS["imagefs"])

    p = pod("pod-total-over-limit", HIGH, containers=[container("a", res(disk="50Mi"), res(disk="100Mi")),
                                                    container("b", res(disk="50Mi"), res(disk="100Mi"))])
    st = [PS(p, eph="250Mi", containers={"a": dict(rootfs="90Mi", logs="1Mi"), "b": dict(rootfs="90Mi", logs="1Mi")})]
    scenario("storage-limit-pod",
             "The pod's ephemeral-storage usage (stats ephemeral-storage, including volumes) above the sum of its "
             "containers' limits evicts it even when each container is under its own limit.",
             cfg, [step("0s", nodefs_ok("0s", st), [p])])

    p = pod("sidecar-over-limit", HIGH, containers=[container("app", res(disk="10Mi"), res(disk="1Gi"))],
            init=[container("sidecar", res(disk="5Mi"), res(disk="10Mi"), restart="Always")])
    q = pod("init-over-limit", HIGH, containers=[container("app", res(disk="10Mi"), res(disk="1Gi"))],
            init=[container("setup", res(disk="5Mi"), res(disk="10Mi"))])
    st = [PS(p, containers={"app": dict(rootfs="1Mi", logs="1Mi"), "sidecar": dict(rootfs="45Mi", logs="5Mi")}),
          PS(q, containers={"app": dict(rootfs="1Mi", logs="1Mi"), "setup": dict(rootfs="45Mi", logs="5Mi")})]
    scenario("storage-limit-sidecar",
             "TestContainerEphemeralStorageLimitEvictionForRestartableInitContainers: a sidecar (restartable init "
             "container) using 50Mi against a 10Mi limit evicts its pod; a plain init container's limit is not "
             "enforced this way.",
             cfg, [step("0s", nodefs_ok("0s", st), [p, q])])

    pods = [pod("empty-dir", HIGH, res(memory="100Mi"), volumes=[emptydir("local-volume", "100Mi")]),
            pod("container-ephemeral-storage-limit", HIGH, res(memory="100Mi"), res(disk="100Mi")),
            pod("pod-ephemeral-storage-limit", HIGH, containers=[
                container("main", res(memory="100Mi"), res(disk="100Mi")),
                container("second", res(memory="100Mi"), res(disk="100Mi"))]),
            pod("innocent", LOW, volumes=[emptydir("local-volume", "1Gi")])]
    st = [PS(pods[0], mem="50Mi", rootfs="1Mi", logs="1Mi", volumes={"local-volume": ("200Mi", "5")}),
          PS(pods[1], mem="50Mi", rootfs="150Mi", logs="1Mi"),
          PS(pods[2], eph="300Mi", containers={"main": dict(rootfs="90Mi", logs="1Mi"),
                                              "second": dict(rootfs="90Mi", logs="1Mi")}),
          PS(pods[3], mem="500Mi", rootfs="1Mi", logs="1Mi", volumes={"local-volume": ("200Mi", "5")})]
    scenario("local-storage-capacity-isolation-multi-pod",
             "TestManagerWithLocalStorageCapacityIsolationOpen: emptyDir, container and pod limit violations evict "
             "all three pods in one synchronize, even while memory pressure is also met (limit evictions come "
             "first and end the cycle).",
             kubelet_config(evictionHard={"memory.available": "1Gi"}),
             [step("0s", summary("0s", st, mem=("500Mi", "8Gi"), alloc=("5Gi", "7Gi"),
                                 nodefs=("16Gi", "32Gi"), imagefs=("16Gi", "32Gi"),
                                 containerfs=("16Gi", "32Gi")), pods),
              step("10s", summary("10s", st, mem=("500Mi", "8Gi"), alloc=("5Gi", "7Gi"),
                                  nodefs=("16Gi", "32Gi"), imagefs=("16Gi", "32Gi"),
                                  containerfs=("16Gi", "32Gi")))])
    scenario("local-storage-capacity-isolation-off",
             "localStorageCapacityIsolation: false turns the limit evictions off; only threshold evictions remain.",
             kubelet_config(evictionHard={"memory.available": "1Gi"}, localStorageCapacityIsolation=False),
             [step("0s", summary("0s", st, mem=("500Mi", "8Gi"), alloc=("5Gi", "7Gi"),
                                 nodefs=("16Gi", "32Gi"), imagefs=("16Gi", "32Gi"),
                                 containerfs=("16Gi", "32Gi")), pods)])


class Dumper(yaml.SafeDumper):
    pass


def _str(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


Dumper.add_representer(str, _str)


def main():
    build_memory()
    build_pid()
    build_disk()
    build_config_quirks()
    build_storage_limits()
    names = set()
    for name, about, config, steps, filesystems in SCENARIOS:
        assert name not in names, name
        names.add(name)
        doc = {"kubeletConfig": config}
        if filesystems:
            doc["filesystems"] = filesystems
        doc["steps"] = steps
        text = yaml.dump(doc, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=120)
        head = "# " + name + "\n#\n"
        words, line = about.split(), "#"
        for w in words:
            if len(line) + 1 + len(w) > 100:
                head += line + "\n"
                line = "#"
            line += " " + w
        head += line + "\n#\n# Written by parity/corpus/gen.py. The expected outcomes, " + name + \
            ".kubelet.json,\n# come from the upstream kubelet: scripts/test-parity.sh -update.\n"
        with open(os.path.join(OUT, name + ".yaml"), "w") as f:
            f.write(head + text)
    print("%d scenarios written to %s" % (len(SCENARIOS), os.path.normpath(OUT)), file=sys.stderr)


if __name__ == "__main__":
    main()
