// Package v2smoke proves, on a real kernel, that the cgroup v2 hierarchy the
// VM tier provides works the way evictd relies on, whatever else exists yet:
// limits, memory.current, memory.events (max, oom, oom_kill, high), PSI
// triggers on a cgroup's memory.pressure, pids.max, poll on events files,
// cgroup.kill, and memory.min/low protection under reclaim into zram swap.
// On the host (our memory controller is on cgroup v1) every test skips with
// the reason; in the VM (`make test-vm`) nothing may skip.
package v2smoke

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/test/vm/vmtest"
)

func TestMain(m *testing.M) { vmtest.Main(m) }

const mebibyte = 1 << 20

// Limits that only guard against a hang: the VM is software-emulated and the
// machine shared, so they are generous. They are never timing assertions.
const (
	readyLimit = 60 * time.Second
	eventLimit = 60 * time.Second
)

// TestHierarchy checks what the harness promises: a pure cgroup2 mount with
// memory_recursiveprot, the four controllers enabled, and PSI.
func TestHierarchy(t *testing.T) {
	root := vmtest.Cgroup2(t, "memory", "pids", "cpu", "io")
	vmtest.PSI(t)
	opts := vmtest.MountOptions(t, root)
	if vmtest.InVM() && !slices.Contains(opts, "memory_recursiveprot") {
		t.Errorf("cgroup2 at %s mounted with %v, want memory_recursiveprot", root, opts)
	}
	cg := vmtest.NewCgroup(t, root)
	got := strings.Fields(vmtest.ReadFile(t, cg, "cgroup.controllers"))
	for _, c := range []string{"memory", "pids", "cpu", "io"} {
		if !slices.Contains(got, c) {
			t.Errorf("a child cgroup's cgroup.controllers is %v, missing %s", got, c)
		}
	}
	for _, f := range []string{"memory.events", "memory.events.local", "memory.pressure", "cgroup.kill", "cgroup.events", "pids.max", "memory.oom.group"} {
		if _, err := os.Stat(filepath.Join(cg, f)); err != nil {
			t.Errorf("child cgroup lacks %s: %v", f, err)
		}
	}
}

// TestMemoryCurrent: a 32 MiB hog under memory.max=64M is charged about its
// size and not limited.
func TestMemoryCurrent(t *testing.T) {
	root := vmtest.Cgroup2(t, "memory")
	cg := vmtest.NewCgroup(t, root)
	vmtest.WriteFile(t, cg, "memory.max", "64M")
	if got := vmtest.ReadUint(t, cg, "memory.max"); got != 64*mebibyte {
		t.Fatalf("memory.max reads %d after writing 64M, want %d", got, 64*mebibyte)
	}
	hog := vmtest.StartHelper(t, cg, "hog", "32")
	hog.Ready(t, readyLimit)

	cur := vmtest.ReadUint(t, cg, "memory.current")
	if cur < 32*mebibyte || cur > 64*mebibyte {
		t.Errorf("memory.current = %d bytes (%.1f MiB) with a 32 MiB hog under 64M, want between 32 and 64 MiB", cur, float64(cur)/mebibyte)
	}
	procs := strings.Fields(vmtest.ReadFile(t, cg, "cgroup.procs"))
	if !slices.Contains(procs, strconv.Itoa(hog.Pid())) {
		t.Errorf("cgroup.procs = %v, want the hog's pid %d (started with CLONE_INTO_CGROUP)", procs, hog.Pid())
	}
	if ev := vmtest.ReadKeyed(t, cg, "cgroup.events"); ev["populated"] != 1 {
		t.Errorf("cgroup.events = %v with the hog running, want populated 1", ev)
	}
	if ev := vmtest.ReadKeyed(t, cg, "memory.events"); ev["max"] != 0 || ev["oom_kill"] != 0 {
		t.Errorf("memory.events = %v for a hog well under its limit, want max 0 and oom_kill 0", ev)
	}
	stat := vmtest.ReadKeyed(t, cg, "memory.stat")
	if stat["anon"] < 32*mebibyte {
		t.Errorf("memory.stat anon = %d, want at least the hog's 32 MiB", stat["anon"])
	}
}

// TestOOMEvents: a 64 MiB hog under memory.max=32M is OOM-killed; memory.events
// counts max, oom and oom_kill, and poll(POLLPRI) on memory.events wakes.
func TestOOMEvents(t *testing.T) {
	root := vmtest.Cgroup2(t, "memory")
	cg := vmtest.NewCgroup(t, root)
	vmtest.WriteFile(t, cg, "memory.max", "32M")
	vmtest.WriteFile(t, cg, "memory.oom.group", "1")

	events, err := os.Open(filepath.Join(cg, "memory.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	buf := make([]byte, 4096)
	if _, err := events.Read(buf); err != nil { // arm: poll reports changes after a read
		t.Fatal(err)
	}

	hog := vmtest.StartHelper(t, cg, "hog", "64")
	woke, err := vmtest.PollPri(events, eventLimit)
	if err != nil || !woke {
		t.Errorf("poll(POLLPRI) on memory.events: woke=%v err=%v, want a wake-up at the first event", woke, err)
	}
	st := hog.Wait(t, eventLimit)
	if sig := vmtest.KilledBy(st); sig != syscall.SIGKILL {
		t.Errorf("the hog ended with %v, want killed by SIGKILL (the OOM killer)", st)
	}
	ev := vmtest.ReadKeyed(t, cg, "memory.events")
	// With memory.oom.group=1 one victim can be counted twice: assert >=.
	for _, k := range []string{"max", "oom", "oom_kill"} {
		if ev[k] < 1 {
			t.Errorf("memory.events %s = %d after an OOM kill, want >= 1 (all: %v)", k, ev[k], ev)
		}
	}
	if local := vmtest.ReadKeyed(t, cg, "memory.events.local"); local["oom_kill"] < 1 {
		t.Errorf("memory.events.local = %v, want oom_kill >= 1 in the cgroup itself", local)
	}
}

// TestPSITrigger: a hog pushed over memory.high (with no swap to go to) is
// throttled, and a PSI trigger on the cgroup's memory.pressure fires.
func TestPSITrigger(t *testing.T) {
	root := vmtest.Cgroup2(t, "memory")
	vmtest.PSI(t)
	cg := vmtest.NewCgroup(t, root)
	vmtest.WriteFile(t, cg, "memory.high", "16M")
	vmtest.WriteFile(t, cg, "memory.max", "256M")

	p, err := os.OpenFile(filepath.Join(cg, "memory.pressure"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// 100 ms of "some" stall in a 1 s window. Root may use any window from
	// 500 ms to 10 s; an unprivileged writer needs a multiple of 2 s.
	if _, err := p.Write([]byte("some 100000 1000000\x00")); err != nil {
		t.Fatalf("writing a PSI trigger to memory.pressure: %v", err)
	}
	hog := vmtest.StartHelper(t, cg, "hog", "48")
	woke, err := vmtest.PollPri(p, eventLimit)
	if err != nil || !woke {
		t.Fatalf("PSI trigger on memory.pressure: woke=%v err=%v, want it to fire while the hog is throttled", woke, err)
	}
	if hog.Exited() {
		t.Errorf("the hog exited (%v); memory.high must throttle, not kill", hog.Cmd.ProcessState)
	}
	if ev := vmtest.ReadKeyed(t, cg, "memory.events"); ev["high"] < 1 {
		t.Errorf("memory.events = %v, want high >= 1", ev)
	}
	some := strings.Fields(strings.SplitN(vmtest.ReadFile(t, cg, "memory.pressure"), "\n", 2)[0])
	if len(some) != 5 || some[0] != "some" || !strings.HasPrefix(some[4], "total=") || some[4] == "total=0" {
		t.Errorf("memory.pressure first line %q, want some avg10=.. avg60=.. avg300=.. total=<non-zero>", some)
	}
}

// TestPidsMax: pids.max refuses the process over the limit, and pids.events
// counts the refusal.
func TestPidsMax(t *testing.T) {
	root := vmtest.Cgroup2(t, "pids")
	cg := vmtest.NewCgroup(t, root)
	first := vmtest.StartHelper(t, cg, "sleep")
	first.Ready(t, readyLimit)
	// A Go program runs several threads, each a task that pids counts; cap
	// the group at what it holds now, so that the next fork is refused.
	cur := vmtest.ReadUint(t, cg, "pids.current")
	if cur < 1 {
		t.Fatalf("pids.current = %d with one helper running, want >= 1", cur)
	}
	vmtest.WriteFile(t, cg, "pids.max", strconv.FormatUint(cur, 10))
	if _, err := vmtest.TryStartHelper(t, cg, "sleep"); err == nil {
		t.Errorf("a process started in a cgroup at its pids.max=%d", cur)
	} else if !errors.Is(err, syscall.EAGAIN) {
		t.Errorf("starting a process over pids.max: %v, want EAGAIN", err)
	}
	if ev := vmtest.ReadKeyed(t, cg, "pids.events"); ev["max"] < 1 {
		t.Errorf("pids.events = %v after a refused fork, want max >= 1", ev)
	}
}

// TestKillGroup: writing 1 to cgroup.kill kills every process in the group,
// poll on cgroup.events wakes, and it reports populated 0.
func TestKillGroup(t *testing.T) {
	root := vmtest.Cgroup2(t, "memory")
	cg := vmtest.NewCgroup(t, root)
	var helpers []*vmtest.Helper
	for range 3 {
		h := vmtest.StartHelper(t, cg, "sleep")
		h.Ready(t, readyLimit)
		helpers = append(helpers, h)
	}
	events, err := os.Open(filepath.Join(cg, "cgroup.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	buf := make([]byte, 4096)
	n, err := events.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(buf[:n]), "populated 1") {
		t.Fatalf("cgroup.events = %q with three sleepers, want populated 1", buf[:n])
	}

	vmtest.WriteFile(t, cg, "cgroup.kill", "1")
	for _, h := range helpers {
		if sig := vmtest.KilledBy(h.Wait(t, eventLimit)); sig != syscall.SIGKILL {
			t.Errorf("helper %d ended by %v, want SIGKILL from cgroup.kill", h.Pid(), sig)
		}
	}
	// cgroup.events changes once the last task has left; poll until it says so.
	deadline := time.Now().Add(eventLimit)
	for {
		if vmtest.ReadKeyed(t, cg, "cgroup.events")["populated"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup.events still populated %s after cgroup.kill", eventLimit)
		}
		if _, err := vmtest.PollPri(events, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if procs := strings.TrimSpace(vmtest.ReadFile(t, cg, "cgroup.procs")); procs != "" {
		t.Errorf("cgroup.procs = %q after cgroup.kill, want empty", procs)
	}
}

// TestUserland: the VM's /bin is busybox, so tests (and reclaim hooks) can run
// ordinary commands there as on the host.
func TestUserland(t *testing.T) {
	out, err := exec.Command("sh", "-c", "echo $((6*7)) | cat; sleep 0; true").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Fatalf("sh -c ...: %q, %v; want 42 (the VM's /bin is busybox-static)", out, err)
	}
}

// TestProtectionUnderReclaim: with swap to reclaim into, a parent's
// memory.max forces reclaim, and the child protected by memory.min (hard) or
// memory.low (soft, honoured while the unprotected sibling has memory to
// give) keeps its memory while the unprotected sibling is swapped out. This is
// the kubelet's memory QoS arithmetic meeting the kernel.
func TestProtectionUnderReclaim(t *testing.T) {
	root := vmtest.Cgroup2(t, "memory")
	vmtest.Swap(t, "256M")
	for _, knob := range []string{"memory.min", "memory.low"} {
		t.Run(knob, func(t *testing.T) {
			parent := vmtest.NewCgroup(t, root)
			vmtest.WriteFile(t, parent, "cgroup.subtree_control", "+memory")
			vmtest.WriteFile(t, parent, "memory.max", "48M")
			protected, unprotected := filepath.Join(parent, "protected"), filepath.Join(parent, "unprotected")
			for _, d := range []string{protected, unprotected} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			vmtest.WriteFile(t, protected, knob, "24M")

			vmtest.StartHelper(t, protected, "hog", "20").Ready(t, readyLimit)
			// 20 + 40 MiB under a 48 MiB parent: at least 12 MiB must go to swap.
			vmtest.StartHelper(t, unprotected, "hog", "40").Ready(t, readyLimit)

			cur := vmtest.ReadUint(t, protected, "memory.current")
			swapped := vmtest.ReadUint(t, protected, "memory.swap.current")
			otherSwapped := vmtest.ReadUint(t, unprotected, "memory.swap.current")
			if otherSwapped < 8*mebibyte {
				t.Errorf("unprotected sibling has %.1f MiB in swap, want the reclaim (>= 8 MiB) to come from it", float64(otherSwapped)/mebibyte)
			}
			if swapped != 0 || cur < 20*mebibyte {
				t.Errorf("%s=24M child: memory.current %.1f MiB, memory.swap.current %.1f MiB; want its 20 MiB kept in memory and none swapped",
					knob, float64(cur)/mebibyte, float64(swapped)/mebibyte)
			}
		})
	}
}
