package lint

import (
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

func thresholds(t *testing.T, hard, soft, grace map[string]string) []policy.Threshold {
	t.Helper()
	kc := &kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: hard, EvictionSoft: soft, EvictionSoftGracePeriod: grace}
	cfg, err := policy.ConfigFromKubelet(kc)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Thresholds
}

func TestCoexistence(t *testing.T) {
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	defaults := m("memory.available", "100Mi", "nodefs.available", "10%", "imagefs.available", "15%", "nodefs.inodesFree", "5%", "imagefs.inodesFree", "5%")
	for _, tc := range []struct {
		name                 string
		eHard, eSoft, eGrace map[string]string
		kHard, kSoft, kGrace map[string]string
		want                 []string // "severity value" of each finding
	}{
		{name: "same thresholds", eHard: defaults, kHard: defaults},
		{name: "evictd higher", eHard: m("memory.available", "300Mi", "nodefs.available", "12%", "imagefs.available", "15%", "nodefs.inodesFree", "5%", "imagefs.inodesFree", "5%"), kHard: defaults},
		{name: "evictd lower on memory", eHard: m("memory.available", "50Mi", "nodefs.available", "10%", "imagefs.available", "15%", "nodefs.inodesFree", "5%", "imagefs.inodesFree", "5%"), kHard: defaults,
			want: []string{"warning memory.available<100Mi", "warning allocatableMemory.available<100Mi"}},
		{name: "evictd misses a signal", eHard: m("memory.available", "100Mi"), kHard: m("memory.available", "100Mi", "pid.available", "5%"),
			want: []string{"warning pid.available<5%"}},
		{name: "kubelet soft, evictd hard at the same value", eHard: m("memory.available", "500Mi"),
			kHard: m("memory.available", "100Mi"), kSoft: m("memory.available", "500Mi"), kGrace: m("memory.available", "1m")},
		{name: "kubelet soft, evictd soft with a longer grace", eHard: m("memory.available", "100Mi"), eSoft: m("memory.available", "500Mi"), eGrace: m("memory.available", "2m"),
			kHard: m("memory.available", "100Mi"), kSoft: m("memory.available", "500Mi"), kGrace: m("memory.available", "1m"),
			want: []string{"warning memory.available<500Mi"}}, // the kubelet derives allocatable copies of hard thresholds only
		{name: "kubelet soft, evictd soft with the same grace", eHard: m("memory.available", "100Mi"), eSoft: m("memory.available", "600Mi"), eGrace: m("memory.available", "1m"),
			kHard: m("memory.available", "100Mi"), kSoft: m("memory.available", "500Mi"), kGrace: m("memory.available", "1m")},
		{name: "kubelet hard, evictd only soft", eHard: m("pid.available", "1%"), eSoft: m("memory.available", "600Mi"), eGrace: m("memory.available", "1s"),
			kHard: m("memory.available", "100Mi"),
			want:  []string{"warning memory.available<100Mi", "warning allocatableMemory.available<100Mi"}},
		{name: "quantity against percentage", eHard: m("memory.available", "5%"), kHard: m("memory.available", "100Mi"),
			want: []string{"info memory.available<100Mi", "info allocatableMemory.available<100Mi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := thresholds(t, tc.eHard, tc.eSoft, tc.eGrace)
			k := thresholds(t, tc.kHard, tc.kSoft, tc.kGrace)
			var got []string
			for _, f := range Coexistence(e, k, "kubelet.yaml") {
				got = append(got, string(f.Severity)+" "+strings.SplitN(f.Value, " ", 2)[0])
				if f.Rule != RuleCoexistence || f.Field != "kubelet.yaml" || f.Message == "" || f.Fix == "" {
					t.Errorf("finding %+v", f)
				}
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("findings %q, want %q", got, tc.want)
			}
		})
	}
}
