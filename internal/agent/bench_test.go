package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// BenchmarkHostObserve is what one idle synchronize reads in host mode with
// 500 empty workload cgroups (bench/idle.sh's setup): the active workloads
// and the eviction-only Summary. Needs root; run with -cpuprofile to see
// where the agent's idle CPU goes.
func BenchmarkHostObserve(b *testing.B) {
	mode := sandboxtest.NeedRoot(b)
	sb := sandboxtest.New(b, 0)
	for i := range 500 {
		dir := filepath.Join(sb.Parent.Memory, fmt.Sprintf("w%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.Remove(dir) })
	}
	h, err := NewHost(HostOptions{WorkloadRoot: sb.Parent.Rel, MemcgNotification: Off, PSI: Off, MemoryEvents: Off, FastPoll: Off})
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
		if _, err := h.Pods.Pods(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := h.Stats.Summary(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
