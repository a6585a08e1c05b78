package lint

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

type kcfg = kubeletconfigv1beta1.KubeletConfiguration

// file returns a config that passes every rule: identity set, the full
// default evictionHard, a soft threshold with grace, max grace 30.
func file() *kcfg {
	return &kcfg{
		TypeMeta: metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"},
		EvictionHard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
			"imagefs.available": "15%", "imagefs.inodesFree": "5%"},
		EvictionSoft:              map[string]string{"memory.available": "500Mi"},
		EvictionSoftGracePeriod:   map[string]string{"memory.available": "1m30s"},
		EvictionMaxPodGracePeriod: 30,
	}
}

func with(mut func(*kcfg)) *kcfg {
	kc := file()
	mut(kc)
	return kc
}

func boolp(b bool) *bool                  { return &b }
func f64(f float64) *float64              { return &f }
func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// finding is what a case expects: rule, severity and field (message text is
// checked where it is the kubelet's wording).
type want struct {
	rule     string
	severity Severity
	field    string
	message  string // exact when set
}

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want []want // exactly these findings, in order
	}{
		{"clean config", Input{Config: file(), ConfigFile: "c.yaml"}, nil},

		// kubelet-config-identity
		{"missing kind", Input{Config: with(func(k *kcfg) { k.Kind = "" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-config-identity", SeverityError, "kind", "failed to decode: Object 'Kind' is missing"}}},
		{"missing apiVersion", Input{Config: with(func(k *kcfg) { k.APIVersion = "" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-config-identity", SeverityError, "apiVersion", "failed to decode: Object 'apiVersion' is missing"}}},

		// kubelet-threshold-error: the kubelet's wording, every entry
		{"unknown signal", Input{Config: with(func(k *kcfg) { k.EvictionHard["memory.availabel"] = "1Gi" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionHard.memory.availabel", "unsupported eviction signal memory.availabel"}}},
		{"zero quantity", Input{Config: with(func(k *kcfg) { k.EvictionHard["memory.available"] = "0" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionHard.memory.available", "eviction threshold memory.available must be positive: 0"}}},
		{"percentage over 100", Input{Config: with(func(k *kcfg) { k.EvictionHard["nodefs.available"] = "101%" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionHard.nodefs.available", "eviction percentage threshold nodefs.available must be <= 100%: 101%"}}},
		{"negative percentage", Input{Config: with(func(k *kcfg) { k.EvictionSoft["memory.available"] = "-5%" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionSoft.memory.available", "eviction percentage threshold memory.available must be >= 0%: -5%"}}},
		{"soft without grace", Input{Config: with(func(k *kcfg) { k.EvictionSoftGracePeriod = nil }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionSoftGracePeriod.memory.available", "grace period must be specified for the soft eviction threshold memory.available"}}},
		{"negative grace", Input{Config: with(func(k *kcfg) { k.EvictionSoftGracePeriod["memory.available"] = "-1m" }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionSoftGracePeriod.memory.available", "invalid eviction grace period specified: -1m, must be a positive value"}}},
		{"negative reclaim", Input{Config: with(func(k *kcfg) { k.EvictionMinimumReclaim = map[string]string{"memory.available": "-1Mi"} }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionMinimumReclaim.memory.available", "negative eviction minimum reclaim specified for memory.available"}}},
		{"0% reclaim", Input{Config: with(func(k *kcfg) { k.EvictionMinimumReclaim = map[string]string{"nodefs.available": "0%"} }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-threshold-error", SeverityError, "evictionMinimumReclaim.nodefs.available", "eviction percentage minimum reclaim nodefs.available must be positive: 0%"}}},
		{"two errors both reported, flag named", Input{Config: with(func(k *kcfg) {
			k.EvictionHard = map[string]string{"memory.available": "abc", "pid.available": "0"}
			k.MergeDefaultEvictionSettings = boolp(true)
		}), ConfigFile: "c.yaml", FlagsSet: []string{"eviction-hard"}}, []want{
			{"kubelet-threshold-error", SeverityError, "--eviction-hard.memory.available", ""},
			{"kubelet-threshold-error", SeverityError, "--eviction-hard.pid.available", "eviction threshold pid.available must be positive: 0"},
		}},

		// kubelet-memory-qos-error
		{"throttling factor out of range", Input{Config: with(func(k *kcfg) { k.MemoryThrottlingFactor = f64(1.5) }), ConfigFile: "c.yaml"},
			[]want{{"kubelet-memory-qos-error", SeverityError, "memoryThrottlingFactor", "invalid configuration: memoryThrottlingFactor 1.5 must be greater than 0 and less than or equal to 1.0"}}},
		{"tiered without MemoryQoS", Input{Config: with(func(k *kcfg) {
			k.FeatureGates = map[string]bool{"MemoryQoS": false}
			k.MemoryReservationPolicy = "TieredReservation"
		}), ConfigFile: "c.yaml"},
			[]want{{"kubelet-memory-qos-error", SeverityError, "memoryReservationPolicy", `invalid configuration: memoryReservationPolicy "TieredReservation" requires MemoryQoS feature gate to be enabled`}}},

		// kubelet-feature-gate-error: every unknown name, none of the known ones
		{"unknown feature gates", Input{Config: with(func(k *kcfg) {
			k.FeatureGates = map[string]bool{"KubeletSeparateDiskGc": true, "MemoryQoS": false, "NoSuchGate": false}
		}), ConfigFile: "c.yaml"}, []want{
			{"kubelet-feature-gate-error", SeverityError, "featureGates.KubeletSeparateDiskGc", "unrecognized feature gate: KubeletSeparateDiskGc"},
			{"kubelet-feature-gate-error", SeverityError, "featureGates.NoSuchGate", "unrecognized feature gate: NoSuchGate"},
		}},

		// no-config-no-default-thresholds
		{"flags only without --eviction-hard", Input{Config: &kcfg{EvictionSoft: map[string]string{"memory.available": "1Gi"},
			EvictionSoftGracePeriod: map[string]string{"memory.available": "1m"}, EvictionMaxPodGracePeriod: 30},
			FlagsSet: []string{"eviction-soft", "eviction-soft-grace-period", "eviction-max-pod-grace-period"}},
			[]want{{"no-config-no-default-thresholds", SeverityWarning, "--eviction-hard", ""}}},
		{"flags only with full --eviction-hard", Input{Config: with(func(k *kcfg) { k.TypeMeta = metav1.TypeMeta{} }),
			FlagsSet: []string{"eviction-hard", "eviction-soft", "eviction-soft-grace-period", "eviction-max-pod-grace-period"}}, nil},

		// partial-eviction-hard
		{"partial evictionHard", Input{Config: with(func(k *kcfg) { k.EvictionHard = map[string]string{"memory.available": "200Mi"} }), ConfigFile: "c.yaml"},
			[]want{{"partial-eviction-hard", SeverityWarning, "evictionHard",
				"evictionHard replaces the defaults: no hard threshold for imagefs.available, imagefs.inodesFree, nodefs.available, nodefs.inodesFree"}}},
		{"partial evictionHard with merge", Input{Config: with(func(k *kcfg) {
			k.EvictionHard = map[string]string{"memory.available": "200Mi"}
			k.MergeDefaultEvictionSettings = boolp(true)
		}), ConfigFile: "c.yaml"}, nil},
		{"empty evictionHard", Input{Config: with(func(k *kcfg) {
			k.EvictionHard = map[string]string{}
			k.EvictionSoft = nil
			k.EvictionSoftGracePeriod = nil
		}), ConfigFile: "c.yaml"},
			[]want{{"partial-eviction-hard", SeverityWarning, "evictionHard", "evictionHard is empty: the kubelet has no hard eviction thresholds at all"}}},
		{"absent evictionHard gets the defaults", Input{Config: with(func(k *kcfg) { k.EvictionHard = nil }), ConfigFile: "c.yaml"}, nil},

		// signal-disabled-by-0-or-100-percent
		{"0% disables", Input{Config: with(func(k *kcfg) { k.EvictionHard["nodefs.inodesFree"] = "0%" }), ConfigFile: "c.yaml"},
			[]want{{"signal-disabled-by-0-or-100-percent", SeverityWarning, "evictionHard.nodefs.inodesFree", ""}}},
		{"100% disables a soft one", Input{Config: with(func(k *kcfg) {
			k.EvictionSoft["nodefs.available"] = "100%"
			k.EvictionSoftGracePeriod["nodefs.available"] = "1m"
		}), ConfigFile: "c.yaml"},
			[]want{{"signal-disabled-by-0-or-100-percent", SeverityWarning, "evictionSoft.nodefs.available", ""}}},

		// percentage-not-dropped
		{"0.0% is kept", Input{Config: with(func(k *kcfg) { k.EvictionHard["nodefs.inodesFree"] = "0.0%" }), ConfigFile: "c.yaml"},
			[]want{{"percentage-not-dropped", SeverityWarning, "evictionHard.nodefs.inodesFree", "a zero percentage that is not written \"0%\" is kept, and is never met"}}},
		{"100.0% is always met", Input{Config: with(func(k *kcfg) { k.EvictionHard["nodefs.available"] = "100.0%" }), ConfigFile: "c.yaml"},
			[]want{{"percentage-not-dropped", SeverityWarning, "evictionHard.nodefs.available", "a 100% threshold that is not written \"100%\" is kept, and is always met"}}},

		// soft-grace-zero
		{"soft grace 0s", Input{Config: with(func(k *kcfg) { k.EvictionSoftGracePeriod["memory.available"] = "0s" }), ConfigFile: "c.yaml"},
			[]want{{"soft-grace-zero", SeverityWarning, "evictionSoftGracePeriod.memory.available", ""}}},

		// threshold-above-any-capacity
		{"memory threshold above any node", Input{Config: with(func(k *kcfg) { k.EvictionHard["memory.available"] = "1e30" }), ConfigFile: "c.yaml"},
			[]want{{"threshold-above-any-capacity", SeverityWarning, "evictionHard.memory.available", "the threshold is above what any node has (4Pi, the most memory Linux can address)"},
				{"soft-not-above-hard", SeverityWarning, "evictionSoft.memory.available", ""}}},
		{"pid threshold above pid_max from a flag", Input{Config: with(func(k *kcfg) { k.EvictionHard = map[string]string{"pid.available": "5000000"} }),
			FlagsSet: []string{"eviction-hard"}, ConfigFile: "c.yaml"},
			[]want{{"partial-eviction-hard", SeverityWarning, "--eviction-hard", ""}, {"threshold-above-any-capacity", SeverityWarning, "--eviction-hard.pid.available", ""}}},
		{"large but possible", Input{Config: with(func(k *kcfg) { k.EvictionHard["imagefs.available"] = "1Ei" }), ConfigFile: "c.yaml"}, nil},

		// soft-not-above-hard
		{"soft below hard", Input{Config: with(func(k *kcfg) { k.EvictionSoft["memory.available"] = "50Mi" }), ConfigFile: "c.yaml"},
			[]want{{"soft-not-above-hard", SeverityWarning, "evictionSoft.memory.available", ""}}},
		{"soft equal to default hard", Input{Config: with(func(k *kcfg) {
			k.EvictionHard = nil
			k.EvictionSoft["nodefs.available"] = "10%"
			k.EvictionSoftGracePeriod["nodefs.available"] = "1m"
		}), ConfigFile: "c.yaml"},
			[]want{{"soft-not-above-hard", SeverityWarning, "evictionSoft.nodefs.available", ""}}},
		{"soft and hard in different units are not compared", Input{Config: with(func(k *kcfg) { k.EvictionSoft["memory.available"] = "5%" }), ConfigFile: "c.yaml"}, nil},

		// grace-period-without-soft-threshold
		{"orphan grace", Input{Config: with(func(k *kcfg) { k.EvictionSoftGracePeriod["nodefs.available"] = "1m" }), ConfigFile: "c.yaml"},
			[]want{{"grace-period-without-soft-threshold", SeverityInfo, "evictionSoftGracePeriod.nodefs.available", ""}}},

		// minimum-reclaim-without-threshold
		{"orphan reclaim", Input{Config: with(func(k *kcfg) { k.EvictionMinimumReclaim = map[string]string{"pid.available": "100"} }), ConfigFile: "c.yaml"},
			[]want{{"minimum-reclaim-without-threshold", SeverityInfo, "evictionMinimumReclaim.pid.available", ""}}},

		// minimum-reclaim-out-of-proportion
		{"reclaim larger than threshold", Input{Config: with(func(k *kcfg) { k.EvictionMinimumReclaim = map[string]string{"memory.available": "1Gi"} }), ConfigFile: "c.yaml"},
			[]want{{"minimum-reclaim-out-of-proportion", SeverityWarning, "evictionMinimumReclaim.memory.available",
				"minimum reclaim 1Gi is larger than the threshold memory.available<100Mi it extends"}}},
		{"reclaim percentage larger", Input{Config: with(func(k *kcfg) { k.EvictionMinimumReclaim = map[string]string{"nodefs.available": "20%"} }), ConfigFile: "c.yaml"},
			[]want{{"minimum-reclaim-out-of-proportion", SeverityWarning, "evictionMinimumReclaim.nodefs.available", ""}}},
		{"reclaim in proportion", Input{Config: with(func(k *kcfg) {
			k.EvictionMinimumReclaim = map[string]string{"memory.available": "100Mi", "nodefs.available": "5%"}
		}), ConfigFile: "c.yaml"}, nil},

		// containerfs-threshold-overridden
		{"containerfs threshold", Input{Config: with(func(k *kcfg) { k.EvictionHard["containerfs.available"] = "20%" }), ConfigFile: "c.yaml", Layout: LayoutSplit},
			[]want{{"containerfs-threshold-overridden", SeverityWarning, "evictionHard.containerfs.available", ""}}},

		// max-pod-grace-period
		{"max pod grace 0 with soft", Input{Config: with(func(k *kcfg) { k.EvictionMaxPodGracePeriod = 0 }), ConfigFile: "c.yaml"},
			[]want{{"max-pod-grace-period", SeverityWarning, "evictionMaxPodGracePeriod", ""}}},
		{"max pod grace negative via flag", Input{Config: with(func(k *kcfg) { k.EvictionMaxPodGracePeriod = -1 }), ConfigFile: "c.yaml", FlagsSet: []string{"eviction-max-pod-grace-period"}},
			[]want{{"max-pod-grace-period", SeverityWarning, "--eviction-max-pod-grace-period", "a negative evictionMaxPodGracePeriod does not defer to the pod's grace period"}}},
		{"max pod grace 0 without soft", Input{Config: with(func(k *kcfg) { k.EvictionMaxPodGracePeriod = 0; k.EvictionSoft = nil; k.EvictionSoftGracePeriod = nil }), ConfigFile: "c.yaml"}, nil},

		// pressure-transition-period
		{"transition 0s written", Input{Config: file(), ConfigFile: "c.yaml", Present: map[string]bool{"evictionPressureTransitionPeriod": true}},
			[]want{{"pressure-transition-period", SeverityWarning, "evictionPressureTransitionPeriod", "0s means the default, 5m0s"}}},
		{"transition absent", Input{Config: file(), ConfigFile: "c.yaml", Present: map[string]bool{}}, nil},
		{"transition 0s in a file serialized from defaults (kubeadm)", Input{Config: file(), ConfigFile: "c.yaml",
			Present: map[string]bool{"evictionPressureTransitionPeriod": true, "syncFrequency": true, "fileCheckFrequency": true, "httpCheckFrequency": true}},
			[]want{{"pressure-transition-period", SeverityInfo, "evictionPressureTransitionPeriod", ""}}},
		{"transition negative", Input{Config: with(func(k *kcfg) { k.EvictionPressureTransitionPeriod = dur(-time.Minute) }), ConfigFile: "c.yaml"},
			[]want{{"pressure-transition-period", SeverityWarning, "evictionPressureTransitionPeriod", ""}}},
		{"transition 5s", Input{Config: with(func(k *kcfg) { k.EvictionPressureTransitionPeriod = dur(5 * time.Second) }), ConfigFile: "c.yaml"},
			[]want{{"pressure-transition-period", SeverityInfo, "evictionPressureTransitionPeriod", ""}}},

		// hard-memory-not-covered-by-reservation
		{"reservation below hard threshold", Input{Config: with(func(k *kcfg) {
			k.EvictionHard["memory.available"] = "500Mi"
			k.EvictionSoft["memory.available"] = "1Gi"
			k.SystemReserved = map[string]string{"memory": "256Mi"}
			k.KubeReserved = map[string]string{"memory": "200Mi"}
		}), ConfigFile: "c.yaml"},
			[]want{{"hard-memory-not-covered-by-reservation", SeverityWarning, "systemReserved.memory",
				"systemReserved + kubeReserved memory (456Mi) does not cover the hard threshold memory.available<500Mi"}}},
		{"only kubeReserved, below the threshold", Input{Config: with(func(k *kcfg) {
			k.EvictionHard["memory.available"] = "500Mi"
			k.EvictionSoft["memory.available"] = "1Gi"
			k.KubeReserved = map[string]string{"memory": "500Mi"}
		}), ConfigFile: "c.yaml"},
			[]want{{"hard-memory-not-covered-by-reservation", SeverityWarning, "kubeReserved.memory", ""}}},
		{"reservation covers hard threshold", Input{Config: with(func(k *kcfg) {
			k.EvictionHard["memory.available"] = "500Mi"
			k.EvictionSoft["memory.available"] = "1Gi"
			k.SystemReserved = map[string]string{"memory": "1.5Gi"}
		}), ConfigFile: "c.yaml"}, nil},

		// kernel-memcg-notification-on-cgroup-v2
		{"memcg notification on v2", Input{Config: with(func(k *kcfg) { k.KernelMemcgNotification = true }), ConfigFile: "c.yaml", CgroupVersion: 2},
			[]want{{"kernel-memcg-notification-on-cgroup-v2", SeverityWarning, "kernelMemcgNotification", ""}}},
		{"memcg notification, version unknown", Input{Config: with(func(k *kcfg) { k.KernelMemcgNotification = true }), ConfigFile: "c.yaml"},
			[]want{{"kernel-memcg-notification-on-cgroup-v2", SeverityInfo, "kernelMemcgNotification", ""}}},
		{"memcg notification on v1", Input{Config: with(func(k *kcfg) { k.KernelMemcgNotification = true }), ConfigFile: "c.yaml", CgroupVersion: 1}, nil},

		// imagefs-thresholds-on-single-filesystem
		{"default imagefs on single fs", Input{Config: with(func(k *kcfg) { k.EvictionHard = nil }), ConfigFile: "c.yaml", Layout: LayoutSingle},
			[]want{{"imagefs-thresholds-on-single-filesystem", SeverityWarning, "evictionHard.imagefs.available (default)",
				"on a single filesystem imagefs.available<15% is the effective disk threshold, not nodefs.available<10%"}}},
		{"imagefs not above nodefs on single fs", Input{Config: with(func(k *kcfg) { k.EvictionHard["imagefs.available"] = "10%" }), ConfigFile: "c.yaml", Layout: LayoutSingle}, nil},
		{"default imagefs with a dedicated imagefs", Input{Config: with(func(k *kcfg) { k.EvictionHard = nil }), ConfigFile: "c.yaml", Layout: LayoutImageFs}, nil},

		// local-storage-capacity-isolation-off
		{"local storage isolation off", Input{Config: with(func(k *kcfg) { k.LocalStorageCapacityIsolation = boolp(false) }), ConfigFile: "c.yaml"},
			[]want{{"local-storage-capacity-isolation-off", SeverityWarning, "localStorageCapacityIsolation", ""}}},

		// separate-disk-gc-off-with-split-filesystem
		{"split fs with KubeletSeparateDiskGC off", Input{Config: with(func(k *kcfg) { k.FeatureGates = map[string]bool{"KubeletSeparateDiskGC": false} }),
			ConfigFile: "c.yaml", Layout: LayoutSplit},
			[]want{{"separate-disk-gc-off-with-split-filesystem", SeverityWarning, "featureGates.KubeletSeparateDiskGC", ""}}},
		{"single fs with KubeletSeparateDiskGC off", Input{Config: with(func(k *kcfg) { k.FeatureGates = map[string]bool{"KubeletSeparateDiskGC": false} }),
			ConfigFile: "c.yaml", Layout: LayoutImageFs}, nil},

		// reading: what the kubelet accepts without a word, as warnings
		// that do not stop the other rules
		{"unknown field and a pitfall", Input{Config: with(func(k *kcfg) { k.EvictionMaxPodGracePeriod = 0 }), ConfigFile: "c.yaml",
			Reading: []error{&load.Error{File: "c.yaml", Field: "evictionSoftGracePeriods", Err: load.ErrUnknownField}}},
			[]want{{"max-pod-grace-period", SeverityWarning, "evictionMaxPodGracePeriod", ""},
				{"unknown-field", SeverityWarning, "evictionSoftGracePeriods", "unknown field in c.yaml"}}},
		{"unknown field in a drop-in", Input{Config: file(), ConfigFile: "c.yaml",
			Reading: []error{&load.Error{File: "d/10.conf", Field: "evictionHrad", Err: kubeletconfig.ErrDropInUnknownField}}},
			[]want{{"unknown-field", SeverityWarning, "evictionHrad", "unknown field in the drop-in d/10.conf"}}},
		{"duplicate key", Input{Config: file(), ConfigFile: "c.yaml",
			Reading: []error{&load.Error{File: "c.yaml", Field: "evictionHard", Value: "evictionHard", Err: fmt.Errorf("%w (lines 3 and 4)", load.ErrDuplicateKey)}}},
			[]want{{"duplicate-key", SeverityWarning, "evictionHard", "duplicate key in c.yaml"}}},
		{"drop-in field in another case", Input{Config: file(), ConfigFile: "c.yaml",
			Reading: []error{&load.Error{File: "d/10.conf", Field: "EvictionHard", Value: "evictionHard", Err: kubeletconfig.ErrFieldCase}}},
			[]want{{"drop-in-field-case", SeverityWarning, "EvictionHard", "the drop-in d/10.conf spells the field evictionHard in another case"}}},
		{"mergeDefaultEvictionSettings in a drop-in", Input{Config: file(), ConfigFile: "c.yaml",
			Reading: []error{&load.Error{File: "d/10.conf", Field: "mergeDefaultEvictionSettings", Value: "true", Err: kubeletconfig.ErrMergeDefaultsInDropIn}}},
			[]want{{"merge-defaults-in-drop-in", SeverityWarning, "mergeDefaultEvictionSettings", ""}}},
		{"skipped drop-in", Input{Config: file(), ConfigFile: "c.yaml", Skipped: []string{"d/10.yaml"}},
			[]want{{"drop-in-skipped", SeverityInfo, "d/10.yaml", "the kubelet skips this file of its --config-dir"}}},

		// quantity-below-one-unit
		{"500m is half a byte", Input{Config: with(func(k *kcfg) {
			k.EvictionHard["memory.available"] = "500m"
			k.EvictionSoft = nil
			k.EvictionSoftGracePeriod = nil
		}), ConfigFile: "c.yaml"},
			[]want{{"quantity-below-one-unit", SeverityWarning, "evictionHard.memory.available", "500m is 0.5 bytes: the suffix m is milli (thousandths), not mega"}}},
		{"a fraction of an inode and of a byte of reclaim", Input{Config: with(func(k *kcfg) {
			k.EvictionHard["nodefs.inodesFree"] = "1.5"
			k.EvictionMinimumReclaim = map[string]string{"memory.available": "100m"}
		}), ConfigFile: "c.yaml"}, []want{
			{"quantity-below-one-unit", SeverityWarning, "evictionHard.nodefs.inodesFree", "1.5 is 1.5 inodes: not a whole number of inodes"},
			{"quantity-below-one-unit", SeverityWarning, "evictionMinimumReclaim.memory.available", ""},
		}},
		{"whole quantities with decimals are fine", Input{Config: with(func(k *kcfg) {
			k.EvictionHard["memory.available"] = "0.5Gi"
			k.EvictionSoft["memory.available"] = "1.5Gi"
		}), ConfigFile: "c.yaml"}, nil},

		// threshold-suspiciously-small
		{"100 is 100 bytes", Input{Config: with(func(k *kcfg) { k.EvictionHard["nodefs.available"] = "100" }), ConfigFile: "c.yaml"},
			[]want{{"threshold-suspiciously-small", SeverityWarning, "evictionHard.nodefs.available", "100 is 100 bytes: a threshold met only when nodefs is practically exhausted"}}},
		{"100Ki soft", Input{Config: with(func(k *kcfg) { k.EvictionSoft["memory.available"] = "100Ki" }), ConfigFile: "c.yaml", FlagsSet: []string{"eviction-soft"}},
			[]want{{"soft-not-above-hard", SeverityWarning, "--eviction-soft.memory.available", ""},
				{"threshold-suspiciously-small", SeverityWarning, "--eviction-soft.memory.available", ""}}},
		{"small counts are not bytes", Input{Config: with(func(k *kcfg) { k.EvictionHard["pid.available"] = "100"; k.EvictionHard["nodefs.inodesFree"] = "1000" }), ConfigFile: "c.yaml"}, nil},

		// flag-replaces-file-map
		{"flag over a file map", Input{Config: file(), ConfigFile: "c.yaml", FlagsSet: []string{"eviction-soft"}, Present: map[string]bool{"evictionSoft": true}},
			[]want{{"flag-replaces-file-map", SeverityInfo, "--eviction-soft", "--eviction-soft replaces the file's whole evictionSoft map"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d:\n%s", len(got), len(tc.want), dump(got))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Rule != w.rule || g.Severity != w.severity || g.Field != w.field || (w.message != "" && g.Message != w.message) {
					t.Errorf("finding %d:\n got %s %s %s: %s\nwant %s %s %s: %s", i, g.Severity, g.Rule, g.Field, g.Message, w.severity, w.rule, w.field, w.message)
				}
				if g.Why == "" || g.Fix == "" || g.Message == "" {
					t.Errorf("finding %d lacks message, why or fix: %+v", i, g)
				}
			}
		})
	}
}

// Every rule has at least one case above that makes it fire.
func TestEveryRuleIsTested(t *testing.T) {
	// Collected by running the cases' inputs would duplicate the table; the
	// rule names are listed in the table's want entries instead.
	src := testSourceRules()
	for _, r := range Rules() {
		if !src[r] {
			t.Errorf("rule %s has no firing case in TestRules", r)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		sev  []Severity
		want int
	}{
		{nil, 0},
		{[]Severity{SeverityInfo}, 0},
		{[]Severity{SeverityInfo, SeverityWarning}, 1},
		{[]Severity{SeverityWarning, SeverityError}, 2},
	} {
		var fs []Finding
		for _, s := range tc.sev {
			fs = append(fs, Finding{Severity: s})
		}
		if got := ExitCode(fs); got != tc.want {
			t.Errorf("%v: %d, want %d", tc.sev, got, tc.want)
		}
	}
}

func TestFindingsSortedBySeverityThenField(t *testing.T) {
	in := Input{Config: with(func(k *kcfg) {
		k.LocalStorageCapacityIsolation = boolp(false)
		k.EvictionHard["foo"] = "1"
		k.EvictionSoftGracePeriod["nodefs.available"] = "1m"
		k.EvictionHard["containerfs.available"] = "1%"
	}), ConfigFile: "c.yaml"}
	got := Check(in)
	if !sort.SliceIsSorted(got, func(i, j int) bool {
		if a, b := got[i].Severity.rank(), got[j].Severity.rank(); a != b {
			return a < b
		}
		return got[i].Field < got[j].Field
	}) || len(got) < 4 {
		t.Errorf("not sorted or missing:\n%s", dump(got))
	}
}

// testSourceRules returns the rule names quoted in this file's want entries.
func testSourceRules() map[string]bool {
	src, err := os.ReadFile("lint_test.go")
	if err != nil {
		panic(err)
	}
	out := map[string]bool{}
	for _, r := range Rules() {
		if strings.Contains(string(src), "[]want{{\""+r+"\"") || strings.Contains(string(src), "\t\t\t{\""+r+"\"") {
			out[r] = true
		}
	}
	return out
}

func dump(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + string(f.Severity) + " " + f.Rule + " " + f.Field + ": " + f.Message + "\n")
	}
	return b.String()
}

// TestThresholdFixByKind: the fix follows the error's kind, for every kind
// the kubelet's parsers return.
func TestThresholdFixByKind(t *testing.T) {
	for _, tc := range []struct {
		hard, soft, grace, reclaim map[string]string
		fix                        string
	}{
		{hard: map[string]string{"memory.availabel": "1Gi"}, fix: "use one of: memory.available, "},
		{hard: map[string]string{"memory.available": "abc"}, fix: "write a quantity like 100Mi"},
		{hard: map[string]string{"memory.available": "x%"}, fix: "write a quantity like 100Mi"},
		{hard: map[string]string{"memory.available": "0"}, fix: "use a positive quantity such as 100Mi"},
		{hard: map[string]string{"nodefs.available": "101%"}, fix: "use a percentage between 0% and 100%"},
		{grace: map[string]string{"memory.available": "-1m"}, fix: "use a non-negative Go duration"},
		{grace: map[string]string{"memory.available": "soon"}, fix: "write a Go duration such as 90s"},
		{soft: map[string]string{"memory.available": "1Gi"}, fix: "add the grace period"},
		{reclaim: map[string]string{"memory.available": "-1Mi"}, fix: "use a non-negative quantity such as 500Mi"},
		{reclaim: map[string]string{"memory.available": "0%"}, fix: "use a positive percentage or a quantity"},
	} {
		_, err := policy.ParseThresholdConfig(nil, tc.hard, tc.soft, tc.grace, tc.reclaim)
		if err == nil {
			t.Errorf("%+v: no error", tc)
			continue
		}
		if got := thresholdFix(err); !strings.HasPrefix(got, tc.fix) {
			t.Errorf("%v (kind %v): fix %q, want %q…", err, policy.KindOf(err), got, tc.fix)
		}
	}
}
