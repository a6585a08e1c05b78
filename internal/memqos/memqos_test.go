package memqos

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

const (
	pageSize       = 4096
	allocatable32G = 32 * 1024 * 1024 * 1024 // fakeNodeAllocatableMemory of the kubelet's tests
)

// kubeletHigh is the kubelet's formula as its own tests write it.
func kubeletHigh(req, lim int64, f float64) int64 {
	return int64((float64(req)+(float64(lim)-float64(req))*f)/float64(pageSize)) * pageSize
}

func settings(policy ReservationPolicy, f *float64) Settings {
	s := DefaultSettings()
	s.ReservationPolicy = policy
	s.ThrottlingFactor = f
	s.PageSize = pageSize
	s.NodeAllocatableMemory = allocatable32G
	s.MemoryCapacity = 64 * 1024 * 1024 * 1024
	return s
}

// Cases of kuberuntime_container_linux_test.go (v1.37.2):
// TestGenerateContainerConfigWithMemoryQoSEnforced (the non-DRA pods),
// ...MemoryHighNotSetWhenThrottlingFactorNil, ...DefaultNilThrottlingFactor,
// ...MemoryQoSPolicyNone, TestMemoryHighClearedWhenMemoryQoSDisabled and
// TestContainerMemoryHighSkippedWithPodLevelResources.
func TestContainerValues(t *testing.T) {
	burstable := podOf(ctr("foo", res(rl("", "128Mi"), rl("", "256Mi"))))
	burstableNoLimit := podOf(ctr("foo", res(rl("", "128Mi"), nil)))
	bestEffort := podOf(ctr("foo", res(nil, nil)))
	guaranteed := podOf(ctr("foo", res(rl("1", "256Mi"), rl("1", "256Mi"))))
	podLevel := podOf(
		ctr("c1-with-limit", res(rl("100m", "256Mi"), rl("200m", "512Mi"))),
		ctr("c2-no-limit", res(rl("100m", "256Mi"), nil)))
	podLevel.Spec.Resources = &v1.ResourceRequirements{Limits: rl("", "1Gi")}
	cpuOnlyPodLevel := podOf(ctr("c1", res(rl("100m", "256Mi"), nil)))
	cpuOnlyPodLevel.Spec.Resources = &v1.ResourceRequirements{Limits: rl("2", "")}

	tiered09 := settings(ReservationTiered, factor(0.9))
	none09 := settings(ReservationNone, factor(0.9))
	qosOff := settings(ReservationTiered, factor(0.9))
	qosOff.MemoryQoS = false
	v1Cgroups := settings(ReservationTiered, factor(0.9))
	v1Cgroups.CgroupV2 = false
	podLevelOff := settings(ReservationNone, factor(0.9))
	podLevelOff.PodLevelResources = false

	nw := NotWritten()
	for _, tc := range []struct {
		name            string
		pod             *v1.Pod
		container       int
		s               Settings
		min, low, high  Value
		wantHighFromAll bool // memory.high computed from allocatable
	}{
		{"burstable with limit: low = request, high from limit", burstable, 0, tiered09,
			nw, Bytes(mib(128)), Bytes(kubeletHigh(mib(128), mib(256), 0.9)), false},
		{"burstable without limit: high from node allocatable", burstableNoLimit, 0, tiered09,
			nw, Bytes(mib(128)), Bytes(kubeletHigh(mib(128), allocatable32G, 0.9)), true},
		{"best effort: min and low written as 0, high from node allocatable", bestEffort, 0, tiered09,
			Bytes(0), Bytes(0), Bytes(kubeletHigh(0, allocatable32G, 0.9)), true},
		{"guaranteed: min = request, no high", guaranteed, 0, tiered09,
			Bytes(mib(256)), nw, nw, false},
		{"nil throttling factor: no memory.high, low still set", burstable, 0, settings(ReservationTiered, nil),
			nw, Bytes(mib(128)), nw, false},
		{"policy None, default nil factor: min 0, low 0, no high", burstable, 0, settings(ReservationNone, nil),
			Bytes(0), Bytes(0), nw, false},
		{"policy None with factor: min 0, high set", burstable, 0, none09,
			Bytes(0), Bytes(0), Bytes(kubeletHigh(mib(128), mib(256), 0.9)), false},
		{"policy None, guaranteed: min 0 low 0, no high", guaranteed, 0, none09,
			Bytes(0), Bytes(0), nw, false},
		{"MemoryQoS off on cgroup v2: memory.high reset to max", burstable, 0, qosOff, nw, nw, Max(), false},
		{"cgroup v1: nothing written", burstable, 0, v1Cgroups, nw, nw, nw, false},
		{"pod-level memory limit: container with own limit keeps its high", podLevel, 0, none09,
			Bytes(0), Bytes(0), Bytes(kubeletHigh(mib(256), mib(512), 0.9)), false},
		{"pod-level memory limit: container without limit gets no high", podLevel, 1, none09,
			Bytes(0), Bytes(0), nw, false},
		{"PodLevelResources gate off: container without limit uses allocatable", podLevel, 1, podLevelOff,
			Bytes(0), Bytes(0), Bytes(kubeletHigh(mib(256), allocatable32G, 0.9)), true},
		{"cpu-only pod-level resources: allocatable fallback", cpuOnlyPodLevel, 0, none09,
			Bytes(0), Bytes(0), Bytes(kubeletHigh(mib(256), allocatable32G, 0.9)), true},
		{"factor 1.0 with limit: high = limit rounded down", podOf(ctr("c", res(rl("", "100"), rl("", "10000")))), 0,
			settings(ReservationNone, factor(1.0)), Bytes(0), Bytes(0), Bytes(8192), false},
		{"high not above request: not written", podOf(ctr("c", res(rl("", "5000"), rl("", "6000")))), 0,
			settings(ReservationNone, factor(0.5)), Bytes(0), Bytes(0), nw, false},
		{"no allocatable known and no limit: no high", burstableNoLimit, 0,
			func() Settings { s := tiered09; s.NodeAllocatableMemory = 0; return s }(), nw, Bytes(mib(128)), nw, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ForPod(tc.pod, tc.s)
			c := p.Containers[tc.container]
			if c.MemoryMin != tc.min || c.MemoryLow != tc.low || c.MemoryHigh != tc.high {
				t.Errorf("min %s low %s high %s, want min %s low %s high %s", c.MemoryMin, c.MemoryLow, c.MemoryHigh, tc.min, tc.low, tc.high)
			}
			if c.MemoryHigh.Written && !c.MemoryHigh.Max && c.MemoryHigh.Bytes%pageSize != 0 {
				t.Errorf("memory.high %d is not page aligned", c.MemoryHigh.Bytes)
			}
		})
	}
}

func TestPageSizeIsAParameter(t *testing.T) {
	p := podOf(ctr("c", res(rl("", "128Mi"), rl("", "200000001"))))
	s := settings(ReservationNone, factor(0.9))
	var got []int64
	for _, ps := range []int64{4096, 16384, 65536} {
		s.PageSize = ps
		h := ForPod(p, s).Containers[0].MemoryHigh
		if h.Bytes%ps != 0 {
			t.Errorf("page %d: %d not aligned", ps, h.Bytes)
		}
		got = append(got, h.Bytes)
	}
	// floor((134217728 + 0.9*(200000001-134217728))/ps)*ps
	want := []int64{193421312, 193413120, 193396736}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("page sizes 4K/16K/64K: got %v, want %v", got, want)
			break
		}
	}
}

// Cases of cm/helpers_linux_test.go TestResourceConfigForPodWithEnforceMemoryQoS
// and TestApplyPodLevelMemoryHigh (v1.37.2), for the pod's own cgroup.
func TestPodCgroupValues(t *testing.T) {
	tiered := settings(ReservationTiered, nil)
	nw := NotWritten()
	partial := podOf(ctr("a", res(rl("100m", "100Mi"), rl("200m", "200Mi"))), ctr("b", res(rl("100m", "100Mi"), nil)))
	for _, tc := range []struct {
		name           string
		pod            *v1.Pod
		s              Settings
		min, low, high Value
	}{
		{"besteffort", podOf(ctr("a", res(nil, nil))), tiered, nw, nw, nw},
		{"burstable-no-limits", podOf(ctr("a", res(rl("100m", "100Mi"), nil))), tiered, nw, Bytes(104857600), nw},
		{"burstable-with-limits", podOf(ctr("a", res(rl("100m", "100Mi"), rl("200m", "200Mi")))), tiered, nw, Bytes(104857600), nw},
		{"burstable-partial-limits", partial, tiered, nw, Bytes(209715200), nw},
		{"guaranteed", podOf(ctr("a", res(rl("100m", "100Mi"), rl("100m", "100Mi")))), tiered, Bytes(104857600), nw, nw},
		{"policy None writes no pod protection", podOf(ctr("a", res(rl("100m", "100Mi"), nil))), settings(ReservationNone, nil), nw, nw, nw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ForPod(tc.pod, tc.s).Cgroup
			if c.MemoryMin != tc.min || c.MemoryLow != tc.low || c.MemoryHigh != tc.high {
				t.Errorf("pod cgroup min %s low %s high %s, want %s %s %s", c.MemoryMin, c.MemoryLow, c.MemoryHigh, tc.min, tc.low, tc.high)
			}
		})
	}

	s := settings(ReservationNone, factor(0.9))
	cpuOnly := podOf(ctr("a", res(rl("100m", "100Mi"), rl("200m", ""))))
	cpuOnly.Spec.Resources = &v1.ResourceRequirements{Limits: rl("2", "")}
	if h := ForPod(cpuOnly, s).Cgroup.MemoryHigh; h.Written {
		t.Errorf("cpu-only pod-level resources: pod memory.high %s, want not written", h)
	}
	mixed := podOf(ctr("a", res(rl("100m", "100Mi"), rl("200m", "200Mi"))), ctr("b", res(rl("100m", "100Mi"), nil)))
	mixed.Spec.Resources = &v1.ResourceRequirements{Limits: rl("2", "")}
	if h := ForPod(mixed, s).Cgroup.MemoryHigh; h.Written {
		t.Errorf("mixed declared limits: pod memory.high %s, want not written", h)
	}
	withOverhead := podOf(ctr("a", res(rl("1", "128Mi"), rl("1", "256Mi"))))
	withOverhead.Spec.Resources = &v1.ResourceRequirements{Requests: rl("1", "128Mi"), Limits: rl("1", "256Mi")}
	noOverhead := ForPod(withOverhead, s).Cgroup.MemoryHigh
	withOverhead.Spec.Overhead = rl("", "64Mi")
	over := ForPod(withOverhead, s).Cgroup.MemoryHigh
	if !noOverhead.Written || noOverhead.Bytes != kubeletHigh(mib(128), mib(256), 0.9) {
		t.Errorf("pod memory.high without overhead %s, want %d", noOverhead, kubeletHigh(mib(128), mib(256), 0.9))
	}
	if over.Bytes != kubeletHigh(mib(192), mib(320), 0.9) {
		t.Errorf("pod memory.high with 64Mi overhead %s, want %d", over, kubeletHigh(mib(192), mib(320), 0.9))
	}
}

func TestQoSValues(t *testing.T) {
	pods := []*v1.Pod{
		podOf(ctr("g", res(rl("1", "1Gi"), rl("1", "1Gi")))),
		podOf(ctr("b", res(rl("", "256Mi"), nil))),
		podOf(ctr("b2", res(rl("", "256Mi"), rl("", "1Gi")))),
		podOf(ctr("be", res(nil, nil))),
	}
	got := QoSValues(pods, settings(ReservationTiered, nil))
	want := QoSCgroups{KubepodsMemoryMin: Bytes(mib(1024 + 512)), KubepodsMemoryLow: Bytes(mib(512)), BurstableMemoryLow: Bytes(mib(512))}
	if got != want {
		t.Errorf("tiered: %+v, want %+v", got, want)
	}
	zero := QoSCgroups{KubepodsMemoryMin: Bytes(0), KubepodsMemoryLow: Bytes(0), BurstableMemoryLow: Bytes(0)}
	if got := QoSValues(pods, settings(ReservationNone, nil)); got != zero {
		t.Errorf("None: %+v, want the startup reset to 0", got)
	}
	s := settings(ReservationTiered, nil)
	s.CgroupV2 = false
	if got := QoSValues(pods, s); got != (QoSCgroups{}) {
		t.Errorf("cgroup v1: %+v, want nothing written", got)
	}
}

func TestJSONShape(t *testing.T) {
	p := podOf(ctr("app", res(rl("", "128Mi"), rl("", "256Mi"))), ctr("side", res(nil, nil)))
	p.Name, p.Namespace = "web", "prod"
	qosOff := settings(ReservationTiered, factor(0.9))
	pods, _, err := ForPods([]*v1.Pod{p}, qosOff)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(pods)
	if err != nil {
		t.Fatal(err)
	}
	// 128Mi + 0.9×128Mi = 255013683.2 → 62259 pages; 0.9×32Gi = 30923764531.2 → 7549747 pages;
	// oom: 1000 − 1000×128Mi/64Gi = 999; no request: 1000 → 999 (Burstable pod).
	want := `[{"namespace":"prod","name":"web","qosClass":"Burstable","containers":[` +
		`{"name":"app","memoryMin":null,"memoryLow":134217728,"memoryHigh":255012864,"oomScoreAdj":999},` +
		`{"name":"side","memoryMin":0,"memoryLow":0,"memoryHigh":30923763712,"oomScoreAdj":999}]}]`
	if string(b) != want {
		t.Errorf("json\n got %s\nwant %s", b, want)
	}
	qosOff.MemoryQoS = false
	pods, _, _ = ForPods([]*v1.Pod{p}, qosOff)
	b, _ = json.Marshal(pods[0].Containers[0])
	if !strings.Contains(string(b), `"memoryHigh":"max"`) {
		t.Errorf("MemoryQoS off: %s, want memoryHigh \"max\"", b)
	}
}

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.ThrottlingFactor = factor(0) }, "memoryThrottlingFactor 0 must be greater than 0 and less than or equal to 1.0"},
		{func(s *Settings) { s.ThrottlingFactor = factor(1.5) }, "memoryThrottlingFactor 1.5 must be greater than 0"},
		{func(s *Settings) { s.ReservationPolicy = "Tiered" }, `option "Tiered" specified for memoryReservationPolicy`},
		{func(s *Settings) { s.MemoryCapacity = 0 }, "memory capacity must be positive"},
		{func(s *Settings) { s.PageSize = 0 }, "page size must be positive"},
	} {
		s := settings(ReservationNone, nil)
		tc.mut(&s)
		_, _, err := ForPods(nil, s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

func TestFromKubelet(t *testing.T) {
	s, err := FromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{})
	if err != nil || !s.MemoryQoS || s.ReservationPolicy != ReservationNone || s.ThrottlingFactor != nil {
		t.Errorf("defaults: %+v %v (v1.37: MemoryQoS on, policy None, no throttling factor)", s, err)
	}
	s, err = FromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{
		FeatureGates:            map[string]bool{"PodLevelResources": false},
		MemoryReservationPolicy: "TieredReservation", MemoryThrottlingFactor: factor(0.8),
	})
	if err != nil || s.ReservationPolicy != ReservationTiered || *s.ThrottlingFactor != 0.8 || s.PodLevelResources {
		t.Errorf("explicit: %+v %v", s, err)
	}
	for _, tc := range []struct {
		kc   kubeletconfigv1beta1.KubeletConfiguration
		kind policy.ErrorKind
		want string
	}{
		{kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{"MemoryQoS": false}, MemoryThrottlingFactor: factor(0.7)},
			policy.ErrThrottlingFactorWithoutMemoryQoS,
			"invalid configuration: memoryThrottlingFactor must not be set when MemoryQoS feature gate is disabled"},
		{kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{"MemoryQoS": false}, MemoryReservationPolicy: "TieredReservation"},
			policy.ErrReservationPolicyNeedsMemoryQoS,
			`invalid configuration: memoryReservationPolicy "TieredReservation" requires MemoryQoS feature gate to be enabled`},
		{kubeletconfigv1beta1.KubeletConfiguration{MemoryReservationPolicy: "Strict"},
			policy.ErrUnknownReservationPolicy,
			`invalid configuration: option "Strict" specified for memoryReservationPolicy. Valid options are "None" or "TieredReservation"`},
		{kubeletconfigv1beta1.KubeletConfiguration{MemoryThrottlingFactor: factor(-1)},
			policy.ErrThrottlingFactorOutOfRange,
			"invalid configuration: memoryThrottlingFactor -1 must be greater than 0 and less than or equal to 1.0"},
	} {
		_, err := FromKubelet(&tc.kc)
		if err == nil || err.Error() != tc.want {
			t.Errorf("err = %v\nwant %s", err, tc.want)
		}
		if k := policy.KindOf(err); k != tc.kind {
			t.Errorf("%v: kind %v, want %v", err, k, tc.kind)
		}
	}
	// 0.9 (the old default) stays accepted with MemoryQoS off.
	if _, err := FromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{"MemoryQoS": false}, MemoryThrottlingFactor: factor(0.9)}); err != nil {
		t.Errorf("0.9 with MemoryQoS off: %v", err)
	}
}

func TestNodeAllocatableMemory(t *testing.T) {
	kc := &kubeletconfigv1beta1.KubeletConfiguration{SystemReserved: map[string]string{"memory": "1Gi", "cpu": "1"}, KubeReserved: map[string]string{"memory": "512Mi"}}
	if got, err := NodeAllocatableMemory(mib(8192), kc); err != nil || got != mib(8192-1024-512) {
		t.Errorf("got %d %v", got, err)
	}
	if got, _ := NodeAllocatableMemory(mib(1024), kc); got != 0 {
		t.Errorf("over-reserved: %d, want 0", got)
	}
	kc.KubeReserved["memory"] = "lots"
	if _, err := NodeAllocatableMemory(mib(8192), kc); err == nil || !strings.Contains(err.Error(), `kubeReserved.memory: "lots"`) {
		t.Errorf("err = %v", err)
	}
}
