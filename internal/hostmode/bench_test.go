package hostmode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// BenchmarkHostObserve is what one idle synchronize reads in host mode with
// 500 workload cgroups (bench/idle.sh's setup), empty or each holding a
// sleeping process: the active workloads and the eviction-only Summary.
// Needs root; run with -cpuprofile to see where the agent's idle CPU goes.
func BenchmarkHostObserve(b *testing.B) {
	b.Run("empty", func(b *testing.B) { benchmarkHostObserve(b, false) })
	b.Run("populated", func(b *testing.B) { benchmarkHostObserve(b, true) })
}

func benchmarkHostObserve(b *testing.B, populated bool) {
	mode := sandboxtest.NeedRoot(b)
	sb := sandboxtest.New(b, 0)
	for i := range 500 {
		dir := filepath.Join(sb.Parent.Memory, fmt.Sprintf("w%d", i))
		if err := cgroup.Mkdir(dir); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { rmdirRetry(b, dir) })
		if populated {
			cmd := exec.Command("sleep", "100000")
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if err := cgroup.WriteCgroupProcs(dir, cmd.Process.Pid); err != nil {
				b.Fatal(err)
			}
		}
	}
	h, err := New(Options{WorkloadRoot: sb.Parent.Rel, Options: agent.Options{Wakeups: agent.NoWakeups}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Wakeups.Close(); h.Pods.Close() })
	if h.V2 != (mode == sandbox.V2) {
		b.Fatalf("host says v2=%v on a %v sandbox", h.V2, mode)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if o := h.Observer.Observe(ctx); o.PodsErr != nil || o.SummaryErr != nil {
			b.Fatal(o.PodsErr, o.SummaryErr)
		}
	}
}
