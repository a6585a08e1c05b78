package policy

import (
	"reflect"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// FuzzParseThresholdConfig feeds arbitrary signal names and values to the
// threshold parser. It must never panic; what it accepts must be well formed;
// it must be deterministic; and ConfigFromKubelet must accept exactly what
// ParseThresholdConfig accepts. Seeds: testdata/fuzz/FuzzParseThresholdConfig.
func FuzzParseThresholdConfig(f *testing.F) {
	f.Add("memory.available", "100Mi", "memory.available", "200Mi", "memory.available", "1m", "memory.available", "50Mi", true)
	f.Add("nodefs.available", "10.5%", "imagefs.available", "15%", "imagefs.available", "0s", "nodefs.available", "1%", false)
	f.Add("pid.available", "0%", "nodefs.inodesFree", "100%", "x", "-1s", "pid.available", "0%", true)
	f.Add("memory.available", "-1", "bogus", "1", "memory.available", "1", "memory.available", "-1Gi", false)
	f.Add("containerfs.available", "0.0%", "allocatableMemory.available", "1e3", "allocatableMemory.available", "1h", "containerfs.available", "12%345", true)
	f.Fuzz(func(t *testing.T, hk, hv, sk, sv, gk, gv, mk, mv string, enforce bool) {
		hard := map[string]string{hk: hv}
		soft := map[string]string{sk: sv}
		grace := map[string]string{gk: gv}
		minReclaim := map[string]string{mk: mv}
		var alloc []string
		if enforce {
			alloc = []string{"pods"}
		}
		got, err := ParseThresholdConfig(alloc, hard, soft, grace, minReclaim)
		again, err2 := ParseThresholdConfig(alloc, hard, soft, grace, minReclaim)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(got, again) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		kc := &kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: hard, EvictionSoft: soft, EvictionSoftGracePeriod: grace, EvictionMinimumReclaim: minReclaim}
		if !enforce {
			kc.EnforceNodeAllocatable = []string{}
		}
		_, cerr := ConfigFromKubelet(kc)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("ParseThresholdConfig err=%v but ConfigFromKubelet err=%v", err, cerr)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		for _, th := range got {
			if !ValidSignal(th.Signal) || th.Operator != OpLessThan {
				t.Fatalf("malformed threshold %+v", th)
			}
			if th.Value.Quantity == nil && (th.Value.Percentage < 0 || th.Value.Percentage > 1) {
				t.Fatalf("percentage out of range: %+v", th)
			}
			if th.Value.Quantity != nil && th.Value.Quantity.Sign() <= 0 {
				t.Fatalf("non-positive quantity: %+v", th)
			}
			if th.GracePeriod < 0 {
				t.Fatalf("negative grace: %+v", th)
			}
			if th.MinReclaim != nil && th.MinReclaim.Quantity != nil && th.MinReclaim.Quantity.Sign() < 0 {
				t.Fatalf("negative min-reclaim: %+v", th)
			}
			_ = th.String()
		}
		if _, err := NewEngine(Config{Thresholds: got}, Filesystems{}); err != nil {
			t.Fatalf("engine refuses parsed thresholds: %v", err)
		}
	})
}
