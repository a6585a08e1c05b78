// Package sandboxtest holds the helpers the real-cgroup tests share: mode
// checks that skip with a reason on the host and fail in the VM, throwaway
// sandboxes, hogs started from the test binary, and descriptor counts.
//
// A test package that starts hogs must call hog.MaybeRun() in its TestMain.
package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// InVM reports whether the test runs in the cgroup v2 VM harness.
func InVM() bool { return os.Getenv("EVICTD_TEST_VM") == "1" }

// NeedMode skips unless running as root with the memory controller in mode
// want. Inside the VM (cgroup v2 by construction) a v2 test fails instead of
// skipping, because there a skip would hide a missing feature.
func NeedMode(t testing.TB, want sandbox.Mode) {
	t.Helper()
	cgrouptest.NeedReal(t, os.Geteuid() == 0, "root to create cgroups")
	got, err := sandbox.DetectMode()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		if want == sandbox.V2 && InVM() {
			t.Fatalf("in the VM the memory controller must be on cgroup v2, found %s", got)
		}
		if want == sandbox.V1 {
			// The host tier is where v1 tests run: there a skip hides them
			// (cgrouptest.NeedReal fails it when the tier is required).
			cgrouptest.NeedReal(t, false, "the memory controller on cgroup v1 (found %s)", got)
		}
		where := "the VM tier (scripts/test-vm.sh) runs it"
		t.Skipf("memory controller is on cgroup %s here; this test needs %s (%s)", got, want, where)
	}
}

// NeedRoot skips unless root and some memory cgroup mode is available.
func NeedRoot(t testing.TB) sandbox.Mode {
	t.Helper()
	cgrouptest.NeedReal(t, os.Geteuid() == 0, "root to create cgroups")
	m, err := sandbox.DetectMode()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// New makes a sandbox removed at cleanup (its removal failing fails the test).
func New(t testing.TB, limit int64) *sandbox.Sandbox {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	s, err := sandbox.New(fmt.Sprintf("/evictd-test-%s-%d", filepath.Base(name), os.Getpid()), limit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Hog is a running hog process.
type Hog struct {
	Pid  int
	Done chan struct{} // closed when it has exited
	Err  error         // exit status, valid after Done
}

// StartHog runs the test binary as a hog with script in the cgroup c.
func StartHog(t testing.TB, script string, c sandbox.Cgroup) *Hog {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := hog.Command(exe, script, c.Dirs()...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Hog{Pid: cmd.Process.Pid, Done: make(chan struct{})}
	go func() { h.Err = cmd.Wait(); close(h.Done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-h.Done })
	return h
}

// CountFDs counts this process's open descriptors.
func CountFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// WaitIgnoresTerm waits until pid ignores SIGTERM (the SigIgn mask of
// /proc/PID/status): a hog scripted "ignore-term" installs it only after it
// joined its cgroups, and a SIGTERM before that would end it.
func WaitIgnoresTerm(t testing.TB, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<(uint(syscall.SIGTERM)-1)) != 0 {
					return
				}
			}
		}
	}
	t.Fatalf("process %d never ignored SIGTERM", pid)
}
