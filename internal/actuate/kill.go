// Package actuate carries out eviction decisions on a host: it kills a
// workload's cgroup gracefully (SIGTERM to every process, SIGKILL at the grace
// deadline) with a kill that no fork can escape (cgroup.kill on v2, freezer +
// SIGKILL on v1), runs node-level reclaim hooks, and in dry-run mode only
// describes what it would do.
package actuate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	"github.com/evictd/evictd/internal/host"
)

// Mode is the cgroup mode of the workload cgroups.
type Mode int

const (
	V1 Mode = 1 // memory on v1; the hard kill goes through the v1 freezer
	V2 Mode = 2 // unified; the hard kill is cgroup.kill
)

// Timing of a kill.
const (
	// pollEvery is how often the killer rechecks a cgroup for processes.
	pollEvery = 10 * time.Millisecond
	// freezeTimeout bounds waiting for FREEZING to become FROZEN; a task in
	// uninterruptible sleep can delay it, and SIGKILL still goes out after.
	freezeTimeout = time.Second
	// DefaultGoneTimeout bounds waiting for a killed cgroup to empty, like
	// the kubelet's wait of max(1.5 × grace, 10 s) for the pod to terminate.
	DefaultGoneTimeout = 10 * time.Second
)

// ErrSelf is returned for a cgroup that holds evictd itself.
var ErrSelf = errors.New("refusing to kill the cgroup evictd runs in")

// Target is the workload to kill.
type Target struct {
	Name   string // for logs
	Cgroup string // its cgroup directory (the v1 memory hierarchy or the v2 tree)
}

// Result says what a kill did (or, in dry run, would do).
type Result struct {
	Target     Target
	Grace      time.Duration
	Terminated []int  // processes sent SIGTERM
	HardKill   string // "", "cgroup.kill", "freezer+SIGKILL", "SIGKILL"
	Gone       bool   // the cgroup held no process when Kill returned
	DryRun     bool
	Elapsed    time.Duration
}

// Killer kills workload cgroups.
type Killer struct {
	Mode Mode
	// FreezerRoot and MemoryRoot map a v1 memory cgroup to its freezer
	// cgroup (same path relative to the roots).
	MemoryRoot, FreezerRoot string
	DryRun                  bool
	GoneTimeout             time.Duration // 0: DefaultGoneTimeout
	Log                     *slog.Logger  // nil: slog.Default()
	// Self is the pid that must never be killed (0: os.Getpid()).
	Self int
	// PidsRoot maps a v1 memory cgroup to its pids controller cgroup (same
	// path relative to the roots), for a PID hold; "" on v2 and where the
	// v1 pids controller is not mounted.
	PidsRoot string

	selfOnce   sync.Once
	selfCgroup string // evictd's memory cgroup, which Hold refuses

	holdsMu sync.Mutex
	holds   map[string]int // workload cgroup → holds in force (Hold)
}

// NewKiller returns a Killer for the workloads whose memory cgroups are
// under memRoot in hierarchy h: cgroup.kill on v2; on v1 the freezer
// controller's cgroup of the same path, when h mounts one, stops forks during
// the kill.
func NewKiller(h cgroup.Hierarchy, memRoot string, v2 bool, log *slog.Logger) *Killer {
	k := &Killer{Mode: V1, MemoryRoot: memRoot, Log: log}
	if v2 {
		k.Mode = V2
	} else {
		if r, _, ok := h.Controller("freezer"); ok {
			k.FreezerRoot = r
		}
		if r, _, ok := h.Controller("pids"); ok {
			k.PidsRoot = r
		}
	}
	return k
}

func (k *Killer) log() *slog.Logger {
	if k.Log != nil {
		return k.Log
	}
	return slog.Default()
}

// Kill ends every process of t. With grace > 0 it sends SIGTERM and waits up
// to grace for the cgroup to empty; then (or at once with grace 0) it kills
// what is left with no fork race, and waits (bounded) until the cgroup is
// empty. ctx cancels the waits, never a kill half-done; cancelled during the
// grace period, Kill returns ErrInterrupted and kills nothing: a stop of
// evictd must not shorten a workload's grace period (Finish completes it).
func (k *Killer) Kill(ctx context.Context, t Target, grace time.Duration) (Result, error) {
	start := time.Now()
	res := Result{Target: t, Grace: grace, DryRun: k.DryRun}
	pids, err := ProcsRecursive(t.Cgroup)
	if err != nil {
		return res, fmt.Errorf("kill %s: %w", t.Name, err)
	}
	self := k.Self
	if self == 0 {
		self = os.Getpid()
	}
	for _, p := range pids {
		if p == self {
			return res, fmt.Errorf("kill %s (%s): %w", t.Name, t.Cgroup, ErrSelf)
		}
	}
	hard := k.hardKillMethod(t)
	if k.DryRun {
		res.Terminated = pids
		res.HardKill = hard
		k.log().Info("dry run: would kill workload", "workload", t.Name, "cgroup", t.Cgroup,
			"sigterm_pids", pids, "grace", grace, "then", hard)
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if grace > 0 && len(pids) > 0 {
		for _, p := range pids {
			if err := syscall.Kill(p, syscall.SIGTERM); err == nil {
				res.Terminated = append(res.Terminated, p)
			}
		}
		if k.waitEmpty(ctx, t.Cgroup, grace) {
			res.Gone = true
			res.Elapsed = time.Since(start)
			return res, nil
		}
		if ctx.Err() != nil {
			res.Elapsed = time.Since(start)
			return res, fmt.Errorf("kill %s: %w", t.Name, ErrInterrupted)
		}
	}
	res.HardKill = hard
	if err := k.hardKill(t); err != nil {
		res.Elapsed = time.Since(start)
		return res, fmt.Errorf("kill %s: %w", t.Name, err)
	}
	gone := k.GoneTimeout
	if gone <= 0 {
		gone = DefaultGoneTimeout
	}
	res.Gone = k.waitEmpty(ctx, t.Cgroup, gone)
	res.Elapsed = time.Since(start)
	return res, nil
}

func (k *Killer) hardKillMethod(t Target) string {
	if k.Mode == V2 {
		if _, err := os.Stat(filepath.Join(t.Cgroup, "cgroup.kill")); err == nil {
			return "cgroup.kill"
		}
		return "SIGKILL"
	}
	if k.Held(t.Cgroup) {
		// The hold keeps the workload from forking (a fork charges its task
		// and stack to the cgroup at its limit, or pids.max refuses it), and
		// its threads sleeping at the limit could not be frozen anyway.
		return "SIGKILL (held)"
	}
	if k.FreezerRoot != "" {
		if _, err := os.Stat(k.FreezerRoot); err == nil {
			return "freezer+SIGKILL"
		}
	}
	return "SIGKILL"
}

func (k *Killer) hardKill(t Target) error {
	switch k.hardKillMethod(t) {
	case "cgroup.kill":
		// The kernel kills the whole subtree and any process forked
		// while it does so.
		if err := cgroup.WriteCgroupKill(t.Cgroup); err != nil {
			return fmt.Errorf("write cgroup.kill: %w", err)
		}
		// Then SIGKILL to each process still listed, as a process: Linux
		// 6.1's cgroup.kill signals a thread group's leader thread alone,
		// which never delivers it when the leader has exited while other
		// threads go on (TestKillLeaderExited; the signal sat pending on
		// the zombie leader).
		return killLoop(t.Cgroup)
	case "freezer+SIGKILL":
		return k.freezeKill(t)
	default:
		return killLoop(t.Cgroup)
	}
}

// Timing of the v1 freezer kill.
const (
	// moveTimeout bounds moving a workload's threads into the freezer
	// cgroup. A fork loop is outrun within a few passes; past the bound the
	// kill goes on with what was moved (the SIGKILL loop after it catches
	// the rest), so the kill never fails for want of a frozen cgroup.
	moveTimeout = time.Second
)

// freezeKill is the v1 kill with no fork race: move every thread of the
// memory cgroup into the freezer cgroup at the same relative path (a thread
// created meanwhile is caught by the next pass; a child of a thread already
// moved is born inside), freeze it so nothing can fork, SIGKILL everything,
// then thaw so the signals are delivered.
func (k *Killer) freezeKill(t Target) error {
	rel, err := filepath.Rel(k.MemoryRoot, t.Cgroup)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("cgroup %s is not under the memory root %s", t.Cgroup, k.MemoryRoot)
	}
	fz := filepath.Join(k.FreezerRoot, rel)
	if rel == "." {
		return fmt.Errorf("refusing to freeze the freezer root for %s", t.Cgroup)
	}
	created, err := cgroup.MkdirAll(fz)
	if err != nil {
		return fmt.Errorf("create freezer cgroup: %w", err)
	}
	defer func() {
		if err := cgroup.RemoveAll(created, DefaultGoneTimeout); err != nil {
			k.log().Warn("the freezer cgroup made for a kill is left behind", "cgroup", fz, "err", err)
		}
	}()
	defer func() {
		if err := cgroupv1.WriteFreezerState(fz, cgroupv1.Thawed); err != nil && !cgroup.IsVanished(err) {
			k.log().Warn("cannot thaw the freezer cgroup after a kill", "cgroup", fz, "err", err)
		}
	}()
	if left, err := moveThreads(t.Cgroup, fz, time.Now().Add(moveTimeout)); err != nil {
		return err
	} else if len(left) > 0 {
		k.log().Warn("some threads could not be moved into the freezer before the kill; killing them outside it",
			"cgroup", t.Cgroup, "tids", left, "waited", moveTimeout)
	}
	if err := cgroupv1.WriteFreezerState(fz, cgroupv1.Frozen); err != nil {
		return fmt.Errorf("freeze %s: %w", fz, err)
	}
	deadline := time.Now().Add(freezeTimeout)
	for time.Now().Before(deadline) {
		s, err := cgroupv1.ReadFreezerState(fz)
		if err != nil {
			// Waiting cannot tell FROZEN any more; SIGKILL goes out
			// anyway, as it does at the timeout.
			k.log().Warn("cannot read freezer.state; killing without waiting for FROZEN", "cgroup", fz, "err", err)
			break
		}
		if s == cgroupv1.Frozen {
			break
		}
		time.Sleep(time.Millisecond)
	}
	pids, err := ProcsRecursive(fz)
	if err != nil {
		return err
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	// Anything still in the memory cgroup (nothing, unless it was
	// outside the freezer) gets SIGKILL too.
	return killLoop(t.Cgroup)
}

// moveThreads moves every thread of src's subtree into the v1 cgroup dst
// through the tasks files, pass after pass until a pass finds nothing to
// move or the deadline passes; it returns the threads it could not move.
//
// Threads, not cgroup.procs: a thread group is listed in cgroup.procs of
// the memory cgroup while any of its threads is there, and a task that has
// begun to exit stays listed until its memory is freed (hundreds of
// milliseconds for gigabytes), yet the kernel never moves it
// (cgroup_migrate_add_task skips PF_EXITING), so a check by cgroup.procs
// saw it escape forever. An exiting thread can no longer fork: it is left
// where it is and the SIGKILL loop waits for it.
func moveThreads(src, dst string, deadline time.Time) ([]int, error) {
	tried := map[int]bool{}
	exiting := map[int]bool{}
	for {
		tids, err := cgroup.ReadTasksRecursive(src)
		if err != nil {
			return nil, err
		}
		in, err := cgroup.ReadTasks(dst)
		if err != nil {
			return nil, err
		}
		inDst := make(map[int]bool, len(in))
		for _, tid := range in {
			inDst[tid] = true
		}
		var left []int
		for _, tid := range tids {
			if inDst[tid] || exiting[tid] {
				continue
			}
			if tried[tid] {
				// Written once and still outside: exiting, or gone.
				if st, err := host.ReadProcStat("/proc", tid); err != nil || st.Exiting() {
					exiting[tid] = true
					continue
				}
			}
			tried[tid] = true
			// ESRCH: it exited meanwhile, which is what we want.
			cgroup.WriteTasks(dst, tid)
			left = append(left, tid)
		}
		if len(left) == 0 {
			return nil, nil
		}
		if time.Now().After(deadline) {
			return left, nil
		}
	}
}

// killLoop sends SIGKILL to every process of dir until none is left or a
// pass finds nothing new (a bounded best effort without a freezer).
func killLoop(dir string) error {
	for i := 0; i < 100; i++ {
		pids, err := ProcsRecursive(dir)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// waitEmpty waits up to d for dir's subtree to hold no process.
func (k *Killer) waitEmpty(ctx context.Context, dir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		pids, err := ProcsRecursive(dir)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && len(pids) == 0) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

// ProcsRecursive lists the processes of dir and of its descendant cgroups
// (cgroup.ReadCgroupProcsRecursive: a bad cgroup.procs token is an error
// naming the file and token; dir gone is a *cgroup.VanishedError, which the
// kill path treats as gone).
func ProcsRecursive(dir string) ([]int, error) {
	return cgroup.ReadCgroupProcsRecursive(dir)
}
