package notify

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

func TestMain(m *testing.M) {
	hog.MaybeRun() // the test binary doubles as the memory hog
	os.Exit(m.Run())
}

// inVM reports whether the test runs in the cgroup v2 VM harness.
func inVM() bool { return os.Getenv("EVICTD_TEST_VM") == "1" }

// needMode skips unless the memory controller is in mode want. Inside the VM
// (cgroup v2 by construction) a v2 test must not skip.
func needMode(t *testing.T, want sandbox.Mode) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	got, err := sandbox.DetectMode()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		if want == sandbox.V2 && inVM() {
			t.Fatalf("in the VM the memory controller must be on cgroup v2, found %s", got)
		}
		t.Skipf("memory controller is on cgroup %s here; this test needs %s (run in the VM tier for v2)", got, want)
	}
}

func newSandbox(t *testing.T, limit int64) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.New(fmt.Sprintf("/evictd-test-%s-%d", filepath.Base(t.Name()), os.Getpid()), limit)
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

func startHog(t *testing.T, script string, c sandbox.Cgroup) *hogProc {
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
	h := &hogProc{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { h.err = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-h.done })
	return h
}

type hogProc struct {
	pid  int
	done chan struct{} // closed when the hog has exited
	err  error         // its exit status, valid after done
}

func waitWake(t *testing.T, w *Waker, within time.Duration, what string) Wake {
	t.Helper()
	select {
	case x := <-w.C():
		return x
	case <-time.After(within):
		t.Fatalf("no wake-up within %s: %s", within, what)
	}
	return Wake{}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
