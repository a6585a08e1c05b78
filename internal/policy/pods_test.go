package policy

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// TestToleratesMemoryPressureMatchesComponentHelpers compares evictd's
// written-out toleration check with the library the kubelet calls (which the
// core cannot call: it takes a logger) on every combination of key, operator,
// value and effect that can matter, with the comparison-operator gate on and
// off.
func TestToleratesMemoryPressureMatchesComponentHelpers(t *testing.T) {
	keys := []string{"", v1.TaintNodeMemoryPressure, v1.TaintNodeDiskPressure, "other"}
	ops := []v1.TolerationOperator{"", v1.TolerationOpEqual, v1.TolerationOpExists, v1.TolerationOpLt, v1.TolerationOpGt, "Bogus"}
	values := []string{"", "0", "1", "-1", "x"}
	effects := []v1.TaintEffect{"", v1.TaintEffectNoSchedule, v1.TaintEffectNoExecute, v1.TaintEffectPreferNoSchedule}
	taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	var matched, n int
	for _, k := range keys {
		for _, op := range ops {
			for _, val := range values {
				for _, eff := range effects {
					for _, gate := range []bool{false, true} {
						tol := []v1.Toleration{{Key: k, Operator: op, Value: val, Effect: eff}}
						pod := &v1.Pod{Spec: v1.PodSpec{Tolerations: tol}}
						want := corev1helpers.TolerationsTolerateTaint(logr.Discard(), tol, taint, gate)
						got := toleratesMemoryPressure(pod, FeatureGates{TaintTolerationComparisonOperators: gate})
						n++
						if want {
							matched++
						}
						if got != want {
							t.Errorf("%s gate=%v: got %v, component-helpers %v", fmt.Sprintf("%+v", tol[0]), gate, got, want)
						}
					}
				}
			}
		}
	}
	// A comparison that matches nothing (or everything) would prove nothing.
	if matched == 0 || matched == n {
		t.Fatalf("%d of %d combinations tolerate the taint: the table does not tell true from false", matched, n)
	}
	// Several tolerations: any one that matches is enough; none is not.
	pod := &v1.Pod{Spec: v1.PodSpec{Tolerations: []v1.Toleration{
		{Key: "other", Operator: v1.TolerationOpExists},
		{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	}}}
	if !toleratesMemoryPressure(pod, FeatureGates{}) {
		t.Error("the second of two tolerations matches, but the pod is not tolerated")
	}
	if toleratesMemoryPressure(&v1.Pod{}, FeatureGates{}) {
		t.Error("a pod without tolerations is tolerated")
	}
}
