package agent

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Apply resolves the switches as evictd run documents them (docs/agent.md):
// auto is memcg thresholds on v1, PSI, memory.events and the fast poll on
// v2; what the cgroup version or the thresholds cannot serve stays off
// whatever was asked.
func TestWakeupOptionsApply(t *testing.T) {
	mem := []policy.Threshold{{Signal: policy.SignalAllocatableMemoryAvailable}}
	disk := []policy.Threshold{{Signal: policy.SignalNodeFsAvailable}}
	auto := WakeupOptions{MemcgNotification: Auto, PSI: Auto, MemoryEvents: Auto, FastPoll: Auto}
	on := WakeupOptions{MemcgNotification: On, PSI: On, MemoryEvents: On, FastPoll: On}
	off := NoWakeups
	type want struct{ memcg, psi, events, fast bool }
	for _, tc := range []struct {
		name       string
		s          WakeupOptions
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
	o := WakeupOptions{PSIStall: 1, PSIWindow: 2, FastPollMin: 3, FastPollMax: 4, NotifierRefresh: 5}
	var cfg WakeupConfig
	o.Apply(&cfg, mem)
	if got := [5]time.Duration{cfg.PSIStall, cfg.PSIWind, cfg.FastMin, cfg.FastMax, cfg.RefreshInterval}; got != [5]time.Duration{1, 2, 3, 4, 5} {
		t.Errorf("tunables: got %v, want [1 2 3 4 5]", got)
	}
}

// TestWakeupsRegisterMemcgThresholdsAside, on a real cgroup v1 memory
// cgroup: Update hands the memcg registration to Wakeups' own goroutine
// (registering waits for an RCU grace period in the kernel, which the
// synchronize does not), only the latest Summary's threshold is kept when
// several come before the goroutine is done, and Active waits for the
// registrations handed over so far.
func TestWakeupsRegisterMemcgThresholdsAside(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	w, err := NewWakeups(WakeupConfig{MemoryRoot: cgrouptest.V1Memory, PodsCgroup: dir, MemcgThresholds: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	thr := policy.Threshold{Signal: policy.SignalAllocatableMemoryAvailable, Operator: policy.OpLessThan,
		Value: policy.ThresholdValue{Quantity: resource.NewQuantity(100<<20, resource.BinarySI)}}
	update := func(now time.Time, usage, workingSet uint64) {
		capacity := int64(1 << 30)
		s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{SystemContainers: []statsv1alpha1.ContainerStats{{
			Name: statsv1alpha1.SystemContainerPods, Memory: &statsv1alpha1.MemoryStats{UsageBytes: &usage, WorkingSetBytes: &workingSet}}}}}
		w.Update(now, s, []policy.ResolvedThreshold{{Threshold: thr, Quantity: *resource.NewQuantity(100<<20, resource.BinarySI),
			Observation: policy.Observation{Signal: thr.Signal, Capacity: *resource.NewQuantity(capacity, resource.BinarySI),
				Available: *resource.NewQuantity(capacity-int64(workingSet), resource.BinarySI)}}})
	}
	start := time.Now()
	update(start, 10<<20, 8<<20)
	// Later Summaries, past the rate limit: each moves the threshold (its
	// inactive_file term changes); the last one is what must end up
	// registered.
	update(start.Add(11*time.Second), 12<<20, 8<<20)
	update(start.Add(22*time.Second), 14<<20, 8<<20)
	want := "memcg-threshold " + thr.String()
	if got := w.Active(); !slices.Contains(got, want) {
		t.Fatalf("Active after Update: %v, want %q among them", got, want)
	}
	w.mu.Lock()
	m := w.memcg[thr.String()]
	w.mu.Unlock()
	// capacity − threshold + inactive (usage − working set) of the last Summary.
	if got, want := m.Threshold(), int64(1<<30)-100<<20+(14<<20-8<<20); got != want {
		t.Errorf("registered usage threshold %d, want %d (the last Summary's)", got, want)
	}
}

// A Summary past a hard threshold's arming level but not past the
// threshold starts its close watch, whatever the eventfds did before (an
// early stop undone because the threshold was not met yet left the memcg
// threshold spent and the arming one long fired); one further away does
// not.
func TestWakeupsWatchCloseWhenNear(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	// More than ArmAhead: a level below it has no arming threshold.
	cgrouptest.StartHog(t, ArmAhead>>20+16, dir)
	w, err := NewWakeups(WakeupConfig{MemoryRoot: cgrouptest.V1Memory, PodsCgroup: dir, MemcgThresholds: true, Arm: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const capacity = int64(1 << 30)
	usage := cgrouptest.ReadUint(t, filepath.Join(dir, "memory.usage_in_bytes"))
	// A threshold whose usage level is above lies above the hog's usage
	// (no inactive_file in the Summary: the level is capacity − threshold).
	update := func(above int64) *notify.CloseWatch {
		thrB := capacity - int64(usage) - above
		thr := policy.Threshold{Signal: policy.SignalAllocatableMemoryAvailable, Operator: policy.OpLessThan,
			Value: policy.ThresholdValue{Quantity: resource.NewQuantity(thrB, resource.BinarySI)}}
		u := usage
		s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{SystemContainers: []statsv1alpha1.ContainerStats{{
			Name: statsv1alpha1.SystemContainerPods, Memory: &statsv1alpha1.MemoryStats{UsageBytes: &u, WorkingSetBytes: &u}}}}}
		w.Update(time.Now(), s, []policy.ResolvedThreshold{{Threshold: thr, Quantity: *resource.NewQuantity(thrB, resource.BinarySI),
			Observation: policy.Observation{Signal: thr.Signal, Capacity: *resource.NewQuantity(capacity, resource.BinarySI),
				Available: *resource.NewQuantity(capacity-int64(u), resource.BinarySI)}}})
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.watches[thr.String()]
	}
	if c := update(ArmAhead * 2); c == nil || c.Running() {
		t.Fatalf("close watch %v with the usage %d MiB below the arming level: want it created and not running", c, ArmAhead>>20)
	}
	if c := update(4 << 20); c == nil || !c.Running() {
		t.Fatalf("close watch %v with the usage 4 MiB below the threshold's level: want it running", c)
	}
}
