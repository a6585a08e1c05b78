package actuate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// holdSandbox is a 512 MiB sandbox whose child runs a two-thread allocator
// that ignores SIGTERM: it takes 128 MiB, waits at a gate, then wants 2 GiB
// at the machine's full speed: left alone, the kernel OOM killer kills it
// within a fraction of a second. The hold is put on at the gate, so that
// the test does not race the allocator (the agent's tests and the
// benchmarks do that).
const (
	holdLimit   = 512 << 20
	holdAtLeast = 128 << 20 // the hold is put on once the child uses this much
	holdScript  = "ignore-term; threads 2; alloc 128Mi; await %s; alloc 2Gi; hold"
)

// gate returns a path for the hog's await step and a func that opens it.
func gate(t *testing.T) (string, func()) {
	p := filepath.Join(t.TempDir(), "gate")
	return p, func() {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func memUsage(s *sandbox.Sandbox, dir string) (uint64, error) {
	if s.Mode == sandbox.V2 {
		return cgroupv2.ReadMemoryCurrent(dir)
	}
	return cgroupv1.ReadMemoryUsageInBytes(dir)
}

func waitUsage(t *testing.T, s *sandbox.Sandbox, dir string, atLeast uint64) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		u, err := memUsage(s, dir)
		if err == nil && u >= atLeast {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never used %d bytes: %d %v", dir, atLeast, u, err)
		}
	}
}

// waitStopped waits until the kernel says it is holding the child back: on
// v1 its allocating threads sleep at the limit (memory.oom_control
// under_oom), on v2 memory.events counts throttling above memory.high.
func waitStopped(t *testing.T, s *sandbox.Sandbox, dir string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Millisecond) {
		if s.Mode == sandbox.V2 {
			if ev, err := cgroupv2.ReadMemoryEvents(dir); err == nil && ev.High > 0 {
				return
			}
		} else if oc, err := cgroupv1.ReadMemoryOOMControl(dir); err == nil && oc.UnderOOM {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel never held %s back", dir)
		}
	}
}

// The memory hold stops a SIGTERM-ignoring two-thread allocator at full
// speed, so that the eviction's grace period passes and its hard kill ends
// it with no kernel OOM kill; without the hold the same workload is
// OOM-killed (the control, so that the test can fail).
func TestHoldMemory(t *testing.T) {
	sandboxtest.NeedRoot(t)
	for _, hold := range []bool{false, true} {
		name := map[bool]string{false: "without-hold-oom", true: "held"}[hold]
		t.Run(name, func(t *testing.T) {
			s, c, h, open, k := gatedHog(t)
			if !hold {
				open()
				select {
				case <-h.Done:
				case <-time.After(60 * time.Second):
					t.Fatal("the unheld hog was never OOM-killed")
				}
				if oom, _ := s.OOM(); oom.Kills == 0 {
					t.Fatalf("the unheld hog ended without a kernel OOM kill: %v", h.Err)
				}
				return
			}
			hd, err := k.Hold(Target{Name: "hog", Cgroup: c.Memory}, Memory)
			if err != nil {
				t.Fatal(err)
			}
			want := map[sandbox.Mode]string{sandbox.V1: MechMemoryLimit, sandbox.V2: MechMemoryHigh}[s.Mode]
			// v1: just above the usage; v2: memoryHighUnder below it, in
			// whole pages.
			low := uint64(holdAtLeast)
			if s.Mode == sandbox.V2 {
				low = (low - low*memoryHighUnder/100) &^ (pageSize - 1)
			}
			if hd.Mechanism != want || hd.Limit < low || hd.Limit >= holdLimit {
				t.Fatalf("hold %+v: want %s between %d and %d", hd, want, low, holdLimit)
			}
			t.Logf("%s in %s", hd, hd.Took)
			open()
			waitStopped(t, s, c.Memory)
			if s.Mode == sandbox.V1 {
				// A limit the kernel enforces: the usage cannot pass it,
				// but for the few pages it charges by force (a page table,
				// a dying task's last charges): 4 KiB over, seen once.
				if u, _ := memUsage(s, c.Memory); u > hd.Limit+1<<20 {
					t.Fatalf("usage %d above the held limit %d", u, hd.Limit)
				}
			}
			res, err := k.Kill(context.Background(), Target{Name: "hog", Cgroup: c.Memory}, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Gone {
				t.Fatalf("held hog not gone after the kill: %+v", res)
			}
			if s.Mode == sandbox.V1 && res.HardKill != "SIGKILL (held)" {
				t.Errorf("hard kill %q: a held v1 workload is killed without the freezer, which cannot freeze threads asleep at the limit", res.HardKill)
			}
			endHeld(t, s, h, hd, c.Memory)
		})
	}
}

// gatedHog starts holdScript's hog in a holdLimit sandbox and returns once
// it waits at its gate (open lets it on), with a killer for the sandbox.
func gatedHog(t *testing.T) (s *sandbox.Sandbox, c sandbox.Cgroup, h *sandboxtest.Hog, open func(), k *Killer) {
	t.Helper()
	s = sandboxtest.New(t, holdLimit)
	c, _ = s.Child("hog")
	path, open := gate(t)
	h = sandboxtest.StartHog(t, fmt.Sprintf(holdScript, path), c)
	waitUsage(t, s, c.Memory, holdAtLeast)
	return s, c, h, open, killer(s)
}

// endHeld waits for the killed hog h, checks that the kernel OOM killer
// never fired, releases its hold and checks its cgroup dir's limits.
func endHeld(t *testing.T, s *sandbox.Sandbox, h *sandboxtest.Hog, hd *Hold, dir string) {
	t.Helper()
	<-h.Done
	if oom, err := s.OOM(); err != nil || oom.Kills != 0 {
		t.Fatalf("kernel OOM kills with the hold: %+v %v", oom, err)
	}
	if err := hd.Release(); err != nil {
		t.Fatal(err)
	}
	checkReleased(t, s, dir)
}

// checkReleased checks that the child's limits are back to none.
func checkReleased(t *testing.T, s *sandbox.Sandbox, dir string) {
	t.Helper()
	if s.Mode == sandbox.V2 {
		if v, err := cgroupv2.ReadMemoryHigh(dir); err != nil || v != cgroup.Max {
			t.Errorf("memory.high after release: %d %v, want max", v, err)
		}
		return
	}
	if v, err := cgroupv1.ReadMemoryLimitInBytes(dir); err != nil || v < holdLimit {
		t.Errorf("memory.limit_in_bytes after release: %d %v, want unlimited", v, err)
	}
	if oc, err := cgroupv1.ReadMemoryOOMControl(dir); err != nil || oc.OOMKillDisable {
		t.Errorf("oom_kill_disable after release: %+v %v, want 0", oc, err)
	}
}

// A released hold lets the workload grow again: an eviction that is
// abandoned leaves the workload as it was.
func TestHoldReleaseLetsItGrow(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("batch")
	gate := sandboxtest.StartHog(t, "alloc 32Mi; sleep 1s; alloc 64Mi; hold", c)
	waitUsage(t, s, c.Memory, 32<<20)
	k := killer(s)
	hd, err := k.Hold(Target{Name: "batch", Cgroup: c.Memory}, Memory)
	if err != nil {
		t.Fatal(err)
	}
	if err := hd.Release(); err != nil {
		t.Fatal(err)
	}
	if err := hd.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	checkReleased(t, s, c.Memory)
	waitUsage(t, s, c.Memory, 96<<20)
	if k.Held(c.Memory) {
		t.Fatal("the killer still counts the released hold")
	}
	select {
	case <-gate.Done:
		t.Fatalf("the workload ended: %v", gate.Err)
	default:
	}
}

// A raised v1 hold lets the workload grow by what it was raised and then
// stops it again, with no kernel OOM kill; Release undoes both writes. On
// v2 a hold is not raised.
func TestHoldRaise(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s, c, h, open, k := gatedHog(t)
	hd, err := k.Hold(Target{Name: "hog", Cgroup: c.Memory}, Memory)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Release()
	if s.Mode == sandbox.V2 {
		if err := hd.Raise(1 << 20); !errors.Is(err, ErrNotRaisable) {
			t.Fatalf("Raise on a v2 hold: %v, want ErrNotRaisable", err)
		}
		return
	}
	open()
	waitStopped(t, s, c.Memory) // asleep at the limit: the usage stays
	at, err := memUsage(s, c.Memory)
	if err != nil {
		t.Fatal(err)
	}
	const more = 8 << 20
	if err := hd.Raise(more); err != nil {
		t.Fatal(err)
	}
	// more above the usage, give or take the pages charged by force at
	// the limit.
	if hd.Limit < at+more || hd.Limit > at+more+1<<20 {
		t.Fatalf("limit after Raise(%d): %d, want %d above the usage %d", more, hd.Limit, more, at)
	}
	if v, err := cgroupv1.ReadMemoryLimitInBytes(c.Memory); err != nil || v != hd.Limit {
		t.Fatalf("memory.limit_in_bytes after Raise: %d %v, want %d", v, err, hd.Limit)
	}
	// It grows into the room, asleep at the new limit again (the
	// kernel's own answer, not a timed wait).
	waitUsage(t, s, c.Memory, at+more-(1<<20))
	waitStopped(t, s, c.Memory)
	if u, _ := memUsage(s, c.Memory); u > hd.Limit+1<<20 {
		t.Fatalf("usage %d above the raised limit %d", u, hd.Limit)
	}
	if r := hd.Record(); len(r.Writes) != 3 {
		t.Fatalf("the hold's writes: %+v, want oom_control, the limit, its move", r.Writes)
	}
	if _, err := k.Kill(context.Background(), Target{Name: "hog", Cgroup: c.Memory}, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	endHeld(t, s, h, hd, c.Memory)
	if err := hd.Raise(more); !errors.Is(err, ErrNotRaisable) {
		t.Fatalf("Raise after Release: %v, want ErrNotRaisable", err)
	}
}

// The PID hold stops a fork loop: forks fail at pids.max, nothing is
// killed, and the kill that follows needs no freezer.
func TestHoldPIDs(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("forker")
	if mode == sandbox.V1 && c.Pids == "" {
		t.Fatal("no v1 pids hierarchy: the PID hold has nothing to write on this host")
	}
	sandboxtest.StartHog(t, "forkloop", c)
	waitProcs(t, c.Memory, 5)
	k := killer(s)
	if mode == sandbox.V1 {
		k.PidsRoot = sandbox.V1Pids
	}
	hd, err := k.Hold(Target{Name: "forker", Cgroup: c.Memory}, PIDs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %s", hd, hd.Took)
	dir := c.Memory
	if mode == sandbox.V1 {
		dir = c.Pids
	}
	// The kernel refuses forks past the limit: pids.events counts them
	// ("max"; the same file on v1 and v2).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		ev, err := cgroupv2.ReadPidsEvents(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Max > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fork was refused after the hold")
		}
	}
	// Forks that were under way as pids.max was written may still land,
	// but none after: the count no longer grows.
	c1, err := cgroupv2.ReadPidsCurrent(dir)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if c2, err := cgroupv2.ReadPidsCurrent(dir); err != nil || c2 > max(c1, hd.Limit) {
		t.Fatalf("pids.current grew from %d to %d (%v) under the held pids.max %d", c1, c2, err, hd.Limit)
	}
	res, err := k.Kill(context.Background(), Target{Name: "forker", Cgroup: c.Memory}, 0)
	if err != nil || !res.Gone {
		t.Fatalf("kill: %+v %v", res, err)
	}
	if err := hd.Release(); err != nil {
		t.Fatal(err)
	}
}

// Hold refuses the cgroup evictd runs in: a limit there would stall the
// agent itself.
func TestHoldRefusesSelf(t *testing.T) {
	k := &Killer{Mode: V1, MemoryRoot: "/sys/fs/cgroup/memory"}
	k.selfOnce.Do(func() {})
	k.selfCgroup = "/sys/fs/cgroup/memory/system.slice/evictd.service"
	for _, dir := range []string{"/sys/fs/cgroup/memory/system.slice", "/sys/fs/cgroup/memory/system.slice/evictd.service"} {
		if _, err := k.Hold(Target{Name: "x", Cgroup: dir}, Memory); !errors.Is(err, ErrSelf) {
			t.Errorf("Hold(%s) = %v, want ErrSelf", dir, err)
		}
	}
	if k.isSelf("/sys/fs/cgroup/memory/system.slice/evictd") {
		t.Error("a sibling whose name is a prefix counts as evictd's own cgroup")
	}
}

// A hold left by a process that died is undone from its record (what the
// agent keeps on disk while the hold is in force), and a file someone
// changed since is left alone.
func TestUndoRecord(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("left")
	sandboxtest.StartHog(t, "alloc 16Mi; hold", c)
	waitUsage(t, s, c.Memory, 16<<20)
	k := killer(s)
	hd, err := k.Hold(Target{Name: "left", Cgroup: c.Memory}, Memory)
	if err != nil {
		t.Fatal(err)
	}
	rec := hd.Record()
	if len(rec.Writes) == 0 || rec.Mechanism != hd.Mechanism {
		t.Fatalf("record %+v of hold %s", rec, hd)
	}
	// The crash comes once the hold's writes have landed (on v2 the
	// second runs on its own goroutine): nobody calls Release. A new
	// evictd finds the record.
	last := rec.Writes[len(rec.Writes)-1]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if cur, err := holdFiles[last.File].read(last.Dir); err == nil && cur == last.Wrote {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s never read %d", last.Dir, last.File, last.Wrote)
		}
	}
	undone, changed, err := UndoRecord(rec)
	if err != nil || undone != len(rec.Writes) || changed != 0 {
		t.Fatalf("UndoRecord: %d undone, %d changed, %v; want %d undone", undone, changed, err, len(rec.Writes))
	}
	checkReleased(t, s, c.Memory)
	// Undone again: every file now differs from what the hold wrote.
	if undone, changed, err = UndoRecord(rec); err != nil || undone != 0 || changed != len(rec.Writes) {
		t.Fatalf("second UndoRecord: %d undone, %d changed, %v", undone, changed, err)
	}
	// A record naming a file no hold writes is an error, not a write.
	if _, _, err := UndoRecord(HoldRecord{Writes: []FileWrite{{Dir: c.Memory, File: "cgroup.procs"}}}); err == nil {
		t.Fatal("a record naming cgroup.procs was accepted")
	}
}
