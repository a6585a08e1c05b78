package memqos

import v1 "k8s.io/api/core/v1"

// CgroupFiles are the memory files evictd keeps on one host-mode cgroup. A
// NotWritten value is a file evictd leaves alone; every other value is
// written (and kept) as given.
type CgroupFiles struct {
	MemoryMin, MemoryLow, MemoryHigh Value
}

// HostWorkload gives the values evictd keeps on a host-mode workload cgroup,
// which is the pod's cgroup and its one container's at once, and the
// oom_score_adj of its processes. They are the kubelet's container values
// (ForPod), with one difference: where the kubelet leaves a file alone
// because a pod's QoS class and limits never change, evictd writes the
// cgroup's default (memory.min/low 0, memory.high max), because a workload's
// entry in the workloads file can change and must not leave a stale
// protection or throttle behind. On a fresh cgroup the defaults are already
// there, so the result equals the kubelet's.
//
// pod must have one container (workload.Discover builds them so).
func HostWorkload(pod *v1.Pod, s Settings) (CgroupFiles, int) {
	p := ForPod(pod, s)
	if len(p.Containers) == 0 {
		return CgroupFiles{}, besteffortOOMScoreAdj
	}
	c := p.Containers[0]
	var f CgroupFiles
	switch {
	case !s.CgroupV2:
		// cgroup v1: MemoryQoS has no files there; oom_score_adj only.
	case !s.MemoryQoS:
		// The kubelet resets memory.high to max and touches nothing else.
		f.MemoryHigh = c.MemoryHigh
	default:
		f.MemoryMin = orDefault(c.MemoryMin, Bytes(0))
		f.MemoryLow = orDefault(c.MemoryLow, Bytes(0))
		f.MemoryHigh = orDefault(c.MemoryHigh, Max())
	}
	return f, c.OOMScoreAdj
}

// HostRoot gives the values evictd keeps on the workload root: the
// kubelet's values for its top QoS cgroup, kubepods (QoSValues), over the
// workloads given. A host-mode root has no burstable child cgroup, so
// QoSCgroups.BurstableMemoryLow has no file here; memory.high is never
// written on the root (nor on kubepods).
func HostRoot(pods []*v1.Pod, s Settings) CgroupFiles {
	q := QoSValues(pods, s)
	return CgroupFiles{MemoryMin: q.KubepodsMemoryMin, MemoryLow: q.KubepodsMemoryLow}
}

func orDefault(v, def Value) Value {
	if v.Written {
		return v
	}
	return def
}
