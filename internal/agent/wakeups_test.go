package agent

import (
	"testing"

	"github.com/evictd/evictd/internal/policy"
)

// Apply resolves the switches as evictd run documents them (docs/agent.md):
// auto is memcg thresholds on v1, PSI, memory.events and the fast poll on
// v2; what the cgroup version or the thresholds cannot serve stays off
// whatever was asked.
func TestWakeupSwitchesApply(t *testing.T) {
	mem := []policy.Threshold{{Signal: policy.SignalAllocatableMemoryAvailable}}
	disk := []policy.Threshold{{Signal: policy.SignalNodeFsAvailable}}
	auto := WakeupSwitches{Auto, Auto, Auto, Auto}
	on := WakeupSwitches{On, On, On, On}
	off := WakeupSwitches{Off, Off, Off, Off}
	type want struct{ memcg, psi, events, fast bool }
	for _, tc := range []struct {
		name       string
		s          WakeupSwitches
		v2         bool
		thresholds []policy.Threshold
		want       want
	}{
		{"auto v1", auto, false, mem, want{memcg: true}},
		{"auto v2", auto, true, mem, want{psi: true, events: true, fast: true}},
		{"on v1", on, false, mem, want{memcg: true, psi: true, fast: true}},
		{"on v2: no memcg thresholds on v2", on, true, mem, want{psi: true, events: true, fast: true}},
		{"off v2", off, true, mem, want{}},
		{"auto v1 without a memory threshold", auto, false, disk, want{}},
		{"on v2 without a memory threshold", on, true, disk, want{psi: true, events: true}},
	} {
		cfg := WakeupConfig{V2: tc.v2}
		tc.s.Apply(&cfg, tc.thresholds)
		if got := (want{cfg.MemcgThresholds, cfg.PSI, cfg.MemoryEvents, cfg.FastPoll}); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
