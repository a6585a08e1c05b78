// Package v1 reads cgroup v1 controller files. Every reader takes the cgroup's
// directory inside its controller's hierarchy (for example
// /sys/fs/cgroup/memory/kubepods/burstable/pod…): the caller injects the
// hierarchy root, nothing here knows where it is mounted. Each Read… function
// opens its file with one read; each parse… function parses any io.Reader.
package v1

import (
	"io"
	"strconv"

	"github.com/evictd/evictd/internal/cgroup"
)

// memcgSince is the kernel that introduced the v1 memory controller's core
// files (memory.usage_in_bytes, memory.limit_in_bytes, memory.stat, …).
const memcgSince = "2.6.25"

// ReadMemoryUsageInBytes reads memory.usage_in_bytes: the bytes charged to
// the cgroup and its descendants (page cache included).
func ReadMemoryUsageInBytes(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.usage_in_bytes", memcgSince, parseMemoryUsageInBytes)
}

// ReadMemoryUsageInBytesAt is ReadMemoryUsageInBytes in an opened cgroup directory.
func ReadMemoryUsageInBytesAt(d *cgroup.Dir) (uint64, error) {
	return cgroup.ReadFileAt(d, "memory.usage_in_bytes", memcgSince, parseMemoryUsageInBytes)
}

// ReadMemoryUsageInBytesFd reads memory.usage_in_bytes through a descriptor
// the caller keeps open (a memcg threshold is registered on it); path names
// the file in errors.
func ReadMemoryUsageInBytesFd(fd int, path string) (uint64, error) {
	return cgroup.ReadFd(fd, path, parseMemoryUsageInBytes)
}

func parseMemoryUsageInBytes(r io.Reader) (uint64, error) {
	return cgroup.ParseSingle(r, cgroup.ParseUint)
}

// Unlimited is the largest value memory.limit_in_bytes reports on a 4 KiB-page
// x86-64 kernel (PAGE_COUNTER_MAX pages); the kubelet treats anything above
// 2^62 as unlimited.
const Unlimited = 9223372036854771712

// ReadMemoryLimitInBytes reads memory.limit_in_bytes (Unlimited when none is set).
func ReadMemoryLimitInBytes(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.limit_in_bytes", memcgSince, parseMemoryLimitInBytes)
}

// ReadMemoryLimitInBytesAt is ReadMemoryLimitInBytes in an opened cgroup directory.
func ReadMemoryLimitInBytesAt(d *cgroup.Dir) (uint64, error) {
	return cgroup.ReadFileAt(d, "memory.limit_in_bytes", memcgSince, parseMemoryLimitInBytes)
}

func parseMemoryLimitInBytes(r io.Reader) (uint64, error) {
	return cgroup.ParseSingle(r, cgroup.ParseUint)
}

// ReadMemoryMaxUsageInBytes reads memory.max_usage_in_bytes, the high-water
// mark of usage since creation or the last reset.
func ReadMemoryMaxUsageInBytes(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.max_usage_in_bytes", memcgSince, parseMemoryMaxUsageInBytes)
}

func parseMemoryMaxUsageInBytes(r io.Reader) (uint64, error) {
	return cgroup.ParseSingle(r, cgroup.ParseUint)
}

// MemoryStat is memory.stat. The fields are the keys evictd uses; Entries
// keeps every line, unknown keys included, in file order. The total_* keys
// are hierarchical (this cgroup and its descendants), the others local.
type MemoryStat struct {
	Cache, RSS, InactiveFile, ActiveFile, Pgfault, Pgmajfault uint64 // local
	// Hierarchical; cAdvisor's (and so the kubelet's) working set on v1 is
	// usage_in_bytes − total_inactive_file.
	TotalCache, TotalRSS, TotalInactiveFile, TotalActiveFile  uint64
	TotalInactiveAnon, TotalActiveAnon, TotalSwap, TotalShmem uint64
	TotalPgfault, TotalPgmajfault, TotalMappedFile            uint64
	HierarchicalMemoryLimit                                   uint64
	HasTotals                                                 bool // false only on a kernel without hierarchy support
	Entries                                                   []cgroup.Entry
}

var memoryStatKeys = cgroup.NewKeys(
	"cache", "rss", "rss_huge", "shmem", "mapped_file", "dirty", "writeback",
	"workingset_refault_anon", "workingset_refault_file", "workingset_activate_anon",
	"workingset_activate_file", "workingset_restore_anon", "workingset_restore_file",
	"workingset_nodereclaim", "swap", "swapcached", "pgpgin", "pgpgout", "pgfault", "pgmajfault",
	"inactive_anon", "active_anon", "inactive_file", "active_file", "unevictable",
	"hierarchical_memory_limit", "hierarchical_memsw_limit",
	"total_cache", "total_rss", "total_rss_huge", "total_shmem", "total_mapped_file",
	"total_dirty", "total_writeback", "total_workingset_refault_anon", "total_workingset_refault_file",
	"total_workingset_activate_anon", "total_workingset_activate_file", "total_workingset_restore_anon",
	"total_workingset_restore_file", "total_workingset_nodereclaim", "total_swap", "total_swapcached",
	"total_pgpgin", "total_pgpgout", "total_pgfault", "total_pgmajfault", "total_inactive_anon",
	"total_active_anon", "total_inactive_file", "total_active_file", "total_unevictable",
)

// ReadMemoryStat reads memory.stat.
func ReadMemoryStat(dir string) (MemoryStat, error) {
	return cgroup.ReadFile(dir, "memory.stat", memcgSince, parseMemoryStat)
}

// ReadMemoryStatAt is ReadMemoryStat in an opened cgroup directory.
func ReadMemoryStatAt(d *cgroup.Dir) (MemoryStat, error) {
	return cgroup.ReadFileAt(d, "memory.stat", memcgSince, parseMemoryStat)
}

func parseMemoryStat(r io.Reader) (MemoryStat, error) {
	var s MemoryStat
	var err error
	s.Entries, err = cgroup.ParseFlatKeyed(r, memoryStatKeys, make([]cgroup.Entry, 0, 56))
	if err != nil {
		return MemoryStat{}, err
	}
	for _, e := range s.Entries {
		switch e.Key {
		case "cache":
			s.Cache = e.Value
		case "rss":
			s.RSS = e.Value
		case "inactive_file":
			s.InactiveFile = e.Value
		case "active_file":
			s.ActiveFile = e.Value
		case "pgfault":
			s.Pgfault = e.Value
		case "pgmajfault":
			s.Pgmajfault = e.Value
		case "total_cache":
			s.TotalCache = e.Value
		case "total_rss":
			s.TotalRSS = e.Value
		case "total_inactive_file":
			s.TotalInactiveFile, s.HasTotals = e.Value, true
		case "total_active_file":
			s.TotalActiveFile = e.Value
		case "total_inactive_anon":
			s.TotalInactiveAnon = e.Value
		case "total_active_anon":
			s.TotalActiveAnon = e.Value
		case "total_swap":
			s.TotalSwap = e.Value
		case "total_shmem":
			s.TotalShmem = e.Value
		case "total_pgfault":
			s.TotalPgfault = e.Value
		case "total_pgmajfault":
			s.TotalPgmajfault = e.Value
		case "total_mapped_file":
			s.TotalMappedFile = e.Value
		case "hierarchical_memory_limit":
			s.HierarchicalMemoryLimit = e.Value
		}
	}
	if len(s.Entries) == 0 {
		return MemoryStat{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	return s, nil
}

// Get returns the value of any key of the file, known or not.
func (s *MemoryStat) Get(key string) (uint64, bool) { return cgroup.Lookup(s.Entries, key) }

// WorkingSet is the kubelet's (cAdvisor's) working set for a v1 cgroup:
// usage − total_inactive_file, floored at 0.
func WorkingSet(usage uint64, s *MemoryStat) uint64 {
	if s.TotalInactiveFile > usage {
		return 0
	}
	return usage - s.TotalInactiveFile
}

// MemoryOOMControl is memory.oom_control.
type MemoryOOMControl struct {
	OOMKillDisable bool
	UnderOOM       bool
	OOMKill        uint64 // processes the OOM killer killed in this cgroup (kernel 4.13+)
	HasOOMKill     bool
	Entries        []cgroup.Entry
}

var oomControlKeys = cgroup.NewKeys("oom_kill_disable", "under_oom", "oom_kill")

// ReadMemoryOOMControl reads memory.oom_control.
func ReadMemoryOOMControl(dir string) (MemoryOOMControl, error) {
	return cgroup.ReadFile(dir, "memory.oom_control", memcgSince, parseMemoryOOMControl)
}

func parseMemoryOOMControl(r io.Reader) (MemoryOOMControl, error) {
	var o MemoryOOMControl
	var err error
	o.Entries, err = cgroup.ParseFlatKeyed(r, oomControlKeys, make([]cgroup.Entry, 0, 3))
	if err != nil {
		return MemoryOOMControl{}, err
	}
	for _, e := range o.Entries {
		switch e.Key {
		case "oom_kill_disable":
			o.OOMKillDisable = e.Value != 0
		case "under_oom":
			o.UnderOOM = e.Value != 0
		case "oom_kill":
			o.OOMKill, o.HasOOMKill = e.Value, true
		}
	}
	if len(o.Entries) == 0 {
		return MemoryOOMControl{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	return o, nil
}

// WriteMemoryLimitInBytes writes memory.limit_in_bytes (cgroup.Max writes
// -1, the kernel's "unlimited"). A limit below the usage makes the kernel
// reclaim the cgroup down to it in the writer's context; when it cannot,
// the write fails with EBUSY and the old limit stays.
func WriteMemoryLimitInBytes(dir string, v uint64) error {
	s := "-1"
	if v != cgroup.Max {
		s = strconv.FormatUint(v, 10)
	}
	return cgroup.WriteFile(dir, "memory.limit_in_bytes", memcgSince, s)
}

// WriteMemoryMemswLimitInBytes writes memory.memsw.limit_in_bytes, the limit
// of memory plus swap (cgroup.Max writes -1). It must not be below
// memory.limit_in_bytes (EINVAL), and it is missing (a
// *cgroup.NotSupportedError) without swap accounting (swapaccount=1).
func WriteMemoryMemswLimitInBytes(dir string, v uint64) error {
	s := "-1"
	if v != cgroup.Max {
		s = strconv.FormatUint(v, 10)
	}
	return cgroup.WriteFile(dir, "memory.memsw.limit_in_bytes", "2.6.34 with swap accounting", s)
}

// WriteCgroupEventControl registers a memory threshold with the kernel by
// writing "<eventfd> <watchfd> <threshold>" to cgroup.event_control: the
// kernel signals eventfd each time the counter open as watchfd (here
// memory.usage_in_bytes of dir) crosses threshold bytes, upward or
// downward. The registration lives until eventfd is closed. The write waits
// for an RCU grace period in the kernel (mem_cgroup_usage_register_event
// calls synchronize_rcu): tens of milliseconds on a busy host. No
// cgroup.event_control (cgroup v2, which has no thresholds) is a
// *cgroup.NotSupportedError.
func WriteCgroupEventControl(dir string, eventfd, watchfd int, threshold int64) error {
	line := strconv.Itoa(eventfd) + " " + strconv.Itoa(watchfd) + " " + strconv.FormatInt(threshold, 10)
	return cgroup.WriteFile(dir, "cgroup.event_control", memcgSince, line)
}

// WriteMemoryOOMKillDisable writes memory.oom_control's oom_kill_disable:
// with it set, a task that would have to be OOM-killed for the cgroup to
// stay under its limit sleeps (killably) until memory is uncharged or the
// limit is raised, instead of the kernel OOM killer running.
func WriteMemoryOOMKillDisable(dir string, disable bool) error {
	v := "0"
	if disable {
		v = "1"
	}
	return cgroup.WriteFile(dir, "memory.oom_control", memcgSince, v)
}

// ReadMemoryFailcnt reads memory.failcnt: how many times a charge hit
// memory.limit_in_bytes (a workload held back by its limit counts up).
func ReadMemoryFailcnt(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.failcnt", memcgSince, parseMemoryUsageInBytes)
}
