package actuate

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	hog.MaybeRun()
	os.Exit(m.Run())
}

func killer(s *sandbox.Sandbox) *Killer {
	if s.Mode == sandbox.V2 {
		return &Killer{Mode: V2}
	}
	return &Killer{Mode: V1, MemoryRoot: sandbox.V1Memory, FreezerRoot: sandbox.V1Freezer}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// waitProcs waits until the cgroup holds n processes (hogs join it themselves).
func waitProcs(t *testing.T, dir string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if p, _ := ProcsRecursive(dir); len(p) >= n {
			return
		}
	}
	t.Fatalf("%s never held %d processes", dir, n)
}

// SIGTERM ends well-behaved workloads within the grace period: no hard kill.
func TestKillGraceful(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("web")
	a := sandboxtest.StartHog(t, "alloc 8Mi; hold", c)
	b := sandboxtest.StartHog(t, "hold", c)
	waitProcs(t, c.Memory, 2)
	res, err := killer(s).Kill(context.Background(), Target{Name: "web", Cgroup: c.Memory}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Gone || res.HardKill != "" || len(res.Terminated) != 2 {
		t.Fatalf("result %+v: want gone after SIGTERM alone, 2 terminated", res)
	}
	<-a.Done
	<-b.Done
}

// A workload ignoring SIGTERM is hard-killed at the grace deadline.
func TestKillGraceDeadline(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("stubborn")
	h := sandboxtest.StartHog(t, "ignore-term; hold", c)
	waitProcs(t, c.Memory, 1)
	time.Sleep(50 * time.Millisecond) // let it install the SIG_IGN after joining
	res, err := killer(s).Kill(context.Background(), Target{Name: "stubborn", Cgroup: c.Memory}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := "freezer+SIGKILL"
	if mode == sandbox.V2 {
		want = "cgroup.kill"
	}
	if !res.Gone || res.HardKill != want {
		t.Fatalf("result %+v: want gone through %s", res, want)
	}
	if res.Elapsed < 200*time.Millisecond {
		t.Fatalf("hard kill before the grace deadline: %s", res.Elapsed)
	}
	<-h.Done
}

// A process that forks as fast as it can cannot escape the hard kill, and
// the v1 freezer cgroup the killer made is removed afterwards.
func TestKillForkLoop(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("forker")
	joined := c
	if mode == sandbox.V1 {
		// The hog joins the memory cgroup only, so the killer must make
		// the freezer cgroup itself (the host-mode case, where workloads
		// are not in a freezer cgroup).
		if err := cgroup.Rmdir(c.Freezer); err != nil {
			t.Fatal(err)
		}
		joined.Freezer = ""
	}
	sandboxtest.StartHog(t, "forkloop", joined)
	waitProcs(t, c.Memory, 5)
	k := killer(s)
	res, err := k.Kill(context.Background(), Target{Name: "forker", Cgroup: c.Memory}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Gone {
		t.Fatalf("forkloop survived: %+v", res)
	}
	time.Sleep(100 * time.Millisecond)
	if p, _ := ProcsRecursive(c.Memory); len(p) != 0 {
		t.Fatalf("processes reappeared after the kill: %v", p)
	}
	if mode == sandbox.V1 {
		if _, err := os.Stat(c.Freezer); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("freezer cgroup %s left behind: %v", c.Freezer, err)
		}
	}
}

// A workload whose thread-group leader has exited while its other threads
// go on (after pthread_exit in main, or for a moment while a multi-threaded
// process exits) is killed: the kernel moves its live threads into the v1
// freezer cgroup and lists the group there. On v2, Linux 6.1's cgroup.kill
// alone left it running: it signals the exited leader thread only.
func TestKillLeaderExited(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("zombie-leader")
	joined := c
	if mode == sandbox.V1 {
		// As in host mode: the killer makes the freezer cgroup itself.
		if err := cgroup.Rmdir(c.Freezer); err != nil {
			t.Fatal(err)
		}
		joined.Freezer = ""
	}
	h := sandboxtest.StartHog(t, "ignore-term; threads 2; alloc 16Mi; leader-exit; hold", joined)
	waitProcs(t, c.Memory, 1)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := host.ReadProcStat("/proc", h.Pid)
		if err == nil && st.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hog's leader never exited: %+v %v", st, err)
		}
	}
	res, err := killer(s).Kill(context.Background(), Target{Name: "zombie-leader", Cgroup: c.Memory}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Gone {
		t.Fatalf("workload with an exited leader survived the kill: %+v", res)
	}
	<-h.Done
}

// The v1 hard kill of a workload that is already exiting, and slowly: a
// process freeing gigabytes (the kernel OOM killer's victim, or one that
// obeyed SIGTERM just as the grace period ran out) stays listed in its
// memory cgroup's cgroup.procs until its memory is freed, and the kernel
// does not move an exiting task into another cgroup (cgroup_migrate_add_task
// skips PF_EXITING). The kill used to count it as escaping the freezer on
// every pass and failed after 1,000 passes ("processes of … kept escaping
// the freezer", seen against a two-thread allocator at its memory limit);
// 4 GiB take about 250 ms to free here, 1,000 passes about 50 ms.
func TestKillWhileExiting(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sandboxtest.NeedMode(t, sandbox.V1)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("exiting")
	joined := c
	if err := cgroup.Rmdir(c.Freezer); err != nil {
		t.Fatal(err)
	}
	joined.Freezer = ""
	const size = 3 << 30
	h := sandboxtest.StartHog(t, "threads 2; alloc 3Gi; hold", joined)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		u, err := cgroupv1.ReadMemoryUsageInBytes(c.Memory)
		if err == nil && u >= size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hog never reached %d bytes: %d %v", size, u, err)
		}
	}
	syscall.Kill(h.Pid, syscall.SIGKILL) // it starts its long exit
	res, err := killer(s).Kill(context.Background(), Target{Name: "exiting", Cgroup: c.Memory}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Gone {
		t.Fatalf("exiting workload not gone after the kill: %+v", res)
	}
	<-h.Done
}

func TestKillDryRunChangesNothing(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("batch")
	h := sandboxtest.StartHog(t, "hold", c)
	waitProcs(t, c.Memory, 1)
	k := killer(s)
	k.DryRun = true
	res, err := k.Kill(context.Background(), Target{Name: "batch", Cgroup: c.Memory}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.HardKill == "" || len(res.Terminated) != 1 || res.Terminated[0] != h.Pid {
		t.Fatalf("dry-run result %+v does not describe the kill", res)
	}
	time.Sleep(50 * time.Millisecond)
	if !alive(h.Pid) {
		t.Fatal("dry run killed the workload")
	}
}

func TestKillRefusesSelf(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("me")
	h := sandboxtest.StartHog(t, "hold", c)
	waitProcs(t, c.Memory, 1)
	k := killer(s)
	k.Self = h.Pid // pretend the hog is evictd
	if _, err := k.Kill(context.Background(), Target{Name: "me", Cgroup: c.Memory}, 0); !errors.Is(err, ErrSelf) {
		t.Fatalf("got %v, want ErrSelf", err)
	}
	if !alive(h.Pid) {
		t.Fatal("killed itself")
	}
}

func TestKillMissingCgroup(t *testing.T) {
	_, err := (&Killer{Mode: V1}).Kill(context.Background(), Target{Name: "gone", Cgroup: filepath.Join(t.TempDir(), "nope")}, 0)
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("got %v, want an error naming the workload", err)
	}
}

// A removed cgroup is the typed vanished error (the kill path's "gone"),
// not a bare fs error, and waitEmpty treats it as empty.
func TestProcsRecursiveVanished(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := ProcsRecursive(dir)
	if !cgroup.IsVanished(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want a *cgroup.VanishedError", err)
	}
	if !(&Killer{}).waitEmpty(context.Background(), dir, 0) {
		t.Error("waitEmpty on a vanished cgroup: false, want true")
	}
}

// A cgroup.procs token that is not a PID is an error naming the file and the
// token; the old parser dropped it and killed the rest. The kernel never
// writes one, so a plain directory stands in for the cgroup.
func TestProcsRecursiveBadToken(t *testing.T) {
	dir := t.TempDir()
	procs := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(procs, []byte("12\n1x3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pids, err := ProcsRecursive(dir)
	if err == nil || !strings.Contains(err.Error(), procs) || !strings.Contains(err.Error(), `"1x3"`) {
		t.Fatalf("got %v, %v; want an error naming %s and \"1x3\"", pids, err, procs)
	}
}
