package actuate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// A stop of evictd during a grace period cuts the wait but kills nothing:
// the workload keeps the rest of its grace period (it used to be
// hard-killed at once).
func TestKillInterruptedDuringGraceKillsNothing(t *testing.T) {
	sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("stubborn")
	h := sandboxtest.StartHog(t, "ignore-term; hold", c)
	waitProcs(t, c.Memory, 1)
	sandboxtest.WaitIgnoresTerm(t, h.Pid)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := killer(s).Kill(ctx, Target{Name: "stubborn", Cgroup: c.Memory}, time.Minute)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err %v, want ErrInterrupted", err)
	}
	if res.HardKill != "" || res.Gone || len(res.Terminated) != 1 {
		t.Fatalf("result %+v: want SIGTERM sent and nothing killed", res)
	}
	if !alive(h.Pid) {
		t.Fatal("the workload was killed although its grace period had not run out")
	}
}

// Finish completes a kill an earlier run began: no second SIGTERM, nothing
// killed before the deadline, the hard kill after it.
func TestFinishWaitsForTheDeadline(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("stubborn")
	h := sandboxtest.StartHog(t, "ignore-term; hold", c)
	waitProcs(t, c.Memory, 1)
	sandboxtest.WaitIgnoresTerm(t, h.Pid)
	deadline := time.Now().Add(time.Second)
	res, err := killer(s).Finish(context.Background(), Target{Name: "stubborn", Cgroup: c.Memory}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("the workload outlived Finish")
	}
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("killed %s before the deadline", deadline.Sub(now))
	}
	want := "freezer+SIGKILL"
	if mode == sandbox.V2 {
		want = "cgroup.kill"
	}
	if res.HardKill != want || len(res.Terminated) != 0 || !res.Gone {
		t.Fatalf("result %+v: want %s without a SIGTERM, gone", res, want)
	}
	// Interrupted before the deadline, it kills nothing.
	c2, _ := s.Child("again")
	h2 := sandboxtest.StartHog(t, "ignore-term; hold", c2)
	waitProcs(t, c2.Memory, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := killer(s).Finish(ctx, Target{Name: "again", Cgroup: c2.Memory}, time.Now().Add(time.Minute)); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted Finish: %v", err)
	}
	if !alive(h2.Pid) {
		t.Fatal("an interrupted Finish killed the workload")
	}
}

// A workload cgroup left frozen (a kill interrupted between its freeze and
// its thaw) is found and thawed; a dry run only reports it.
func TestThawLeftFrozenWorkload(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	s := sandboxtest.New(t, 0)
	c, _ := s.Child("frozen")
	other, _ := s.Child("running")
	h := sandboxtest.StartHog(t, "hold", c)
	sandboxtest.StartHog(t, "hold", other)
	waitProcs(t, c.Memory, 1)
	waitProcs(t, other.Memory, 1)
	freeze := func(v string) {
		t.Helper()
		var err error
		if mode == sandbox.V2 {
			err = cgroupv2.WriteCgroupFreeze(c.Memory, v == "FROZEN")
		} else {
			err = cgroupv1.WriteFreezerState(c.Freezer, cgroupv1.FreezerState(v))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	frozen := func() bool {
		if mode == sandbox.V2 {
			b, _ := os.ReadFile(filepath.Join(c.Memory, "cgroup.events"))
			return strings.Contains(string(b), "frozen 1")
		}
		b, _ := os.ReadFile(filepath.Join(c.Freezer, "freezer.state"))
		return strings.TrimSpace(string(b)) != "THAWED"
	}
	freeze("FROZEN")
	t.Cleanup(func() { freeze("THAWED") })
	for deadline := time.Now().Add(30 * time.Second); !frozen(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cgroup never froze")
		}
	}
	dry := killer(s)
	dry.DryRun = true
	found, err := dry.ThawLeft(s.Parent.Memory)
	if err != nil || len(found) != 1 || !frozen() {
		t.Fatalf("dry run: found %+v, %v, still frozen %v; want one found and left frozen", found, err, frozen())
	}
	found, err = killer(s).ThawLeft(s.Parent.Memory)
	if err != nil {
		t.Fatal(err)
	}
	want := c.Memory
	if mode == sandbox.V1 {
		want = c.Freezer
	}
	if len(found) != 1 || found[0].Cgroup != want || found[0].Procs != 1 {
		t.Fatalf("found %+v, want %s with 1 process", found, want)
	}
	if frozen() {
		t.Fatal("still frozen")
	}
	// Thawed, it runs again: a SIGKILL now ends it.
	syscall.Kill(h.Pid, syscall.SIGKILL)
	select {
	case <-h.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("the thawed workload does not run")
	}
	if found, err := killer(s).ThawLeft(s.Parent.Memory); err != nil || len(found) != 0 {
		t.Fatalf("a second look: %+v, %v; want nothing", found, err)
	}
}
