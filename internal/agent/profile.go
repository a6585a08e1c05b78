package agent

import (
	"context"
	"errors"
	"time"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/policy"
)

// What every wiring shares for the policy profile beyond the kubelet
// (docs/profile.md).

// ProcMeminfo is the HostMemorySource of a live node: /proc/meminfo's
// MemTotal and MemAvailable (the profile's memavailable).
type ProcMeminfo struct {
	ProcRoot string // "" is /proc
	Now      func() time.Time
}

// HostMemory implements HostMemorySource.
func (p ProcMeminfo) HostMemory(context.Context) (*policy.HostMemory, error) {
	root := p.ProcRoot
	if root == "" {
		root = "/proc"
	}
	mi, err := host.ReadMeminfo(root)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	return HostMemoryOf(mi, root+"/meminfo", now())
}

// HostMemoryOf is the engine's view of a /proc/meminfo read from file at
// time at. A file without MemAvailable (kernels before 3.14) is an error:
// reading it as 0 would make every memory threshold met.
func HostMemoryOf(mi host.Meminfo, file string, at time.Time) (*policy.HostMemory, error) {
	if !mi.HasMemAvailable {
		return nil, errors.New(file + " has no MemAvailable (kernel 3.14+)")
	}
	return &policy.HostMemory{Time: at, MemTotalBytes: mi.MemTotal, MemAvailableBytes: mi.MemAvailable}, nil
}

// CgroupMemoryReclaimer is the MemoryReclaimer of a live node: memory.reclaim
// on the root cgroup for memory.available and on the pods cgroup (or
// workload root) for allocatableMemory.available (actuate.ReclaimFile).
type CgroupMemoryReclaimer struct {
	Root, Pods string
	V2         bool
	DryRun     bool
}

// ReclaimMemory implements MemoryReclaimer.
func (r CgroupMemoryReclaimer) ReclaimMemory(_ context.Context, req policy.MemoryReclaim) (string, error) {
	if !r.V2 {
		return "", errors.New("memory.reclaim is cgroup v2 only (kernel 5.19+); the memory controller here is on v1")
	}
	dir := r.Root
	if req.Signal == policy.SignalAllocatableMemoryAvailable {
		dir = r.Pods
	}
	return actuate.ReclaimFile(dir, req.Bytes, r.DryRun)
}

// NeedsProfileStats reports whether profile p reads stats beyond the
// kubelet's eviction stats (collect.Config.ProfileStats: RSS and swap).
func NeedsProfileStats(p policy.Profile) bool { return p.SwapAware || p.ReclaimFirst }

// ProfileEdges returns the memory reclaimer and the /proc/meminfo source
// profile p uses on a node whose memory hierarchy is at memRoot with the
// pods cgroup (or workload root) pods; nil for those it does not use.
func ProfileEdges(p policy.Profile, memRoot, pods string, v2, dryRun bool, procRoot string) (mr MemoryReclaimer, hm HostMemorySource) {
	if p.ReclaimFirst {
		mr = CgroupMemoryReclaimer{Root: memRoot, Pods: pods, V2: v2, DryRun: dryRun}
	}
	if p.MemAvailable {
		hm = ProcMeminfo{ProcRoot: procRoot}
	}
	return mr, hm
}
