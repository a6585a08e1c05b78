package oracle

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"

	"github.com/evictd/evictd/parity/internal/scenario"
)

const corpus = "../../../testdata/scenarios/"

func load(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Load(corpus + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The harness is wired right when it reproduces what the upstream unit test
// TestMemoryPressure_VerifyPodStatus asserts for the same inputs.
func TestHarnessReproducesUpstreamMessage(t *testing.T) {
	out, err := RunOnce(load(t, "memory-pressure-verify-pod-status"))
	if err != nil {
		t.Fatal(err)
	}
	ev := out.Steps[0].Evicted
	want := "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. Container above-requests was using 700Mi, request is 100Mi, has larger consumption of memory. "
	if len(ev) != 1 || ev[0].Name != "above-requests" || ev[0].GracePeriodSeconds != 1 || ev[0].Message != want {
		t.Errorf("evicted %+v, want above-requests, grace 1, %q", ev, want)
	}
	if got := out.Steps[0].NodeConditions; len(got) != 1 || got[0] != "MemoryPressure" {
		t.Errorf("node conditions %v, want [MemoryPressure]", got)
	}
}

// afterReclaim must reach the manager only once a reclaim function ran, and
// the functions must be recorded in the order the kubelet calls them.
func TestHarnessNodeReclaim(t *testing.T) {
	out, err := RunOnce(load(t, "node-reclaim-nodefs-no-imagefs"))
	if err != nil {
		t.Fatal(err)
	}
	st := out.Steps[1] // reclaim frees enough: no eviction
	if len(st.Evicted) != 0 || len(st.NodeReclaim) != 2 || st.NodeReclaim[0] != ReclaimContainerGC || st.NodeReclaim[1] != ReclaimImageGC {
		t.Errorf("step 1: reclaim %v evicted %v, want [containerGC imageGC] and no eviction", st.NodeReclaim, st.Evicted)
	}
	if st := out.Steps[3]; len(st.Evicted) != 1 { // reclaim frees too little
		t.Errorf("step 3: evicted %v, want one pod", st.Evicted)
	}
}

// The oracle must see the kubelet's map-order nondeterminism, or the
// committed outcome sets would be incomplete.
func TestHarnessSeesNondeterminism(t *testing.T) {
	res, err := Run(load(t, "several-memory-thresholds-at-once"), DefaultRuns)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outcomes) != 3 {
		t.Errorf("%d outcomes, want 3 (hard, soft and allocatable memory threshold each governing)", len(res.Outcomes))
	}
}

// A scenario's feature gates must not leak into the next scenario.
func TestFeatureGatesRestored(t *testing.T) {
	before := utilfeature.DefaultFeatureGate.Enabled(features.KubeletSeparateDiskGC)
	out, err := RunOnce(load(t, "split-filesystem-with-separate-disk-gc-off"))
	if err != nil {
		t.Fatal(err)
	}
	if after := utilfeature.DefaultFeatureGate.Enabled(features.KubeletSeparateDiskGC); after != before || !after {
		t.Errorf("KubeletSeparateDiskGC after the run = %v, before = %v (default on)", after, before)
	}
	if len(out.Steps[1].NodeConditions) != 1 || len(out.Steps[1].Evicted) != 0 {
		t.Errorf("gate off with a split filesystem: step 1 = %+v, want DiskPressure and no eviction", out.Steps[1])
	}
}

// StepOutcomes with the kubelet's own history must offer the kubelet's own step.
func TestStepOutcomesContainsOwnDecision(t *testing.T) {
	s := load(t, "memory-pressure-soft-then-hard")
	out, err := RunOnce(s)
	if err != nil {
		t.Fatal(err)
	}
	for k := range s.Steps {
		opts, err := StepOutcomes(s, k, out.Steps, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(opts) != 1 || len(opts[0].Evicted) != len(out.Steps[k].Evicted) {
			t.Errorf("step %d: options %+v, want exactly the kubelet's %+v", k, opts, out.Steps[k])
		}
	}
}
