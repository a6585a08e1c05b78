package actuate

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/host"
)

// Resource is what a hold stops from growing.
type Resource int

const (
	Memory Resource = 1 // memory.available, allocatableMemory.available
	PIDs   Resource = 2 // pid.available
)

func (r Resource) String() string {
	switch r {
	case Memory:
		return "memory"
	case PIDs:
		return "pids"
	}
	return fmt.Sprintf("Resource(%d)", int(r))
}

// The mechanisms of a hold, as records, logs and metrics name them.
const (
	// MechMemoryHigh (cgroup v2): memory.high memoryHighUnder below the
	// usage. The kernel throttles every allocation above it (reclaim, then
	// a sleep that grows with the square of the overage); nothing is
	// OOM-killed, and the workload's threads keep running, so a SIGTERM
	// handler runs, slowed where it allocates.
	MechMemoryHigh = "memory.high"
	// MechMemoryLimit (cgroup v1, which has no memory.high): the OOM killer
	// disabled for the cgroup (memory.oom_control), then
	// memory.limit_in_bytes just above the usage. An allocation at the
	// limit sleeps (killably) until memory is uncharged, instead of the
	// kernel OOM killer running; threads that do not allocate keep running,
	// so a SIGTERM handler runs unless every thread is asleep at the limit
	// (then it runs when memory frees up, or the grace period's SIGKILL
	// ends them). Page cache is still reclaimed to make room.
	MechMemoryLimit = "memory.limit_in_bytes+oom_kill_disable"
	// MechPidsMax (v1 and v2): pids.max at the task count; fork and clone
	// fail with EAGAIN, everything else runs.
	MechPidsMax = "pids.max"
)

// Mechanism is the hold Hold puts on a workload for r in mode.
func Mechanism(mode Mode, r Resource) string {
	switch {
	case r == PIDs:
		return MechPidsMax
	case mode == V2:
		return MechMemoryHigh
	}
	return MechMemoryLimit
}

// memoryHighUnder is how far below the usage the v2 hold puts memory.high,
// in percent of the usage. memory.high throttles, it does not stop: the
// kernel sleeps an allocating task 64 × overage² seconds per 64 pages it
// charges (mm/memcontrol.c calculate_high_delay; nothing under 10 ms, at
// most 2 s), the overage being how far the usage is above memory.high. At
// the usage itself that is nothing until the usage has grown 1.25 % more,
// and the workload grew on (12 MiB within the second of grace in the VM).
// 10 % under makes every 256 KiB a thread allocates cost 0.64 s from the
// first page on. The write also reclaims the workload's page cache toward
// it, in evictd's context, before it returns (memory_high_write).
const memoryHighUnder = 10

// memoryLimitMargin is how far above the usage just read the v1 hold puts
// memory.limit_in_bytes: the usage a fast allocator adds between the read
// and the write (about 0.1 MiB at 5 GiB/s in the 20 µs between them). A
// limit the usage has already passed makes the kernel reclaim in the
// writer's context and then fail with EBUSY; each retry doubles the margin.
// What the margin lets through is growth after the stop: 1 MiB took a hog
// paced at 500 MiB/s 2 ms to reach, and growth stopped 7.5 ms after the
// crossing in one trial of ten (bench/latency.sh -oom); 256 KiB is 0.5 ms
// at that pace.
const (
	memoryLimitMargin  = 256 << 10
	memoryLimitRetries = 5
)

// pageSize rounds memory.high as the kernel does (it stores pages).
const pageSize = 4096

// ErrNoPidsCgroup is returned for a PID hold on a v1 workload that has no
// cgroup of the pids controller at the path of its memory cgroup.
var ErrNoPidsCgroup = errors.New("no pids cgroup at the workload's path")

// Hold is a stop put on a workload's growth the moment it is chosen for
// eviction: a limit the kernel enforces from the write on, so the memory or
// PIDs the eviction will free stop growing while the eviction takes its
// grace period and its API round trip. Release undoes it.
type Hold struct {
	Target    Target
	Resource  Resource
	Mechanism string        // MechMemoryHigh, MechMemoryLimit, MechPidsMax
	Dir       string        // the cgroup the limit was written to
	Usage     uint64        // bytes or tasks, read just before the write
	Limit     uint64        // bytes or tasks written
	Took      time.Duration // from the first read until the limit was in force
	DryRun    bool

	k        *Killer
	mu       sync.Mutex
	writes   []FileWrite // what the hold wrote, in order
	pending  chan error  // a write still running (v2 memory.high's reclaim)
	released bool
}

// FileWrite is one kernel file a hold wrote: enough to undo it, also from
// another process after a crash (HoldRecord, UndoRecord).
type FileWrite struct {
	Dir  string `json:"dir"`
	File string `json:"file"` // memory.high, memory.limit_in_bytes, memory.oom_control (oom_kill_disable), pids.max
	// Prev is the value before the hold, Wrote the hold's (cgroup.Max for
	// "max"; 0 or 1 for oom_kill_disable).
	Prev  uint64 `json:"prev"`
	Wrote uint64 `json:"wrote"`
}

// The files a hold writes, with their readers and writers.
var holdFiles = map[string]struct {
	read  func(dir string) (uint64, error)
	write func(dir string, v uint64) error
}{
	"memory.high":           {cgroupv2.ReadMemoryHigh, cgroupv2.WriteMemoryHigh},
	"memory.limit_in_bytes": {cgroupv1.ReadMemoryLimitInBytes, cgroupv1.WriteMemoryLimitInBytes},
	"memory.oom_control": {
		func(dir string) (uint64, error) {
			oc, err := cgroupv1.ReadMemoryOOMControl(dir)
			if oc.OOMKillDisable {
				return 1, err
			}
			return 0, err
		},
		func(dir string, v uint64) error { return cgroupv1.WriteMemoryOOMKillDisable(dir, v != 0) },
	},
	"pids.max": {cgroupv1.ReadPidsMax, cgroup.WritePidsMax},
}

// write writes v to one of the hold's files and notes it for the undo.
func (h *Hold) write(dir, file string, prev, v uint64) error {
	if err := holdFiles[file].write(dir, v); err != nil {
		return err
	}
	h.writes = append(h.writes, FileWrite{Dir: dir, File: file, Prev: prev, Wrote: v})
	return nil
}

// HoldRecord is what a hold wrote, for the agent to keep on disk while the
// hold is in force: a hold left by a crash is undone at the next start
// (UndoRecord), else its workload would stay at its limit with nothing to
// end it (on v1, asleep at the limit for good).
type HoldRecord struct {
	Workload  string      `json:"workload"`
	Mechanism string      `json:"mechanism"`
	Writes    []FileWrite `json:"writes"`
}

// Record returns what the hold wrote (nil writes for a dry run or a hold
// that found nothing to lower).
func (h *Hold) Record() HoldRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HoldRecord{Workload: h.Target.Name, Mechanism: h.Mechanism, Writes: slices.Clone(h.writes)}
}

// UndoRecord undoes a hold another run of evictd left, in reverse order:
// each file that still holds what the hold wrote gets its value from
// before; a file someone has changed since is left as it is (and counted in
// changed), a cgroup that is gone is fine.
func UndoRecord(r HoldRecord) (undone, changed int, err error) {
	var errs []error
	for i := len(r.Writes) - 1; i >= 0; i-- {
		w := r.Writes[i]
		f, ok := holdFiles[w.File]
		if !ok {
			errs = append(errs, fmt.Errorf("%s/%s: not a file a hold writes", w.Dir, w.File))
			continue
		}
		cur, err := f.read(w.Dir)
		switch {
		case cgroup.IsVanished(err):
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case cur != w.Wrote:
			changed++
			continue
		}
		if err := f.write(w.Dir, w.Prev); err != nil && !cgroup.IsVanished(err) {
			errs = append(errs, err)
			continue
		}
		undone++
	}
	return undone, changed, errors.Join(errs...)
}

// Hold stops t's growth in r: memory.high on v2 and
// memory.limit_in_bytes with the OOM killer disabled on v1 for memory,
// pids.max for PIDs. It writes nothing in a dry run (the Hold then says
// what would be written). A limit already at or below the usage is left as
// it is. The kill of a held workload needs no freezer (the hold keeps it
// from forking), which matters on v1, where threads asleep at the limit
// cannot be frozen.
func (k *Killer) Hold(t Target, r Resource) (*Hold, error) {
	start := time.Now()
	if k.isSelf(t.Cgroup) {
		return nil, fmt.Errorf("stop %s's growth (%s): %w", t.Name, t.Cgroup, ErrSelf)
	}
	h := &Hold{Target: t, Resource: r, DryRun: k.DryRun, k: k}
	var err error
	switch {
	case r == Memory && k.Mode == V2:
		err = h.memoryHigh(t.Cgroup)
	case r == Memory:
		err = h.memoryLimit(t.Cgroup)
	case r == PIDs:
		dir := t.Cgroup
		if k.Mode == V1 {
			if dir, err = k.pidsDir(t.Cgroup); err != nil {
				break
			}
		}
		err = h.pidsMax(dir)
	default:
		err = fmt.Errorf("unknown resource %v", r)
	}
	if err != nil {
		return nil, fmt.Errorf("stop %s's growth: %w", t.Name, err)
	}
	h.Took = time.Since(start)
	if !h.DryRun {
		k.track(h, true)
	}
	return h, nil
}

func (h *Hold) memoryHigh(dir string) error {
	h.Mechanism, h.Dir = MechMemoryHigh, dir
	prev, err := cgroupv2.ReadMemoryHigh(dir)
	if err != nil {
		return err
	}
	usage, err := cgroupv2.ReadMemoryCurrent(dir)
	if err != nil {
		return err
	}
	at := usage &^ (pageSize - 1)
	high := (usage - usage*memoryHighUnder/100) &^ (pageSize - 1)
	h.Usage, h.Limit = usage, min(high, prev)
	if h.DryRun || prev <= high {
		return nil
	}
	// Two writes. The kernel throttles from the start of a write on, then
	// reclaims toward the new value in the writer's context before the
	// write returns: at the usage that is quick (0.7 ms in the VM, under
	// emulation), 10 % under it the reclaim goes on until it makes no
	// progress (59 ms there, with nothing but anonymous memory and the
	// workload's own program to reclaim). So the first write, at the
	// usage, is the stop, on the way from the decision to the eviction; the
	// second tightens it on its own goroutine, and Release waits for it.
	if prev > at {
		if err := h.write(dir, "memory.high", prev, at); err != nil {
			return err
		}
	} else {
		at = prev
	}
	h.writes = append(h.writes, FileWrite{Dir: dir, File: "memory.high", Prev: at, Wrote: high})
	done := make(chan error, 1)
	go func() { done <- cgroupv2.WriteMemoryHigh(dir, high) }()
	h.pending = done
	return nil
}

func (h *Hold) memoryLimit(dir string) error {
	h.Mechanism, h.Dir = MechMemoryLimit, dir
	oc, err := cgroupv1.ReadMemoryOOMControl(dir)
	if err != nil {
		return err
	}
	prev, err := cgroupv1.ReadMemoryLimitInBytes(dir)
	if err != nil {
		return err
	}
	// The OOM killer first: with the limit first, an allocation at the
	// new limit could be OOM-killed before it is off.
	if !oc.OOMKillDisable && !h.DryRun {
		if err := h.write(dir, "memory.oom_control", 0, 1); err != nil {
			return err
		}
	}
	// The usage last, just before the limit's write: what the workload
	// adds in between passes the hold.
	usage, err := cgroupv1.ReadMemoryUsageInBytes(dir)
	if err != nil {
		h.undo()
		return err
	}
	h.Usage, h.Limit = usage, min(usage+memoryLimitMargin, prev)
	if h.DryRun {
		return nil
	}
	if prev <= usage+memoryLimitMargin {
		return nil // its own limit already holds it
	}
	margin := uint64(memoryLimitMargin)
	for try := 0; ; try++ {
		// Raised again before the OOM killer comes back: the undo runs in
		// reverse.
		err = h.write(dir, "memory.limit_in_bytes", prev, usage+margin)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EBUSY) || try == memoryLimitRetries {
			h.undo()
			return err
		}
		// The usage passed the value between the read and the write.
		if usage, err = cgroupv1.ReadMemoryUsageInBytes(dir); err != nil {
			h.undo()
			return err
		}
		margin *= 2
		if usage+margin >= prev {
			break // nothing lower than its own limit to hold it at
		}
	}
	h.Usage, h.Limit = usage, min(usage+margin, prev)
	return nil
}

// ErrNotRaisable is Raise's answer for a hold it cannot move: not a v1
// memory limit, released, or a dry run.
var ErrNotRaisable = errors.New("not a v1 memory hold in force")

// Raise moves a v1 memory hold to more bytes above the workload's usage
// now, never lower than it is and never past the limit the workload had
// before the hold: it may then grow that much before the kernel stops it.
// The agent moves an early stop that its synchronize found placed just
// short of the threshold (internal/agent's earlystop.go), so that the stop
// still takes hold at the threshold instead of being undone. Release undoes
// the move with the rest. A v2 hold is not moved (ErrNotRaisable):
// memory.high sits memoryHighUnder below the usage, so raising it by the
// shortfall would not let the workload reach the threshold.
func (h *Hold) Raise(more uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.DryRun || h.Mechanism != MechMemoryLimit {
		return ErrNotRaisable
	}
	orig := uint64(0)
	for _, w := range h.writes {
		if w.File == "memory.limit_in_bytes" {
			orig = w.Prev
			break
		}
	}
	if orig == 0 || h.Limit >= orig {
		return nil // its own limit holds it: nothing of the hold's to move
	}
	usage, err := cgroupv1.ReadMemoryUsageInBytes(h.Dir)
	if err != nil {
		return fmt.Errorf("move the hold on %s: %w", h.Dir, err)
	}
	v := min(max(usage+more, h.Limit), orig)
	if v == h.Limit {
		return nil
	}
	if err := h.write(h.Dir, "memory.limit_in_bytes", h.Limit, v); err != nil {
		return fmt.Errorf("move the hold on %s: %w", h.Dir, err)
	}
	h.Usage, h.Limit = usage, v
	return nil
}

func (h *Hold) pidsMax(dir string) error {
	h.Mechanism, h.Dir = MechPidsMax, dir
	var prev, cur uint64
	var err error
	if h.k.Mode == V2 {
		if prev, err = cgroupv2.ReadPidsMax(dir); err == nil {
			cur, err = cgroupv2.ReadPidsCurrent(dir)
		}
	} else {
		if prev, err = cgroupv1.ReadPidsMax(dir); err == nil {
			cur, err = cgroupv1.ReadPidsCurrent(dir)
		}
	}
	if err != nil {
		return err
	}
	h.Usage, h.Limit = cur, min(cur, prev)
	if h.DryRun || prev <= cur {
		return nil
	}
	return h.write(dir, "pids.max", prev, cur)
}

// Release undoes the hold: the limits it wrote go back to what they were,
// in the reverse order (on v1 the limit is raised before the OOM killer is
// turned back on). A cgroup that is gone is fine; Release is idempotent.
func (h *Hold) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.released = true
	if h.k != nil && !h.DryRun {
		h.k.track(h, false)
	}
	return h.undoLocked()
}

func (h *Hold) undo() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.undoLocked()
}

func (h *Hold) undoLocked() error {
	if h.pending != nil {
		<-h.pending // the hold's own write must not land after the undo's
		h.pending = nil
	}
	// (A second write that failed left the first in force: its undo finds
	// memory.high unchanged by it and writes what it was before, which is
	// the same.)
	var errs []error
	for i := len(h.writes) - 1; i >= 0; i-- {
		w := h.writes[i]
		if err := holdFiles[w.File].write(w.Dir, w.Prev); err != nil && !cgroup.IsVanished(err) {
			errs = append(errs, err)
		}
	}
	h.writes = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("undo the hold on %s: %w", h.Dir, err)
	}
	return nil
}

// String says what the hold did, for logs: "memory.high=851968000 (usage
// 851968000)".
func (h *Hold) String() string {
	if h == nil {
		return ""
	}
	verb := ""
	if h.DryRun {
		verb = "would set "
	}
	return fmt.Sprintf("%s%s=%d (usage %d)", verb, h.Mechanism, h.Limit, h.Usage)
}

// pidsDir maps a v1 memory cgroup to the pids controller's cgroup at the
// same relative path.
func (k *Killer) pidsDir(memDir string) (string, error) {
	if k.PidsRoot == "" {
		return "", fmt.Errorf("%w (no v1 pids hierarchy is mounted)", ErrNoPidsCgroup)
	}
	rel, err := filepath.Rel(k.MemoryRoot, memDir)
	if err != nil || strings.HasPrefix(rel, "..") || rel == "." {
		return "", fmt.Errorf("cgroup %s is not below the memory root %s", memDir, k.MemoryRoot)
	}
	dir := filepath.Join(k.PidsRoot, rel)
	if _, err := cgroupv1.ReadPidsMax(dir); err != nil {
		return "", fmt.Errorf("%w (%s: %v)", ErrNoPidsCgroup, dir, err)
	}
	return dir, nil
}

// isSelf reports whether dir is or contains evictd's own memory cgroup.
func (k *Killer) isSelf(dir string) bool {
	k.selfOnce.Do(func() {
		if k.MemoryRoot != "" {
			k.selfCgroup, _ = host.SelfMemoryCgroup("/proc", k.MemoryRoot, k.Mode == V2)
		}
	})
	s := k.selfCgroup
	return s != "" && (s == dir || strings.HasPrefix(s, strings.TrimSuffix(dir, "/")+"/"))
}

// track notes a hold in force (on) or released (off), for the kill.
func (k *Killer) track(h *Hold, on bool) {
	k.holdsMu.Lock()
	defer k.holdsMu.Unlock()
	if on {
		if k.holds == nil {
			k.holds = map[string]int{}
		}
		k.holds[h.Target.Cgroup]++
		return
	}
	if k.holds[h.Target.Cgroup]--; k.holds[h.Target.Cgroup] <= 0 {
		delete(k.holds, h.Target.Cgroup)
	}
}

// Held reports whether a hold is in force on the workload cgroup dir: what
// keeps a workload's limits (internal/protect) leaves it alone meanwhile.
func (k *Killer) Held(dir string) bool {
	k.holdsMu.Lock()
	defer k.holdsMu.Unlock()
	return k.holds[dir] > 0
}
