package notify

import (
	"os"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/workload/sandbox"

	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	hog.MaybeRun() // the test binary doubles as the memory hog
	os.Exit(m.Run())
}

var (
	needMode   = sandboxtest.NeedMode
	needRoot   = sandboxtest.NeedRoot
	newSandbox = sandboxtest.New
	countFDs   = sandboxtest.CountFDs
)

type hogProc struct{ done chan struct{} }

func startHog(t *testing.T, script string, c sandboxCgroup) hogProc {
	return hogProc{done: sandboxtest.StartHog(t, script, c).Done}
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

type sandboxCgroup = sandbox.Cgroup
