package notify

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/workload/sandbox"
)

// BenchmarkMemcgThresholdRegister is one memcg v1 threshold registration
// (the write to cgroup.event_control) on a real memory cgroup: the kernel
// swaps the cgroup's threshold array under RCU and waits for a grace period
// (synchronize_rcu in mem_cgroup_usage_register_event), so it costs wall
// time, not CPU. That is why the agent moves its thresholds after the kill
// and rebuilds them at most every 10 s (docs/agent.md). Each registration's
// eventfd is closed at once, as a rebuild closes the old one.
func BenchmarkMemcgThresholdRegister(b *testing.B) {
	needMode(b, sandbox.V1)
	s := newSandbox(b, 0)
	for b.Loop() {
		efd, _, err := registerMemcgThreshold(s.Parent.Memory, 1<<40)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(efd)
	}
}
