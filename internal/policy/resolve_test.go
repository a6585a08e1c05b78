package policy

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Resolve gives, for each threshold the Summary observes, the observation
// and the threshold in bytes the kubelet would compute: a percentage of
// available + working set (float32 percentage, truncated), a quantity as it
// is; a signal without stats is left out.
func TestResolve(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "10%", "nodefs.available": "500Mi"},
		map[string]string{"memory.available": "2Gi"}, map[string]string{"memory.available": "1m"}, nil, 0, 5*time.Minute)
	e, err := NewEngine(cfg, Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Resolve(nil); got != nil {
		t.Errorf("Resolve(nil) = %v, want nil", got)
	}
	s := memSummary("500Mi", t0) // capacity 8Gi
	got := e.Resolve(s)
	want := []struct {
		threshold string
		quantity  int64
	}{
		// int64(float64(8Gi) * float64(float32(0.1))): float32(0.1) is a
		// little above 0.1, so not 858993459.
		{"memory.available<10%", 858993472},
		{"memory.available<2Gi (soft, grace 1m0s)", 2 << 30},
	}
	if len(got) != len(want) {
		t.Fatalf("resolved %d thresholds, want %d (nodefs has no stats): %+v", len(got), len(want), got)
	}
	for i, w := range want {
		r := got[i]
		if r.Threshold.String() != w.threshold || r.Quantity.Value() != w.quantity {
			t.Errorf("%d: %s = %d bytes, want %s = %d", i, r.Threshold, r.Quantity.Value(), w.threshold, w.quantity)
		}
		if r.Observation.Available.Value() != 500<<20 || r.Observation.Capacity.Value() != 8<<30 {
			t.Errorf("%d: observation %s of %s, want 500Mi of 8Gi", i, r.Observation.Available.String(), r.Observation.Capacity.String())
		}
	}

	// The same numbers Step explains for the thresholds it finds met.
	d := e.Step(t0, Input{Summary: s})
	if len(d.Met) != 2 {
		t.Fatalf("met %d thresholds, want 2", len(d.Met))
	}
	for _, m := range d.Met {
		found := false
		for _, r := range got {
			if r.Threshold.String() == m.Threshold.String() {
				found = true
				if r.Quantity.Cmp(*m.Quantity) != 0 || r.Observation.Available.Cmp(*m.Available) != 0 {
					t.Errorf("%s: Resolve %s/%s, Step %s/%s", m.Threshold, r.Quantity.String(), r.Observation.Available.String(), m.Quantity, m.Available)
				}
			}
		}
		if !found {
			t.Errorf("Step met %s, which Resolve left out", m.Threshold)
		}
	}

	// allocatableMemory.available resolves against the pods cgroup.
	cfg = mustConfig(t, map[string]string{"allocatableMemory.available": "25%"}, nil, nil, nil, 0, 0)
	if e, err = NewEngine(cfg, Filesystems{}); err != nil {
		t.Fatal(err)
	}
	avail, ws := uint64(1<<30), uint64(3<<30)
	s.Node.SystemContainers = []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods,
		Memory: &statsv1alpha1.MemoryStats{AvailableBytes: &avail, WorkingSetBytes: &ws}}}
	got = e.Resolve(s)
	if len(got) != 1 || got[0].Quantity.Cmp(*resource.NewQuantity(1<<30, resource.BinarySI)) != 0 || got[0].Observation.Capacity.Value() != 4<<30 {
		t.Errorf("allocatable: %+v, want 1Gi of a 4Gi pods cgroup", got)
	}
}
