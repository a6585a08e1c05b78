package load

import (
	"github.com/spf13/pflag"
	"io"
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

// The kubelet's eviction flags under random values: parsing, applying and
// turning the result into an engine configuration never panic, and a flag
// error stays on one line.
func FuzzEvictionFlags(f *testing.F) {
	f.Add("memory.available<100Mi,nodefs.available<10%", "memory.available=1m30s", "30", "5m")
	f.Add("<", "=", "-2147483649", "-1s")
	f.Add("memory.available<1e30,pid.available<0x10", "a=b=c", "0x7fffffff", "9223372036s")
	f.Fuzz(func(t *testing.T, hard, grace, maxGrace, transition string) {
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ef := RegisterEvictionFlags(fs)
		err := fs.Parse([]string{"--" + FlagEvictionHard, hard, "--" + FlagEvictionSoft, hard,
			"--" + FlagEvictionSoftGracePeriod, grace, "--" + FlagEvictionMinimumReclaim, grace,
			"--" + FlagEvictionMaxPodGracePeriod, maxGrace, "--" + FlagEvictionPressureTransitionPeriod, transition})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line flag error %q", err)
			}
			return
		}
		kc := &kubeletconfigv1beta1.KubeletConfiguration{}
		if err := ef.Apply(kc); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.ConfigFromKubelet(kc); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line config error %q", err)
		}
	})
}
