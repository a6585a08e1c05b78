package timeline

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

func threshold(sig policy.Signal, q string, grace time.Duration) policy.Threshold {
	v := resource.MustParse(q)
	return policy.Threshold{Signal: sig, Operator: policy.OpLessThan, Value: policy.ThresholdValue{Quantity: &v}, GracePeriod: grace}
}

// TestConfigSpelling: thresholds are named as the config writes them —
// derived ones as the entry they copy — and canonically when the config
// does not write them or writes another value.
func TestConfigSpelling(t *testing.T) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard:            map[string]string{"pid.available": "1000", "memory.available": "1024Mi", "nodefs.available": "2Gi"},
		EvictionSoft:            map[string]string{"memory.available": "1536Mi"},
		EvictionSoftGracePeriod: map[string]string{"memory.available": "90s"},
	}
	spell := ConfigSpelling(kc)
	pct := policy.Threshold{Signal: policy.SignalImageFsAvailable, Operator: policy.OpLessThan, Value: policy.ThresholdValue{Percentage: 0.15}}
	for _, c := range []struct {
		t    policy.Threshold
		want string
	}{
		{threshold(policy.SignalPIDAvailable, "1000", 0), "pid.available<1000"}, // canonically 1k
		{threshold(policy.SignalMemoryAvailable, "1Gi", 0), "memory.available<1024Mi"},
		{threshold(policy.SignalAllocatableMemoryAvailable, "1Gi", 0), "allocatableMemory.available<1024Mi"},
		{threshold(policy.SignalMemoryAvailable, "1536Mi", 90*time.Second), "memory.available<1536Mi (soft, 90s)"}, // canonically 1m30s
		{threshold(policy.SignalContainerFsAvailable, "2Gi", 0), "containerfs.available<2Gi"},
		// Not what the config writes: the threshold's own value.
		{threshold(policy.SignalNodeFsAvailable, "3Gi", 0), "nodefs.available<3Gi"},
		// Not in the config (a kubelet default).
		{pct, "imagefs.available<15%"},
	} {
		if got := LabelAs(c.t, spell); got != c.want {
			t.Errorf("LabelAs(%v) = %q, want %q", c.t, got, c.want)
		}
	}
	if got := LabelAs(threshold(policy.SignalPIDAvailable, "1000", 0), nil); got != "pid.available<1k" {
		t.Errorf("without a spelling: %q", got)
	}
}
