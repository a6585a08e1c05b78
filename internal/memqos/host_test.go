package memqos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHostWorkload: a host-mode workload cgroup gets the kubelet's container
// values, with the cgroup default where the kubelet leaves a file alone.
func TestHostWorkload(t *testing.T) {
	guaranteed := podOf(ctr("main", res(rl("1", "1Gi"), rl("1", "1Gi"))))
	burstable := podOf(ctr("main", res(rl("", "1Gi"), rl("", "2Gi"))))
	besteffort := podOf(ctr("main", res(nil, nil)))
	base := DefaultSettings()
	base.MemoryCapacity, base.NodeAllocatableMemory = mib(8192), mib(8192)
	tiered := base
	tiered.ReservationPolicy = ReservationTiered
	tiered.ThrottlingFactor = factor(0.5)
	v1s := tiered
	v1s.CgroupV2 = false
	off := base
	off.MemoryQoS, off.ReservationPolicy = false, ReservationNone

	for _, c := range []struct {
		name string
		pod  *v1.Pod
		s    Settings
		want CgroupFiles
		oom  int
	}{
		// Guaranteed: memory.min = request; memory.low (not written by the
		// kubelet) is kept at 0; request == limit, so no throttle: max.
		{"tiered guaranteed", guaranteed, tiered, CgroupFiles{Bytes(mib(1024)), Bytes(0), Max()}, -997},
		// Burstable: memory.low = request, memory.min 0, memory.high =
		// 1Gi + 0.5 × 1Gi.
		{"tiered burstable", burstable, tiered, CgroupFiles{Bytes(0), Bytes(mib(1024)), Bytes(mib(1536))}, 875},
		// BestEffort: both protections 0; memory.high from allocatable:
		// 0.5 × 8Gi.
		{"tiered besteffort", besteffort, tiered, CgroupFiles{Bytes(0), Bytes(0), Bytes(mib(4096))}, 1000},
		// Policy None, no factor: protections 0, no throttle.
		{"none burstable", burstable, base, CgroupFiles{Bytes(0), Bytes(0), Max()}, 875},
		// MemoryQoS off: memory.high reset to max, nothing else.
		{"gate off", burstable, off, CgroupFiles{MemoryHigh: Max()}, 875},
		// cgroup v1: no files, oom_score_adj only.
		{"cgroup v1", guaranteed, v1s, CgroupFiles{}, -997},
	} {
		got, oom := HostWorkload(c.pod, c.s)
		if got != c.want || oom != c.oom {
			t.Errorf("%s: %+v oom %d; want %+v oom %d", c.name, got, oom, c.want, c.oom)
		}
	}

	pods := []*v1.Pod{guaranteed, burstable, besteffort}
	if got, want := HostRoot(pods, tiered), (CgroupFiles{MemoryMin: Bytes(mib(2048)), MemoryLow: Bytes(mib(1024))}); got != want {
		t.Errorf("root, tiered: %+v, want %+v", got, want)
	}
	if got, want := HostRoot(pods, base), (CgroupFiles{MemoryMin: Bytes(0), MemoryLow: Bytes(0)}); got != want {
		t.Errorf("root, None: %+v, want %+v", got, want)
	}
	if got := HostRoot(pods, v1s); got != (CgroupFiles{}) {
		t.Errorf("root, v1: %+v, want nothing", got)
	}
}
