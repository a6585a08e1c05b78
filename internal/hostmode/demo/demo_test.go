package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
	"github.com/evictd/evictd/test/vm/vmtest"
)

func TestMain(m *testing.M) {
	hog.MaybeRun() // the demo's workloads are this test binary re-executed
	os.Exit(m.Run())
}

func names(s *Summary) string {
	var n []string
	for _, e := range s.Evictions {
		n = append(n, e.Workload)
	}
	return strings.Join(n, ",")
}

// The story on paper: the engine evicts leaky (soft, after its grace), then
// batch (hard: BestEffort before the growing but higher-priority cache),
// then cache — never the critical node-agent, db or web.
func TestSimulate(t *testing.T) {
	var out bytes.Buffer
	s, err := Simulate(&out)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(s); got != "leaky,batch,cache" || s.KernelOOMKills != 0 {
		t.Fatalf("evictions %s, OOM %d\n%s", got, s.KernelOOMKills, out.String())
	}
	if s.Evictions[0].GracePeriodSeconds != 3 || s.Evictions[1].GracePeriodSeconds != 1 {
		t.Fatalf("grace periods %+v", s.Evictions)
	}
}

// The real story on this kernel: the same evictions, made by the real agent
// woken by the kernel, before the OOM killer, and nothing left behind.
func TestDemoRealKernel(t *testing.T) {
	sandboxtest.NeedRoot(t)
	if testing.Short() {
		t.Skip("the real demo takes about 20 s; skipped with -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s, err := Run(context.Background(), Options{Out: &out, Exe: exe})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if got := names(s); got != "leaky,batch,cache" || s.KernelOOMKills != 0 {
		t.Fatalf("evictions %s, OOM kills %d\n%s", got, s.KernelOOMKills, out.String())
	}
	for _, e := range s.Evictions[1:] {
		woken := strings.HasPrefix(e.Trigger, "wake")
		if vmtest.InVM() {
			// Emulation stretches the scripts' timing, so the soft
			// threshold's grace may run out, or the previous eviction
			// end, just as the hard threshold is crossed, and that
			// synchronize decides first (seen: batch by "grace", cache by
			// "after-eviction"). Only waiting for the 10 s tick is wrong.
			woken = woken || e.Trigger == "grace" || e.Trigger == "after-eviction"
		}
		if !woken {
			t.Errorf("hard eviction of %s was not woken by the kernel: %s", e.Workload, e.Trigger)
		}
	}
	mode, _ := sandbox.DetectMode()
	root := sandbox.V1Memory
	if mode == sandbox.V2 {
		root = sandbox.V2Root
	}
	name := fmt.Sprintf("evictd-demo-%d", os.Getpid())
	for _, d := range []string{filepath.Join(root, name), filepath.Join(sandbox.V1Freezer, name)} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("cgroup left behind: %s", d)
		}
	}
}
