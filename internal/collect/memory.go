package collect

import (
	"errors"
	"fmt"

	"github.com/evictd/evictd/internal/cgroup"
	v1 "github.com/evictd/evictd/internal/cgroup/v1"
	v2 "github.com/evictd/evictd/internal/cgroup/v2"
)

// CgroupMemory is a cgroup's memory as cAdvisor (and so the kubelet) reads
// it, on either cgroup version.
type CgroupMemory struct {
	// Usage is memory.usage_in_bytes (v1) or memory.current (v2).
	Usage uint64
	// InactiveFile is total_inactive_file (v1) or inactive_file (v2).
	InactiveFile uint64
	// WorkingSet is Usage − InactiveFile, floored at 0.
	WorkingSet uint64
	// RSS is total_rss (v1) or anon (v2).
	RSS uint64
	// Pgfault and Pgmajfault are cAdvisor's ContainerData: the local
	// pgfault/pgmajfault keys on v1, the (hierarchical) ones on v2.
	Pgfault, Pgmajfault uint64
	// Swap is the swap in use (v1: memory.stat's total_swap, present with
	// swap accounting; v2: memory.swap.current, read only when asked for);
	// HasSwap says it was read.
	Swap    uint64
	HasSwap bool
	// Limit is memory.limit_in_bytes or memory.max (cgroup.Max for "max");
	// set only when asked for.
	Limit    uint64
	HasLimit bool
}

// memoryUnlimitedAbove is the kubelet's isMemoryUnlimited bound
// (pkg/kubelet/stats/helper.go): a limit above 2^62 bytes is "no limit", so
// no availableBytes is reported for it.
const memoryUnlimitedAbove = uint64(1) << 62

// readCgroupMemory reads dir's memory the way cAdvisor does for the given
// hierarchy version: usage + memory.stat, and the limit if withLimit.
func readCgroupMemory(dir string, version int, withLimit bool) (CgroupMemory, error) {
	d, err := cgroup.OpenDir(dir)
	if err != nil {
		return CgroupMemory{}, err
	}
	defer d.Close()
	return readCgroupMemoryAt(d, version, withLimit)
}

// readCgroupMemoryAt is readCgroupMemory in an opened directory.
func readCgroupMemoryAt(d *cgroup.Dir, version int, withLimit bool) (CgroupMemory, error) {
	var m CgroupMemory
	switch version {
	case 1:
		u, err := v1.ReadMemoryUsageInBytesAt(d)
		if err != nil {
			return m, err
		}
		s, err := v1.ReadMemoryStatAt(d)
		if err != nil {
			return m, err
		}
		m.Usage, m.InactiveFile, m.WorkingSet = u, s.TotalInactiveFile, v1.WorkingSet(u, &s)
		m.RSS, m.Pgfault, m.Pgmajfault = s.TotalRSS, s.Pgfault, s.Pgmajfault
		m.Swap, m.HasSwap = s.Get("total_swap")
		if withLimit {
			if m.Limit, err = v1.ReadMemoryLimitInBytesAt(d); err != nil {
				return m, err
			}
			m.HasLimit = true
		}
	case 2:
		u, err := v2.ReadMemoryCurrentAt(d)
		if err != nil {
			return m, err
		}
		s, err := v2.ReadMemoryStatAt(d)
		if err != nil {
			return m, err
		}
		m.Usage, m.InactiveFile, m.WorkingSet = u, s.InactiveFile, v2.WorkingSet(u, &s)
		m.RSS, m.Pgfault, m.Pgmajfault = s.Anon, s.Pgfault, s.Pgmajfault
		if withLimit {
			if m.Limit, err = v2.ReadMemoryMaxAt(d); err != nil {
				return m, err
			}
			m.HasLimit = true
		}
	default:
		return m, fmt.Errorf("cgroup version %d", version)
	}
	return m, nil
}

// readRootMemory reads the root cgroup's memory. On v1 the root has
// usage_in_bytes; the v2 root has no memory.current, so usage is anon + file
// from the root memory.stat, as opencontainers/cgroups (cAdvisor's library)
// emulates it (fs2: rootStatsFromMeminfo).
func readRootMemory(dir string, version int) (CgroupMemory, error) {
	if version == 1 {
		return readCgroupMemory(dir, 1, false)
	}
	s, err := v2.ReadMemoryStat(dir)
	if err != nil {
		return CgroupMemory{}, err
	}
	u := s.Anon + s.File
	return CgroupMemory{Usage: u, InactiveFile: s.InactiveFile, WorkingSet: v2.WorkingSet(u, &s),
		RSS: s.Anon, Pgfault: s.Pgfault, Pgmajfault: s.Pgmajfault}, nil
}

// readSwapAt fills m's swap usage: on v2 from memory.swap.current (an extra
// file, so only when asked for; a kernel without swap accounting leaves
// HasSwap false), on v1 it came with memory.stat.
func readSwapAt(d *cgroup.Dir, version int, m *CgroupMemory) error {
	if version != 2 {
		return nil
	}
	v, err := v2.ReadMemorySwapCurrentAt(d)
	var ns *cgroup.NotSupportedError
	switch {
	case errors.As(err, &ns):
		return nil
	case err != nil:
		return err
	}
	m.Swap, m.HasSwap = v, true
	return nil
}

// ReadOOMKills returns how many processes of dir's cgroup subtree the kernel
// OOM killer has killed, for any reason: on v2 memory.events' oom_kill,
// which counts the subtree; on v1 the sum of every cgroup's
// memory.oom_control oom_kill, which counts only tasks that were in that
// very cgroup (a pod's kills show in its container cgroups). A descendant
// removed meanwhile is skipped; dir gone is a *cgroup.VanishedError.
func ReadOOMKills(dir string, unified bool) (uint64, error) {
	if unified {
		ev, err := v2.ReadMemoryEvents(dir)
		return ev.OOMKill, err
	}
	var n uint64
	err := cgroup.WalkCgroups(dir, func(d string) error {
		oc, err := v1.ReadMemoryOOMControl(d)
		if err != nil {
			return err
		}
		n += oc.OOMKill
		return nil
	})
	return n, err
}
