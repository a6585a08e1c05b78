// Package v2 reads cgroup v2 (unified hierarchy) files. Every reader takes the
// cgroup's directory (for example /sys/fs/cgroup/kubepods.slice/…): the
// caller injects the mount point, nothing here knows where it is. Each Read…
// function opens its file with one read; each parse… function parses any
// io.Reader. Minimum kernels come from the kernel's cgroup-v2 documentation
// history and are named in the not-supported errors.
package v2

import (
	"io"
	"strconv"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/host"
)

const (
	since = "4.5" // cgroup v2 itself: memory.current, memory.max, memory.stat, memory.events, cgroup.procs, …
)

func parseCounter(r io.Reader) (uint64, error) { return cgroup.ParseSingle(r, cgroup.ParseUint) }
func parseLimit(r io.Reader) (uint64, error)   { return cgroup.ParseSingle(r, cgroup.ParseLimit) }

// ReadMemoryCurrent reads memory.current: bytes charged to the cgroup and its
// descendants. The root cgroup has no memory.current (*cgroup.NotSupportedError).
func ReadMemoryCurrent(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.current", since, parseCounter)
}

// ReadMemoryCurrentAt is ReadMemoryCurrent in an opened cgroup directory.
func ReadMemoryCurrentAt(d *cgroup.Dir) (uint64, error) {
	return cgroup.ReadFileAt(d, "memory.current", since, parseCounter)
}

// ReadMemoryCurrentFd reads memory.current through a descriptor the caller
// keeps open, to read it every few microseconds without the open (the
// trial harness's crossing watcher); path names the file in errors.
func ReadMemoryCurrentFd(fd int, path string) (uint64, error) {
	return cgroup.ReadFd(fd, path, parseCounter)
}

// ReadMemoryMax reads memory.max ("max" reads as cgroup.Max).
func ReadMemoryMax(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.max", since, parseLimit)
}

// ReadMemoryMaxAt is ReadMemoryMax in an opened cgroup directory.
func ReadMemoryMaxAt(d *cgroup.Dir) (uint64, error) {
	return cgroup.ReadFileAt(d, "memory.max", since, parseLimit)
}

// ReadMemoryHigh reads memory.high ("max" reads as cgroup.Max).
func ReadMemoryHigh(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.high", since, parseLimit)
}

// ReadMemoryLow reads memory.low.
func ReadMemoryLow(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.low", since, parseLimit)
}

// ReadMemoryMin reads memory.min.
func ReadMemoryMin(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.min", "4.18", parseLimit)
}

// ReadMemoryPeak reads memory.peak, the high-water mark of memory.current.
func ReadMemoryPeak(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.peak", "5.19", parseCounter)
}

// ReadMemorySwapCurrent reads memory.swap.current.
func ReadMemorySwapCurrent(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "memory.swap.current", swapSince, parseCounter)
}

// ReadMemorySwapCurrentAt is ReadMemorySwapCurrent in an opened cgroup directory.
func ReadMemorySwapCurrentAt(d *cgroup.Dir) (uint64, error) {
	return cgroup.ReadFileAt(d, "memory.swap.current", swapSince, parseCounter)
}

// ReadMemorySwapMaxAt reads memory.swap.max ("max" reads as cgroup.Max) in
// an opened cgroup directory.
func ReadMemorySwapMaxAt(d *cgroup.Dir) (uint64, error) {
	return cgroup.ReadFileAt(d, "memory.swap.max", swapSince, parseLimit)
}

const swapSince = "4.5 with CONFIG_MEMCG_SWAP"

// MemoryStat is memory.stat. v2 has no total_* keys: every value is already
// hierarchical (this cgroup and its descendants). Entries keeps every line,
// unknown keys included, in file order.
type MemoryStat struct {
	Anon, File, Shmem, FileMapped uint64
	InactiveAnon, ActiveAnon      uint64
	InactiveFile, ActiveFile      uint64
	Pgfault, Pgmajfault           uint64
	HasInactiveFile               bool
	Entries                       []cgroup.Entry
}

var memoryStatKeys = cgroup.NewKeys(
	"anon", "file", "kernel", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "sock", "vmalloc",
	"shmem", "zswap", "zswapped", "file_mapped", "file_dirty", "file_writeback", "swapcached",
	"anon_thp", "file_thp", "shmem_thp", "inactive_anon", "active_anon", "inactive_file", "active_file",
	"unevictable", "slab_reclaimable", "slab_unreclaimable", "slab", "workingset_refault_anon",
	"workingset_refault_file", "workingset_activate_anon", "workingset_activate_file",
	"workingset_restore_anon", "workingset_restore_file", "workingset_nodereclaim", "pgscan", "pgsteal",
	"pgscan_kswapd", "pgscan_direct", "pgscan_khugepaged", "pgsteal_kswapd", "pgsteal_direct",
	"pgsteal_khugepaged", "pgfault", "pgmajfault", "pgrefill", "pgactivate", "pgdeactivate", "pglazyfree",
	"pglazyfreed", "zswpin", "zswpout", "zswpwb", "thp_fault_alloc", "thp_collapse_alloc",
	"thp_swpout", "thp_swpout_fallback", "numa_pages_migrated", "numa_pte_updates", "numa_hint_faults",
	"pgdemote_kswapd", "pgdemote_direct", "pgdemote_khugepaged", "hugetlb", "pgpromote_success",
)

// ReadMemoryStat reads memory.stat.
func ReadMemoryStat(dir string) (MemoryStat, error) {
	return cgroup.ReadFile(dir, "memory.stat", since, parseMemoryStat)
}

// ReadMemoryStatAt is ReadMemoryStat in an opened cgroup directory.
func ReadMemoryStatAt(d *cgroup.Dir) (MemoryStat, error) {
	return cgroup.ReadFileAt(d, "memory.stat", since, parseMemoryStat)
}

func parseMemoryStat(r io.Reader) (MemoryStat, error) {
	var s MemoryStat
	var err error
	s.Entries, err = cgroup.ParseFlatKeyed(r, memoryStatKeys, make([]cgroup.Entry, 0, 72))
	if err != nil {
		return MemoryStat{}, err
	}
	if len(s.Entries) == 0 {
		return MemoryStat{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	for _, e := range s.Entries {
		switch e.Key {
		case "anon":
			s.Anon = e.Value
		case "file":
			s.File = e.Value
		case "shmem":
			s.Shmem = e.Value
		case "file_mapped":
			s.FileMapped = e.Value
		case "inactive_anon":
			s.InactiveAnon = e.Value
		case "active_anon":
			s.ActiveAnon = e.Value
		case "inactive_file":
			s.InactiveFile, s.HasInactiveFile = e.Value, true
		case "active_file":
			s.ActiveFile = e.Value
		case "pgfault":
			s.Pgfault = e.Value
		case "pgmajfault":
			s.Pgmajfault = e.Value
		}
	}
	return s, nil
}

// Get returns the value of any key of the file, known or not.
func (s *MemoryStat) Get(key string) (uint64, bool) { return cgroup.Lookup(s.Entries, key) }

// WorkingSet is the kubelet's (cAdvisor's) working set for a v2 cgroup:
// memory.current − inactive_file, floored at 0.
func WorkingSet(current uint64, s *MemoryStat) uint64 {
	if s.InactiveFile > current {
		return 0
	}
	return current - s.InactiveFile
}

// MemoryEvents is memory.events or memory.events.local.
type MemoryEvents struct {
	Low, High, Max, OOM, OOMKill uint64
	OOMGroupKill                 uint64 // 6.1+: times the whole group was killed (memory.oom.group=1)
	HasOOMGroupKill              bool
	Entries                      []cgroup.Entry
}

var memoryEventsKeys = cgroup.NewKeys("low", "high", "max", "oom", "oom_kill", "oom_group_kill", "sock_throttled")

// ReadMemoryEvents reads memory.events: counts for this cgroup and its
// descendants. On v2 a container's counters restart with its cgroup; the pod
// cgroup's survive container restarts (seed 003).
func ReadMemoryEvents(dir string) (MemoryEvents, error) {
	return cgroup.ReadFile(dir, "memory.events", since, parseMemoryEvents)
}

// ReadMemoryEventsLocal reads memory.events.local: this cgroup only.
func ReadMemoryEventsLocal(dir string) (MemoryEvents, error) {
	return cgroup.ReadFile(dir, "memory.events.local", "5.2", parseMemoryEvents)
}

// ReadMemoryEventsFd reads memory.events through a descriptor the caller
// keeps open to poll it (POLLPRI); path names the file in errors.
func ReadMemoryEventsFd(fd int, path string) (MemoryEvents, error) {
	return cgroup.ReadFd(fd, path, parseMemoryEvents)
}

func parseMemoryEvents(r io.Reader) (MemoryEvents, error) {
	var m MemoryEvents
	var err error
	m.Entries, err = cgroup.ParseFlatKeyed(r, memoryEventsKeys, make([]cgroup.Entry, 0, 7))
	if err != nil {
		return MemoryEvents{}, err
	}
	if len(m.Entries) == 0 {
		return MemoryEvents{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	for _, e := range m.Entries {
		switch e.Key {
		case "low":
			m.Low = e.Value
		case "high":
			m.High = e.Value
		case "max":
			m.Max = e.Value
		case "oom":
			m.OOM = e.Value
		case "oom_kill":
			m.OOMKill = e.Value
		case "oom_group_kill":
			m.OOMGroupKill, m.HasOOMGroupKill = e.Value, true
		}
	}
	return m, nil
}

// CPUStat is cpu.stat. On v2 every time is in MICROSECONDS (v1's
// throttled_time was nanoseconds: seed 003). usage_usec, user_usec and
// system_usec exist without the cpu controller; the throttling keys only
// where the cpu controller is enabled.
type CPUStat struct {
	UsageUsec, UserUsec, SystemUsec uint64
	NrPeriods, NrThrottled          uint64
	ThrottledUsec                   uint64
	HasThrottling                   bool
	Entries                         []cgroup.Entry
}

var cpuStatKeys = cgroup.NewKeys("usage_usec", "user_usec", "system_usec", "core_sched.force_idle_usec",
	"nice_usec", "nr_periods", "nr_throttled", "throttled_usec", "nr_bursts", "burst_usec")

// ReadCPUStat reads cpu.stat.
func ReadCPUStat(dir string) (CPUStat, error) {
	return cgroup.ReadFile(dir, "cpu.stat", since, parseCPUStat)
}

func parseCPUStat(r io.Reader) (CPUStat, error) {
	var s CPUStat
	var err error
	s.Entries, err = cgroup.ParseFlatKeyed(r, cpuStatKeys, make([]cgroup.Entry, 0, 10))
	if err != nil {
		return CPUStat{}, err
	}
	if len(s.Entries) == 0 {
		return CPUStat{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	for _, e := range s.Entries {
		switch e.Key {
		case "usage_usec":
			s.UsageUsec = e.Value
		case "user_usec":
			s.UserUsec = e.Value
		case "system_usec":
			s.SystemUsec = e.Value
		case "nr_periods":
			s.NrPeriods, s.HasThrottling = e.Value, true
		case "nr_throttled":
			s.NrThrottled = e.Value
		case "throttled_usec":
			s.ThrottledUsec = e.Value
		}
	}
	return s, nil
}

// ReadPidsCurrent reads pids.current.
func ReadPidsCurrent(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "pids.current", since, parseCounter)
}

// ReadPidsMax reads pids.max ("max" reads as cgroup.Max).
func ReadPidsMax(dir string) (uint64, error) {
	return cgroup.ReadFile(dir, "pids.max", since, parseLimit)
}

// PidsEvents is pids.events.
type PidsEvents struct {
	Max     uint64 // forks refused because pids.max was reached
	Entries []cgroup.Entry
}

var pidsEventsKeys = cgroup.NewKeys("max", "max.imposed")

// ReadPidsEvents reads pids.events.
func ReadPidsEvents(dir string) (PidsEvents, error) {
	return cgroup.ReadFile(dir, "pids.events", since, parsePidsEvents)
}

func parsePidsEvents(r io.Reader) (PidsEvents, error) {
	var p PidsEvents
	var err error
	p.Entries, err = cgroup.ParseFlatKeyed(r, pidsEventsKeys, make([]cgroup.Entry, 0, 2))
	if err != nil {
		return PidsEvents{}, err
	}
	if len(p.Entries) == 0 {
		return PidsEvents{}, &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	p.Max, _ = cgroup.Lookup(p.Entries, "max")
	return p, nil
}

const psiSince = "4.20 with CONFIG_PSI and without psi=0"

// ReadMemoryPressure reads memory.pressure (PSI; totals in microseconds).
func ReadMemoryPressure(dir string) (host.Pressure, error) {
	return cgroup.ReadFile(dir, "memory.pressure", psiSince, host.ParsePressure)
}

// ReadIOPressure reads io.pressure.
func ReadIOPressure(dir string) (host.Pressure, error) {
	return cgroup.ReadFile(dir, "io.pressure", psiSince, host.ParsePressure)
}

// ReadCPUPressure reads cpu.pressure.
func ReadCPUPressure(dir string) (host.Pressure, error) {
	return cgroup.ReadFile(dir, "cpu.pressure", psiSince, host.ParsePressure)
}

// CgroupEvents is cgroup.events.
type CgroupEvents struct {
	Populated bool // a process lives in this cgroup or a descendant
	Frozen    bool // 5.2+
	Entries   []cgroup.Entry
}

var cgroupEventsKeys = cgroup.NewKeys("populated", "frozen")

// ReadCgroupEvents reads cgroup.events (absent at the root).
func ReadCgroupEvents(dir string) (CgroupEvents, error) {
	return cgroup.ReadFile(dir, "cgroup.events", since, parseCgroupEvents)
}

func parseCgroupEvents(r io.Reader) (CgroupEvents, error) {
	var c CgroupEvents
	var err error
	c.Entries, err = cgroup.ParseFlatKeyed(r, cgroupEventsKeys, make([]cgroup.Entry, 0, 2))
	if err != nil {
		return CgroupEvents{}, err
	}
	v, ok := cgroup.Lookup(c.Entries, "populated")
	if !ok {
		return CgroupEvents{}, &cgroup.ParseError{Line: 1, Token: "populated", Err: cgroup.ErrNoValue}
	}
	c.Populated = v != 0
	f, _ := cgroup.Lookup(c.Entries, "frozen")
	c.Frozen = f != 0
	return c, nil
}

// ReadCgroupControllers reads cgroup.controllers.
func ReadCgroupControllers(dir string) ([]string, error) {
	return cgroup.ReadCgroupControllers(dir)
}

// ReadCgroupSubtreeControl reads cgroup.subtree_control: the controllers
// enabled for this cgroup's children.
func ReadCgroupSubtreeControl(dir string) ([]string, error) {
	return cgroup.ReadFile(dir, "cgroup.subtree_control", since, cgroup.ParseControllerList)
}

// WriteMemoryReclaim writes memory.reclaim (5.19+): the kernel reclaims up
// to bytes from the cgroup and its descendants before the write returns.
// When it reclaimed less, the write fails with EAGAIN (an *fs.PathError
// wrapping unix.EAGAIN): a partial reclaim, not a fault.
func WriteMemoryReclaim(dir string, bytes uint64) error {
	return cgroup.WriteFile(dir, "memory.reclaim", "5.19", strconv.FormatUint(bytes, 10))
}

// WriteMemoryMin writes memory.min (hard protection from reclaim, 4.18+).
// cgroup.Max writes "max".
func WriteMemoryMin(dir string, v uint64) error {
	return cgroup.WriteFile(dir, "memory.min", "4.18", cgroup.FormatLimit(v))
}

// WriteMemoryLow writes memory.low (best-effort protection from reclaim).
func WriteMemoryLow(dir string, v uint64) error {
	return cgroup.WriteFile(dir, "memory.low", since, cgroup.FormatLimit(v))
}

// WriteMemoryMax writes memory.max (the hard limit: above it the cgroup is
// reclaimed and, failing that, OOM-killed). cgroup.Max writes "max".
func WriteMemoryMax(dir string, v uint64) error {
	return cgroup.WriteFile(dir, "memory.max", since, cgroup.FormatLimit(v))
}

// WriteMemorySwapMax writes memory.swap.max (how much of the cgroup may be
// swapped out; 0: none). It is missing (a *cgroup.NotSupportedError)
// without swap accounting.
func WriteMemorySwapMax(dir string, v uint64) error {
	return cgroup.WriteFile(dir, "memory.swap.max", "4.5 with CONFIG_MEMCG_SWAP", cgroup.FormatLimit(v))
}

// WriteMemoryHigh writes memory.high (the throttle: above it the cgroup's
// allocations are slowed and reclaimed, never OOM-killed).
func WriteMemoryHigh(dir string, v uint64) error {
	return cgroup.WriteFile(dir, "memory.high", since, cgroup.FormatLimit(v))
}

// ReadCgroupFreeze reads cgroup.freeze (5.2+; absent at the root): whether
// the cgroup was asked to freeze. cgroup.events' "frozen" says when that
// took hold, once every task has stopped: a cgroup whose freeze is under way
// (a task has not reached user space yet) reads true here and frozen 0
// there.
func ReadCgroupFreeze(dir string) (bool, error) {
	v, err := cgroup.ReadFile(dir, "cgroup.freeze", "5.2", parseCounter)
	return v != 0, err
}

// WriteCgroupFreeze writes cgroup.freeze (5.2+): 1 freezes every task of
// the subtree as it next returns to user space (cgroup.events "frozen 1"
// once all have), 0 thaws them. SIGKILL still reaches a frozen task.
func WriteCgroupFreeze(dir string, freeze bool) error {
	v := "0"
	if freeze {
		v = "1"
	}
	return cgroup.WriteFile(dir, "cgroup.freeze", "5.2", v)
}
