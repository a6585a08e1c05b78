package policy

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Test helpers: small builders for pods and stats, in the spirit of the
// kubelet's helpers_test.go but written for evictd.

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func u64(s string) *uint64 { r := resource.MustParse(s); v := uint64(r.Value()); return &v }

// resources builds a ResourceList from "cpu", "memory", "ephemeral-storage"
// values; empty strings are left out.
func resources(cpu, mem, disk string) v1.ResourceList {
	r := v1.ResourceList{}
	if cpu != "" {
		r[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		r[v1.ResourceMemory] = resource.MustParse(mem)
	}
	if disk != "" {
		r[v1.ResourceEphemeralStorage] = resource.MustParse(disk)
	}
	return r
}

func container(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func pod(name string, priority int32, containers []v1.Container, volumes []v1.Volume) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{Containers: containers, Volumes: volumes, Priority: &priority},
	}
	return p
}

func emptyDirVolume(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
}

func ref(p *v1.Pod) statsv1alpha1.PodReference {
	return statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}
}

// memStats gives the pod and each of its containers the working set.
func memStats(p *v1.Pod, workingSet string) statsv1alpha1.PodStats {
	ps := statsv1alpha1.PodStats{PodRef: ref(p), Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: u64(workingSet)}}
	for _, c := range p.Spec.Containers {
		ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{Name: c.Name, Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: u64(workingSet)}})
	}
	return ps
}

// diskStats gives every container rootfs and logs usage and every local
// volume the same usage (bytes, or inodes when inodes is true).
func diskStats(p *v1.Pod, rootfs, logs, perVolume string, inodes bool) statsv1alpha1.PodStats {
	fs := func(v string) *statsv1alpha1.FsStats {
		if inodes {
			return &statsv1alpha1.FsStats{InodesUsed: u64(v)}
		}
		return &statsv1alpha1.FsStats{UsedBytes: u64(v)}
	}
	ps := statsv1alpha1.PodStats{PodRef: ref(p)}
	for _, c := range p.Spec.Containers {
		ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{Name: c.Name, Rootfs: fs(rootfs), Logs: fs(logs)})
	}
	for i := range p.Spec.Volumes {
		vol := &p.Spec.Volumes[i]
		if vol.HostPath != nil || isLocalEphemeralVolume(vol) {
			ps.VolumeStats = append(ps.VolumeStats, statsv1alpha1.VolumeStats{Name: vol.Name, FsStats: *fs(perVolume)})
		}
	}
	return ps
}

func procStats(p *v1.Pod, n uint64) statsv1alpha1.PodStats {
	return statsv1alpha1.PodStats{PodRef: ref(p), ProcessStats: &statsv1alpha1.ProcessStats{ProcessCount: &n}}
}

func index(ps ...statsv1alpha1.PodStats) map[string]*statsv1alpha1.PodStats {
	return podStatsIndex(&statsv1alpha1.Summary{Pods: ps})
}

func names(r ranked) []string { return r.names() }

// rankTest ranks with fresh facts and the single-filesystem layout.
func rankTest(pods []*v1.Pod, stats map[string]*statsv1alpha1.PodStats, s Signal) ranked {
	facts := make([]*podFacts, len(pods))
	for i, p := range pods {
		facts[i] = newPodFacts(p, DefaultFeatureGates())
	}
	return rankPods(pods, facts, stats, s, Filesystems{})
}

func TestParseThresholdConfig(t *testing.T) {
	cases := []struct {
		name                          string
		allocatable                   []string
		hard, soft, grace, minReclaim map[string]string
		want                          []string // Threshold.String() in order
		wantErr                       string
	}{
		{name: "nothing configured", want: nil},
		{
			name:        "memory: hard, soft, min-reclaim and the allocatable copy",
			allocatable: []string{"pods"},
			hard:        map[string]string{"memory.available": "150Mi"},
			soft:        map[string]string{"memory.available": "300Mi"},
			grace:       map[string]string{"memory.available": "30s"},
			minReclaim:  map[string]string{"memory.available": "0"},
			want: []string{
				"memory.available<150Mi (min-reclaim 0)",
				"memory.available<300Mi (soft, grace 30s) (min-reclaim 0)",
				"allocatableMemory.available<150Mi (min-reclaim 0)",
			},
		},
		{
			name:       "memory in percentages",
			hard:       map[string]string{"memory.available": "10%"},
			soft:       map[string]string{"memory.available": "30%"},
			grace:      map[string]string{"memory.available": "30s"},
			minReclaim: map[string]string{"memory.available": "5%"},
			want: []string{
				"memory.available<10% (min-reclaim 5%)",
				"memory.available<30% (soft, grace 30s) (min-reclaim 5%)",
			},
		},
		{
			name:       "disk quantities and a fractional percentage",
			hard:       map[string]string{"imagefs.available": "150Mi", "nodefs.available": "10.5%"},
			soft:       map[string]string{"imagefs.available": "300Mi", "nodefs.available": "200Mi"},
			grace:      map[string]string{"imagefs.available": "30s", "nodefs.available": "30s"},
			minReclaim: map[string]string{"imagefs.available": "2Gi", "nodefs.available": "1%"},
			want: []string{
				"imagefs.available<150Mi (min-reclaim 2Gi)",
				"nodefs.available<10.5% (min-reclaim 1%)",
				"imagefs.available<300Mi (soft, grace 30s) (min-reclaim 2Gi)",
				"nodefs.available<200Mi (soft, grace 30s) (min-reclaim 1%)",
			},
		},
		{
			name:  "inodes",
			hard:  map[string]string{"imagefs.inodesFree": "150Mi", "nodefs.inodesFree": "100Mi"},
			soft:  map[string]string{"imagefs.inodesFree": "300Mi", "nodefs.inodesFree": "200Mi"},
			grace: map[string]string{"imagefs.inodesFree": "30s", "nodefs.inodesFree": "30s"},
			want: []string{
				"imagefs.inodesFree<150Mi",
				"nodefs.inodesFree<100Mi",
				"imagefs.inodesFree<300Mi (soft, grace 30s)",
				"nodefs.inodesFree<200Mi (soft, grace 30s)",
			},
		},
		{name: "0% disables a signal", hard: map[string]string{"memory.available": "0%", "nodefs.available": "10%"}, want: []string{"nodefs.available<10%"}},
		{name: "100% disables a signal", hard: map[string]string{"memory.available": "100%"}, want: nil},
		{name: "0.0% is not dropped", hard: map[string]string{"memory.available": "0.0%"}, want: []string{"memory.available<0%"}},
		{name: "soft with grace 0s is kept (and acts as hard)", soft: map[string]string{"memory.available": "1Gi"}, grace: map[string]string{"memory.available": "0s"}, want: []string{"memory.available<1Gi"}},
		{name: "grace period of a signal without soft threshold is ignored", grace: map[string]string{"memory.available": "1m"}, want: nil},
		{name: "invalid signal", hard: map[string]string{"mem.available": "150Mi"}, wantErr: "unsupported eviction signal mem.available"},
		{name: "hard value negative", hard: map[string]string{"memory.available": "-150Mi"}, wantErr: "eviction threshold memory.available must be positive: -150Mi"},
		{name: "hard value zero", hard: map[string]string{"memory.available": "0"}, wantErr: "eviction threshold memory.available must be positive: 0"},
		{name: "hard percentage negative", hard: map[string]string{"memory.available": "-15%"}, wantErr: "eviction percentage threshold memory.available must be >= 0%: -15%"},
		{name: "hard percentage over 100", hard: map[string]string{"memory.available": "150%"}, wantErr: "eviction percentage threshold memory.available must be <= 100%: 150%"},
		{name: "soft value negative", soft: map[string]string{"memory.available": "-150Mi"}, grace: map[string]string{"memory.available": "30s"}, wantErr: "eviction threshold memory.available must be positive: -150Mi"},
		{name: "valid and invalid signal", hard: map[string]string{"memory.available": "150Mi", "invalid.foo": "150Mi"}, wantErr: "unsupported eviction signal invalid.foo"},
		{name: "soft without grace period", soft: map[string]string{"memory.available": "150Mi"}, wantErr: "grace period must be specified for the soft eviction threshold memory.available"},
		{name: "negative grace period", soft: map[string]string{"memory.available": "150Mi"}, grace: map[string]string{"memory.available": "-30s"}, wantErr: "invalid eviction grace period specified: -30s, must be a positive value"},
		{name: "grace period not a duration", soft: map[string]string{"memory.available": "150Mi"}, grace: map[string]string{"memory.available": "30"}, wantErr: `time: missing unit in duration "30"`},
		{name: "negative min-reclaim", hard: map[string]string{"memory.available": "150Mi"}, minReclaim: map[string]string{"memory.available": "-300Mi"}, wantErr: "negative eviction minimum reclaim specified for memory.available"},
		{name: "min-reclaim 0% is an error", minReclaim: map[string]string{"memory.available": "0%"}, wantErr: "eviction percentage minimum reclaim memory.available must be positive: 0%"},
		{name: "min-reclaim of an unknown signal", minReclaim: map[string]string{"swap.available": "1Gi"}, wantErr: "unsupported eviction signal swap.available"},
		{name: "bad percentage", hard: map[string]string{"memory.available": "foo%"}, wantErr: `strconv.ParseFloat: parsing "foo": invalid syntax`},
		{name: "a % inside is a quantity error", hard: map[string]string{"memory.available": "12%345"}, wantErr: "quantities must match the regular expression"},
		{name: "bad quantity", hard: map[string]string{"memory.available": "lots"}, wantErr: "quantities must match the regular expression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholdConfig(tc.allocatable, tc.hard, tc.soft, tc.grace, tc.minReclaim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				s = append(s, th.String())
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Errorf("got %q\nwant %q", s, tc.want)
			}
		})
	}
	// The percentage keeps float32 precision, as in the kubelet.
	got, _ := ParseThresholdConfig(nil, map[string]string{"nodefs.available": "10.5%"}, nil, nil, nil)
	if got[0].Value.Percentage != float32(0.105) {
		t.Errorf("10.5%% parsed to %v, want float32(0.105)", got[0].Value.Percentage)
	}
}

func TestAddAllocatableThresholds(t *testing.T) {
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("150Mi")}, MinReclaim: &ThresholdValue{Quantity: q("0")}}
	soft := hard
	soft.GracePeriod = time.Minute
	hard2 := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("100Mi")}}
	cases := []struct {
		name string
		in   []Threshold
		want int // allocatable copies
	}{
		{"a hard memory threshold is copied", []Threshold{hard}, 1},
		{"a threshold with a grace period is not", []Threshold{soft}, 0},
		{"two hard thresholds give two copies", []Threshold{hard, hard2}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := addAllocatableThresholds(tc.in)
			if len(out) != len(tc.in)+tc.want {
				t.Fatalf("got %d thresholds, want %d", len(out), len(tc.in)+tc.want)
			}
			for i, c := range out[len(tc.in):] {
				src := tc.in[i]
				if c.Signal != SignalAllocatableMemoryAvailable || c.GracePeriod != 0 || c.Value.Quantity != src.Value.Quantity || c.MinReclaim != src.MinReclaim {
					t.Errorf("copy %d = %+v, want the allocatable signal with %v's value and min-reclaim", i, c, src)
				}
			}
		})
	}
}

func TestConfigFromKubeletOrder(t *testing.T) {
	yes := true
	cases := []struct {
		name string
		kc   kubeletconfigv1beta1.KubeletConfiguration
		want []Signal
	}{
		{"defaults in the literal order", kubeletconfigv1beta1.KubeletConfiguration{},
			[]Signal{SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable, SignalImageFsInodesFree, SignalAllocatableMemoryAvailable}},
		{"user keys sorted, then merged defaults", kubeletconfigv1beta1.KubeletConfiguration{
			EvictionHard: map[string]string{"pid.available": "10%", "imagefs.available": "20%"}, MergeDefaultEvictionSettings: &yes},
			[]Signal{SignalImageFsAvailable, SignalPIDAvailable, SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsInodesFree, SignalAllocatableMemoryAvailable}},
		{"no merge", kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"pid.available": "10%", "imagefs.available": "20%"}},
			[]Signal{SignalImageFsAvailable, SignalPIDAvailable}},
	}
	for _, tc := range cases {
		cfg, err := ConfigFromKubelet(&tc.kc)
		if err != nil {
			t.Fatal(err)
		}
		var got []Signal
		for _, th := range cfg.Thresholds {
			got = append(got, th.Signal)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParsePercentage(t *testing.T) {
	for in, want := range map[string]float32{"25.5%": 0.255, "10%": 0.1, "10%%": 0.1} {
		got, err := ParsePercentage(in)
		if err != nil || got != want {
			t.Errorf("ParsePercentage(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"blah", "foo%", "12%345"} {
		if _, err := ParsePercentage(in); err == nil {
			t.Errorf("ParsePercentage(%q) succeeded, want an error", in)
		}
	}
}

func TestSameValue(t *testing.T) {
	cases := []struct {
		a, b ThresholdValue
		want bool
	}{
		{ThresholdValue{Quantity: q("500Mi")}, ThresholdValue{Quantity: q("500Mi")}, true},
		{ThresholdValue{Quantity: q("500Mi")}, ThresholdValue{Quantity: q("512000Ki")}, true},
		{ThresholdValue{Quantity: q("500Mi")}, ThresholdValue{Quantity: q("501Mi")}, false},
		{ThresholdValue{Quantity: q("500Mi")}, ThresholdValue{Percentage: 0.1}, false},
		{ThresholdValue{Percentage: 0.1}, ThresholdValue{Quantity: q("500Mi")}, false},
		{ThresholdValue{Percentage: 0.1}, ThresholdValue{Percentage: 0.1}, true},
		{ThresholdValue{Percentage: 0.2}, ThresholdValue{Percentage: 0.1}, false},
	}
	for i, tc := range cases {
		if got := sameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("case %d: sameValue(%v, %v) = %v", i, tc.a, tc.b, got)
		}
	}
}

func TestUpdateContainerFsThresholds(t *testing.T) {
	hardNode := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	softNode := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.2}, GracePeriod: time.Minute}
	hardNodeIn := Threshold{Signal: SignalNodeFsInodesFree, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.05}}
	hardImage := Threshold{Signal: SignalImageFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.15}}
	hardImageIn := Threshold{Signal: SignalImageFsInodesFree, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.06}}
	userCFs := Threshold{Signal: SignalContainerFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.5}}
	base := []Threshold{hardNode, softNode, hardNodeIn, hardImage, hardImageIn}
	cases := []struct {
		name           string
		in             []Threshold
		imageFs, split bool
		want           []string
		wantErr        bool
	}{
		{name: "single filesystem copies nodefs", in: base, want: []string{
			"containerfs.available<10%", "containerfs.available<20% (soft, grace 1m0s)",
			"containerfs.inodesFree<5%", "containerfs.inodesFree (no source threshold: never met)"}},
		{name: "dedicated imagefs copies imagefs", in: base, imageFs: true, want: []string{
			"containerfs.available<15%", "containerfs.available (no source threshold: never met)",
			"containerfs.inodesFree<6%", "containerfs.inodesFree (no source threshold: never met)"}},
		{name: "split copies nodefs", in: base, imageFs: true, split: true, want: []string{
			"containerfs.available<10%", "containerfs.available<20% (soft, grace 1m0s)",
			"containerfs.inodesFree<5%", "containerfs.inodesFree (no source threshold: never met)"}},
		{name: "a user containerfs threshold is overridden in place", in: append([]Threshold{userCFs}, base...), wantErr: true, want: []string{
			"containerfs.available<20% (soft, grace 1m0s)",
			"containerfs.inodesFree<5%", "containerfs.inodesFree (no source threshold: never met)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := updateContainerFsThresholds(tc.in, tc.imageFs, tc.split)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if got := out[0].String(); got != "containerfs.available<10%" {
					t.Errorf("overridden threshold = %s, want the nodefs copy", got)
				}
			}
			var got []string
			for _, th := range out[len(tc.in):] {
				got = append(got, th.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("appended %q\nwant %q", got, tc.want)
			}
			if len(tc.in) > 0 && tc.in[0].Signal == SignalContainerFsAvailable && tc.in[0].Value.Percentage != 0.5 {
				t.Error("input slice was modified")
			}
		})
	}
}

func TestMakeObservations(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	max, cur := int64(32768), int64(1000)
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
		Memory: &statsv1alpha1.MemoryStats{Time: at, AvailableBytes: u64("500Mi"), WorkingSetBytes: u64("1500Mi")},
		SystemContainers: []statsv1alpha1.ContainerStats{{Name: "pods", Memory: &statsv1alpha1.MemoryStats{
			Time: at, AvailableBytes: u64("300Mi"), WorkingSetBytes: u64("700Mi")}}},
		Fs: &statsv1alpha1.FsStats{Time: at, AvailableBytes: u64("2Gi"), CapacityBytes: u64("10Gi"), InodesFree: u64("1000"), Inodes: u64("10000")},
		Runtime: &statsv1alpha1.RuntimeStats{
			ImageFs:     &statsv1alpha1.FsStats{Time: at, AvailableBytes: u64("3Gi"), CapacityBytes: u64("20Gi"), InodesFree: u64("2000"), Inodes: u64("20000")},
			ContainerFs: &statsv1alpha1.FsStats{Time: at, AvailableBytes: u64("4Gi"), CapacityBytes: u64("30Gi")},
		},
		Rlimit: &statsv1alpha1.RlimitStats{Time: at, MaxPID: &max, NumOfRunningProcesses: &cur},
	}}
	o := makeObservations(s)
	want := map[Signal][2]string{
		SignalMemoryAvailable:            {"500Mi", "2000Mi"},
		SignalAllocatableMemoryAvailable: {"300Mi", "1000Mi"},
		SignalNodeFsAvailable:            {"2Gi", "10Gi"},
		SignalNodeFsInodesFree:           {"1k", "10k"},
		SignalImageFsAvailable:           {"3Gi", "20Gi"},
		SignalImageFsInodesFree:          {"2k", "20k"},
		SignalContainerFsAvailable:       {"4Gi", "30Gi"},
		SignalPIDAvailable:               {"31768", "32768"},
	}
	for sig, w := range want {
		ob, ok := o.get(sig)
		if !ok {
			t.Errorf("%s: no observation", sig)
			continue
		}
		if ob.Available.String() != w[0] || ob.Capacity.String() != w[1] || !ob.Time.Equal(&at) {
			t.Errorf("%s: available %s capacity %s time %v; want %s %s", sig, &ob.Available, &ob.Capacity, ob.Time, w[0], w[1])
		}
	}
	if _, ok := o.get(SignalContainerFsInodesFree); ok {
		t.Error("containerfs.inodesFree observed without inode stats")
	}

	// Unsigned underflow: a working set above the limit wraps availableBytes
	// to a huge uint64, which the kubelet turns into a negative int64.
	var zero uint64
	wrapped := zero - uint64(100<<20)
	ws := uint64(8 << 30)
	s = &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Memory: &statsv1alpha1.MemoryStats{AvailableBytes: &wrapped, WorkingSetBytes: &ws}}}
	ob, _ := makeObservations(s).get(SignalMemoryAvailable)
	if ob.Available.String() != "-100Mi" {
		t.Errorf("underflowed available = %s, want -100Mi", &ob.Available)
	}
	if ob.Capacity.Value() != int64(ws-(100<<20)) {
		t.Errorf("underflowed capacity = %s, want %d (available+workingSet in uint64)", &ob.Capacity, int64(ws-(100<<20)))
	}

	// A missing pods system container gives no allocatable observation; a negative pid.available is kept.
	cur = 40000
	s = &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Rlimit: &statsv1alpha1.RlimitStats{MaxPID: &max, NumOfRunningProcesses: &cur}}}
	o = makeObservations(s)
	if _, ok := o.get(SignalAllocatableMemoryAvailable); ok {
		t.Error("allocatable observation without the pods system container")
	}
	if ob, _ := o.get(SignalPIDAvailable); ob.Available.Value() != -7232 {
		t.Errorf("pid.available = %s, want -7232", &ob.Available)
	}
}

func engineWith(th ...Threshold) *Engine {
	e, err := NewEngine(Config{Thresholds: th, PressureTransitionPeriod: 5 * time.Minute, Features: DefaultFeatureGates()}, Filesystems{})
	if err != nil {
		panic(err)
	}
	return e
}

func TestThresholdsMet(t *testing.T) {
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}, MinReclaim: &ThresholdValue{Quantity: q("500Mi")}}
	pct := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}, MinReclaim: &ThresholdValue{Percentage: 0.05}}
	obs := func(avail, capacity string) *observations {
		o := &observations{}
		o.put(Observation{Signal: SignalMemoryAvailable, Available: *q(avail), Capacity: *q(capacity)})
		return o
	}
	cases := []struct {
		name       string
		th         Threshold
		obs        *observations
		minReclaim bool
		want       bool
	}{
		{"empty observations", hard, &observations{}, false, false},
		{"not met", hard, obs("2Gi", "8Gi"), false, false},
		{"exactly at the threshold is not met", hard, obs("1Gi", "8Gi"), false, false},
		{"met", hard, obs("500Mi", "8Gi"), false, true},
		{"min-reclaim: above the threshold but below threshold+minReclaim", hard, obs("1.2Gi", "8Gi"), true, true},
		{"min-reclaim: recovered past threshold+minReclaim", hard, obs("2Gi", "8Gi"), true, false},
		{"percentage met", pct, obs("500Mi", "10Gi"), false, true},
		{"percentage not met", pct, obs("2Gi", "10Gi"), false, false},
		{"percentage min-reclaim holds", pct, obs("1.2Gi", "10Gi"), true, true},
		{"percentage min-reclaim recovered", pct, obs("2Gi", "10Gi"), true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := len(thresholdsMet([]Threshold{tc.th}, tc.obs, tc.minReclaim)) == 1
			if got != tc.want {
				t.Errorf("met = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSortByEvictionPriority(t *testing.T) {
	th := func(s Signal) Threshold {
		return Threshold{Signal: s, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1")}}
	}
	list := []Threshold{th(SignalNodeFsAvailable), th(SignalMemoryAvailable), th(SignalPIDAvailable), th(SignalAllocatableMemoryAvailable), th(SignalImageFsInodesFree)}
	cases := []struct {
		in   []int
		want []Signal
	}{
		// memory first; several memory signals come out in reverse order of input, the others keep theirs
		{[]int{0, 1, 2, 3, 4}, []Signal{SignalAllocatableMemoryAvailable, SignalMemoryAvailable, SignalNodeFsAvailable, SignalPIDAvailable, SignalImageFsInodesFree}},
		{[]int{3, 1}, []Signal{SignalMemoryAvailable, SignalAllocatableMemoryAvailable}},
		{[]int{4, 2, 0}, []Signal{SignalImageFsInodesFree, SignalPIDAvailable, SignalNodeFsAvailable}},
		{[]int{2, 1}, []Signal{SignalMemoryAvailable, SignalPIDAvailable}},
	}
	for _, tc := range cases {
		var in []Threshold
		for _, i := range tc.in {
			in = append(in, list[i])
		}
		sort.Sort(byEvictionPriority(in))
		var got []Signal
		for _, t := range in {
			got = append(got, t.Signal)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("order of %v = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRanking(t *testing.T) {
	const low, def, high = int32(-10), int32(0), int32(10)
	t.Run("memory: exceeds request first", func(t *testing.T) {
		best := pod("best-effort", def, []v1.Container{container("c", nil, nil)}, nil)
		burst := pod("burstable", def, []v1.Container{container("c", resources("", "100Mi", ""), resources("", "200Mi", ""))}, nil)
		stats := index(memStats(best, "0"), memStats(burst, "150Mi"))
		got := names(rankTest([]*v1.Pod{best, burst}, stats, SignalMemoryAvailable))
		if want := []string{"burstable", "best-effort"}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
	t.Run("disk: exceeds ephemeral request first", func(t *testing.T) {
		best := pod("best-effort", def, []v1.Container{container("c", nil, nil)}, nil)
		burst := pod("burstable", def, []v1.Container{container("c", resources("", "", "100Mi"), resources("", "", "200Mi"))}, nil)
		stats := index(diskStats(best, "0", "0", "0", false), diskStats(burst, "100Mi", "50Mi", "0", false))
		got := names(rankTest([]*v1.Pod{best, burst}, stats, SignalNodeFsAvailable))
		if want := []string{"burstable", "best-effort"}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
	t.Run("PID: priority then process count", func(t *testing.T) {
		lh := pod("low-priority-high-usage", low, nil, nil)
		ll := pod("low-priority-low-usage", low, nil, nil)
		hh := pod("high-priority-high-usage", high, nil, nil)
		hl := pod("high-priority-low-usage", high, nil, nil)
		stats := index(procStats(lh, 20), procStats(ll, 6), procStats(hh, 20), procStats(hl, 5))
		got := names(rankTest([]*v1.Pod{hl, hh, ll, lh}, stats, SignalPIDAvailable))
		want := []string{"low-priority-high-usage", "low-priority-low-usage", "high-priority-high-usage", "high-priority-low-usage"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
	t.Run("disk: usage minus request (300, 250, 100, 10, -25, -280 Mi)", func(t *testing.T) {
		vol := []v1.Volume{emptyDirVolume("local-volume")}
		p1 := pod("best-effort-high", def, []v1.Container{container("c", nil, nil)}, vol)
		p2 := pod("best-effort-low", def, []v1.Container{container("c", nil, nil)}, vol)
		p3 := pod("burstable-high", def, []v1.Container{container("c", resources("", "", "100Mi"), resources("", "", "400Mi"))}, vol)
		p4 := pod("burstable-low", def, []v1.Container{container("c", resources("", "", "100Mi"), resources("", "", "400Mi"))}, vol)
		p5 := pod("guaranteed-high", def, []v1.Container{container("c", resources("", "", "400Mi"), resources("", "", "400Mi"))}, vol)
		p6 := pod("guaranteed-low", def, []v1.Container{container("c", resources("", "", "400Mi"), resources("", "", "400Mi"))}, vol)
		stats := index(
			diskStats(p1, "50Mi", "100Mi", "150Mi", false), // 300Mi
			diskStats(p2, "25Mi", "25Mi", "50Mi", false),   // 100Mi
			diskStats(p3, "150Mi", "150Mi", "50Mi", false), // 350-100 = 250Mi
			diskStats(p4, "25Mi", "35Mi", "50Mi", false),   // 110-100 = 10Mi
			diskStats(p5, "225Mi", "100Mi", "50Mi", false), // 375-400 = -25Mi
			diskStats(p6, "25Mi", "45Mi", "50Mi", false),   // 120-400 = -280Mi
		)
		keys := rankTest([]*v1.Pod{p1, p2, p3, p4, p5, p6}, stats, SignalNodeFsAvailable)
		want := []string{"best-effort-high", "burstable-high", "best-effort-low", "burstable-low", "guaranteed-high", "guaranteed-low"}
		if got := names(keys); !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
		var deltas []string
		for i := 0; i < keys.len(); i++ {
			deltas = append(deltas, keys.at(i).delta.String())
		}
		if want := []string{"300Mi", "250Mi", "100Mi", "10Mi", "-25Mi", "-280Mi"}; !reflect.DeepEqual(deltas, want) {
			t.Errorf("usage-request = %v, want %v", deltas, want)
		}
	})
	t.Run("inodes: usage, with the ephemeral-storage request subtracted", func(t *testing.T) {
		vol := []v1.Volume{emptyDirVolume("local-volume")}
		lowP := pod("low", def, []v1.Container{container("c", nil, nil)}, vol)
		med := pod("medium", def, []v1.Container{container("c", nil, nil)}, vol)
		hi := pod("high", def, []v1.Container{container("c", nil, nil)}, vol)
		stats := index(diskStats(lowP, "50000", "100000", "50000", true), diskStats(med, "100000", "150000", "50000", true), diskStats(hi, "200000", "150000", "50000", true))
		got := names(rankTest([]*v1.Pod{lowP, med, hi}, stats, SignalNodeFsInodesFree))
		if want := []string{"high", "medium", "low"}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
	t.Run("priority before usage (memory, disk, inodes)", func(t *testing.T) {
		for _, sig := range []Signal{SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree} {
			vol := []v1.Volume{emptyDirVolume("local-volume")}
			lowBig := pod("low-priority-big", low, []v1.Container{container("c", nil, nil)}, vol)
			lowSmall := pod("low-priority-small", low, []v1.Container{container("c", nil, nil)}, vol)
			highBig := pod("high-priority-big", high, []v1.Container{container("c", nil, nil)}, vol)
			var stats map[string]*statsv1alpha1.PodStats
			switch sig {
			case SignalMemoryAvailable:
				stats = index(memStats(lowBig, "300Mi"), memStats(lowSmall, "100Mi"), memStats(highBig, "900Mi"))
			default:
				in := sig == SignalNodeFsInodesFree
				stats = index(diskStats(lowBig, "300", "0", "0", in), diskStats(lowSmall, "100", "0", "0", in), diskStats(highBig, "900", "0", "0", in))
			}
			got := names(rankTest([]*v1.Pod{highBig, lowSmall, lowBig}, stats, sig))
			if want := []string{"low-priority-big", "low-priority-small", "high-priority-big"}; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: got %v want %v", sig, got, want)
			}
		}
	})
	t.Run("pods without stats rank first", func(t *testing.T) {
		a := pod("with-stats", low, []v1.Container{container("c", nil, nil)}, nil)
		b := pod("without-stats", high, []v1.Container{container("c", nil, nil)}, nil)
		for _, sig := range []Signal{SignalMemoryAvailable, SignalNodeFsAvailable} {
			got := names(rankTest([]*v1.Pod{a, b}, index(memStats(a, "1Gi"), diskStats(a, "1Gi", "0", "0", false)), sig))
			if got[0] != "without-stats" {
				t.Errorf("%s: got %v, want the pod without stats first", sig, got)
			}
		}
	})
	t.Run("ties keep the input order for short lists (insertion sort)", func(t *testing.T) {
		var pods []*v1.Pod
		var ps []statsv1alpha1.PodStats
		for i := 0; i < 5; i++ {
			p := pod(fmt.Sprintf("p%d", i), def, []v1.Container{container("c", nil, nil)}, nil)
			pods = append(pods, p)
			ps = append(ps, memStats(p, "100Mi"))
		}
		got := names(rankTest(pods, index(ps...), SignalMemoryAvailable))
		if want := []string{"p0", "p1", "p2", "p3", "p4"}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
	// TestOrderedByMemory: usage minus request, 700, 500, 300, 200, -200, -800 Mi.
	t.Run("memory: usage minus request (kubelet's TestOrderedByMemory)", func(t *testing.T) {
		mk := func(name, req, lim, ws string) (*v1.Pod, statsv1alpha1.PodStats) {
			p := pod(name, def, []v1.Container{container(name, resources("", req, ""), resources("", lim, ""))}, nil)
			return p, memStats(p, ws)
		}
		p1, s1 := mk("best-effort-high", "", "", "500Mi")
		p2, s2 := mk("best-effort-low", "", "", "300Mi")
		p3, s3 := mk("burstable-high", "100Mi", "1Gi", "800Mi")
		p4, s4 := mk("burstable-low", "100Mi", "1Gi", "300Mi")
		p5, s5 := mk("guaranteed-high", "1Gi", "1Gi", "800Mi")
		p6, s6 := mk("guaranteed-low", "1Gi", "1Gi", "200Mi")
		got := names(rankTest([]*v1.Pod{p1, p2, p3, p4, p5, p6}, index(s1, s2, s3, s4, s5, s6), SignalMemoryAvailable))
		want := []string{"burstable-high", "best-effort-high", "best-effort-low", "burstable-low", "guaranteed-high", "guaranteed-low"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
	// TestOrderedByPriority: lowest priority first when nothing else differs.
	t.Run("priority (kubelet's TestOrderedByPriority)", func(t *testing.T) {
		lowP := pod("low-priority", -134, []v1.Container{container("low-priority", nil, nil)}, nil)
		medium := pod("medium-priority", 1, []v1.Container{container("medium-priority", resources("100m", "100Mi", ""), resources("200m", "200Mi", ""))}, nil)
		highP := pod("high-priority", 12534, []v1.Container{container("high-priority", resources("200m", "200Mi", ""), resources("200m", "200Mi", ""))}, nil)
		stats := index(memStats(lowP, "0"), memStats(medium, "0"), memStats(highP, "0"))
		got := names(rankTest([]*v1.Pod{highP, medium, lowP}, stats, SignalMemoryAvailable))
		if want := []string{"low-priority", "medium-priority", "high-priority"}; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v want %v", got, want)
		}
	})
}

func TestRequestQuantity(t *testing.T) {
	p := pod("p", 0, []v1.Container{container("a", resources("", "100Mi", ""), nil), container("b", resources("", "50Mi", ""), nil)}, nil)
	p.Spec.InitContainers = []v1.Container{container("init", resources("", "300Mi", ""), nil)}
	if got := requestQuantity(p, v1.ResourceMemory, DefaultFeatureGates()); got.String() != "300Mi" {
		t.Errorf("init container max: got %s, want 300Mi", &got)
	}
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []v1.Container{container("sidecar", resources("", "30Mi", ""), nil)}
	p.Spec.InitContainers[0].RestartPolicy = &always
	if got := requestQuantity(p, v1.ResourceMemory, DefaultFeatureGates()); got.String() != "180Mi" {
		t.Errorf("sidecar adds: got %s, want 180Mi", &got)
	}
	p.Spec.Overhead = resources("", "10Mi", "")
	if got := requestQuantity(p, v1.ResourceMemory, DefaultFeatureGates()); got.String() != "190Mi" {
		t.Errorf("overhead added to a non-zero request: got %s, want 190Mi", &got)
	}
	be := pod("be", 0, []v1.Container{container("a", nil, nil)}, nil)
	be.Spec.Overhead = resources("", "10Mi", "")
	if got := requestQuantity(be, v1.ResourceMemory, DefaultFeatureGates()); !got.IsZero() {
		t.Errorf("overhead not added to a zero request: got %s", &got)
	}
	pl := pod("pl", 0, []v1.Container{container("a", resources("", "100Mi", ""), nil)}, nil)
	pl.Spec.Resources = &v1.ResourceRequirements{Requests: resources("", "1Gi", "")}
	if got := requestQuantity(pl, v1.ResourceMemory, DefaultFeatureGates()); got.String() != "1Gi" {
		t.Errorf("pod-level request: got %s, want 1Gi", &got)
	}
}

func TestIsCriticalPod(t *testing.T) {
	mk := func(ann map[string]string, prio int32) *v1.Pod {
		p := pod("p", prio, nil, nil)
		p.Annotations = ann
		return p
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"ordinary", mk(nil, 0), false},
		{"static (file source)", mk(map[string]string{"kubernetes.io/config.source": "file"}, 0), true},
		{"api source", mk(map[string]string{"kubernetes.io/config.source": "api"}, 0), false},
		{"mirror", mk(map[string]string{"kubernetes.io/config.mirror": "x"}, 0), true},
		{"system-critical priority", mk(nil, 2000000000), true},
		{"just below", mk(nil, 1999999999), false},
	}
	for _, tc := range cases {
		if got := IsCriticalPod(tc.pod); got != tc.want {
			t.Errorf("%s: IsCriticalPod = %v", tc.name, got)
		}
	}
}

// --- Ports of the kubelet's helpers_test.go (v1.37.2) that test the phases
// of synchronize, one function each, with the kubelet's cases.

func TestGetReclaimableThreshold(t *testing.T) {
	th := func(s Signal, v, reclaim string) Threshold {
		return Threshold{Signal: s, Operator: OpLessThan, Value: ThresholdValue{Quantity: q(v)}, MinReclaim: &ThresholdValue{Quantity: q(reclaim)}}
	}
	cases := []struct {
		name       string
		thresholds []Threshold
		signal     Signal
		resource   v1.ResourceName
		found      bool
	}{
		{"", []Threshold{th(SignalAllocatableMemoryAvailable, "150Mi", "0"), th(SignalMemoryAvailable, "150Mi", "0"),
			th(SignalImageFsAvailable, "150Mi", "2Gi"), th(SignalNodeFsAvailable, "100Mi", "1Gi"), th(SignalContainerFsAvailable, "100Mi", "1Gi")},
			SignalMemoryAvailable, v1.ResourceMemory, true},
		{"no thresholds", []Threshold{}, "", "", false},
		{"threshold was crossed but reclaim not implemented (invalid signal)", []Threshold{{Signal: "mem.available"}}, "", "", false},
	}
	for _, tc := range cases {
		sort.Sort(byEvictionPriority(tc.thresholds))
		got, res, found := getReclaimableThreshold(tc.thresholds)
		if found != tc.found || res != tc.resource || got.Signal != tc.signal {
			t.Errorf("%q: got %s %q %v, want %s %q %v", tc.name, got.Signal, res, found, tc.signal, tc.resource, tc.found)
		}
		if found && (got.Operator != OpLessThan || got.Value.Quantity.String() != "150Mi" || got.GracePeriod != 0) {
			t.Errorf("%q: got %v, want memory.available<150Mi", tc.name, got)
		}
	}
}

func TestThresholdsUpdatedStats(t *testing.T) {
	updated := Threshold{Signal: SignalMemoryAvailable}
	at := func(min int) metav1.Time { return metav1.Date(2016, 1, 1, 0, min, 0, 0, time.UTC) }
	obsAt := func(times ...metav1.Time) *observations {
		o := &observations{}
		for _, tm := range times {
			o.put(Observation{Signal: SignalMemoryAvailable, Time: tm})
		}
		return o
	}
	cases := map[string]struct {
		thresholds []Threshold
		obs, last  *observations
		want       []Threshold
	}{
		"empty":               {nil, &observations{}, &observations{}, nil},
		"no-time":             {[]Threshold{updated}, obsAt(metav1.Time{}), &observations{}, []Threshold{updated}},
		"no-last-observation": {[]Threshold{updated}, obsAt(at(0)), &observations{}, []Threshold{updated}},
		"time-machine":        {[]Threshold{updated}, obsAt(at(0)), obsAt(at(1)), nil},
		"same-observation":    {[]Threshold{updated}, obsAt(at(0)), obsAt(at(0)), nil},
		"new-observation":     {[]Threshold{updated}, obsAt(at(1)), obsAt(at(0)), []Threshold{updated}},
		// evictd: a nil last (the first synchronize) is no last observation
		"nil-last": {[]Threshold{updated}, obsAt(at(0)), nil, []Threshold{updated}},
		// the kubelet drops a threshold without an observation
		"no-observation": {[]Threshold{updated}, &observations{}, obsAt(at(0)), nil},
	}
	for name, tc := range cases {
		got, stale := thresholdsUpdatedStats(tc.thresholds, tc.obs, tc.last)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: updated %v, want %v", name, got, tc.want)
		}
		if len(got)+len(stale) != len(tc.thresholds) && name != "no-observation" {
			t.Errorf("%s: %d updated + %d stale of %d thresholds", name, len(got), len(stale), len(tc.thresholds))
		}
	}
}

func TestPercentageThresholdsMet(t *testing.T) {
	specific := []Threshold{
		{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.2}, MinReclaim: &ThresholdValue{Percentage: 0.05}},
		{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.3}},
	}
	obs := func(memAvail, memCap, fsAvail, fsCap string) *observations {
		o := &observations{}
		o.put(Observation{Signal: SignalMemoryAvailable, Available: *q(memAvail), Capacity: *q(memCap)})
		if fsAvail != "" {
			o.put(Observation{Signal: SignalNodeFsAvailable, Available: *q(fsAvail), Capacity: *q(fsCap)})
		}
		return o
	}
	cases := map[string]struct {
		minReclaim bool
		obs        *observations
		want       []Threshold
	}{
		"BothMet":                    {false, obs("100Mi", "1000Mi", "100Gi", "1000Gi"), specific},
		"NoneMet":                    {false, obs("300Mi", "1000Mi", "400Gi", "1000Gi"), nil},
		"DiskMet":                    {false, obs("300Mi", "1000Mi", "100Gi", "1000Gi"), specific[1:]},
		"MemoryMet":                  {false, obs("100Mi", "1000Mi", "400Gi", "1000Gi"), specific[:1]},
		"MemoryMetWithMinReclaim":    {true, obs("225Mi", "1000Mi", "", ""), specific[:1]},
		"MemoryNotMetWithMinReclaim": {true, obs("300Mi", "1000Mi", "", ""), nil},
	}
	for name, tc := range cases {
		if got := thresholdsMet(specific, tc.obs, tc.minReclaim); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestThresholdsFirstObservedAt(t *testing.T) {
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	now := t0
	old := now.Add(-time.Minute)
	// the same threshold parsed again: another Quantity pointer, the same key
	again := hard
	again.Value.Quantity = q("1024Mi")
	cases := map[string]struct {
		thresholds []Threshold
		last       []thresholdObservedAt
		want       []thresholdObservedAt
	}{
		"empty":                   {nil, nil, []thresholdObservedAt{}},
		"no-previous-observation": {[]Threshold{hard}, nil, []thresholdObservedAt{{hard, now}}},
		"previous-observation":    {[]Threshold{hard}, []thresholdObservedAt{{hard, old}}, []thresholdObservedAt{{hard, old}}},
		// evictd: keyed by value, as hasThreshold compares, not by identity
		"previous-observation-equal-value": {[]Threshold{again}, []thresholdObservedAt{{hard, old}}, []thresholdObservedAt{{again, old}}},
	}
	for name, tc := range cases {
		if got := thresholdsFirstObservedAt(tc.thresholds, tc.last, now); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestThresholdsMetGracePeriod(t *testing.T) {
	now := t0
	hard := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	soft := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("2Gi")}, GracePeriod: time.Minute}
	old := now.Add(-2 * time.Minute)
	cases := map[string]struct {
		observedAt []thresholdObservedAt
		want       []Threshold
	}{
		"empty":                  {nil, nil},
		"hard-threshold-met":     {[]thresholdObservedAt{{hard, now}}, []Threshold{hard}},
		"soft-threshold-not-met": {[]thresholdObservedAt{{soft, now}}, nil},
		"soft-threshold-met":     {[]thresholdObservedAt{{soft, old}}, []Threshold{soft}},
		// evictd: the order met is kept (the kubelet's is a map's)
		"both-in-order": {[]thresholdObservedAt{{soft, old}, {hard, now}}, []Threshold{soft, hard}},
	}
	for name, tc := range cases {
		if got := thresholdsMetGracePeriod(tc.observedAt, now); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestNodeConditions(t *testing.T) {
	cases := map[string]struct {
		in   []Threshold
		want []v1.NodeConditionType
	}{
		"empty-list":       {nil, nil},
		"memory.available": {[]Threshold{{Signal: SignalMemoryAvailable}}, []v1.NodeConditionType{v1.NodeMemoryPressure}},
		// evictd: each condition once, in the order first raised
		"several": {[]Threshold{{Signal: SignalNodeFsAvailable}, {Signal: SignalMemoryAvailable}, {Signal: SignalImageFsInodesFree},
			{Signal: SignalAllocatableMemoryAvailable}, {Signal: SignalPIDAvailable}},
			[]v1.NodeConditionType{v1.NodeDiskPressure, v1.NodeMemoryPressure, v1.NodePIDPressure}},
	}
	for name, tc := range cases {
		if got := nodeConditions(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestNodeConditionsLastObservedAt(t *testing.T) {
	now := t0
	old := now.Add(-time.Minute)
	type at = map[v1.NodeConditionType]time.Time
	cases := map[string]struct {
		conditions []v1.NodeConditionType
		last, want at
	}{
		"no-previous-observation": {[]v1.NodeConditionType{v1.NodeMemoryPressure}, at{}, at{v1.NodeMemoryPressure: now}},
		"previous-observation":    {[]v1.NodeConditionType{v1.NodeMemoryPressure}, at{v1.NodeMemoryPressure: old}, at{v1.NodeMemoryPressure: now}},
		"old-observation":         {nil, at{v1.NodeMemoryPressure: old}, at{v1.NodeMemoryPressure: old}},
	}
	for name, tc := range cases {
		if got := nodeConditionsLastObservedAt(tc.conditions, tc.last, now); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestNodeConditionsObservedSince(t *testing.T) {
	now := t0
	observed := now.Add(-time.Minute)
	cases := map[string]struct {
		observedAt map[v1.NodeConditionType]time.Time
		period     time.Duration
		want       []v1.NodeConditionType
	}{
		"in-period":     {map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: observed}, 2 * time.Minute, []v1.NodeConditionType{v1.NodeMemoryPressure}},
		"out-of-period": {map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: observed}, 30 * time.Second, nil},
		// evictd: sorted; exactly one period ago is out
		"sorted": {map[v1.NodeConditionType]time.Time{v1.NodePIDPressure: now, v1.NodeMemoryPressure: now, v1.NodeDiskPressure: observed},
			2 * time.Minute, []v1.NodeConditionType{v1.NodeDiskPressure, v1.NodeMemoryPressure, v1.NodePIDPressure}},
		"boundary": {map[v1.NodeConditionType]time.Time{v1.NodeMemoryPressure: observed}, time.Minute, nil},
	}
	for name, tc := range cases {
		if got := nodeConditionsObservedSince(tc.observedAt, tc.period, now); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestHasNodeConditions(t *testing.T) {
	cases := map[string]struct {
		in   []v1.NodeConditionType
		item v1.NodeConditionType
		want bool
	}{
		"has-condition":           {[]v1.NodeConditionType{v1.NodeReady, v1.NodeDiskPressure, v1.NodeMemoryPressure}, v1.NodeMemoryPressure, true},
		"does-not-have-condition": {[]v1.NodeConditionType{v1.NodeReady, v1.NodeDiskPressure}, v1.NodeMemoryPressure, false},
	}
	for name, tc := range cases {
		if got := hasNodeCondition(tc.in, tc.item); got != tc.want {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

// TestMergeThresholds: the kubelet's mergeThresholds keeps a and appends
// what of b is not in a by hasThreshold (value, not identity; min reclaim
// ignored).
func TestMergeThresholds(t *testing.T) {
	a := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1Gi")}}
	aAgain := Threshold{Signal: SignalMemoryAvailable, Operator: OpLessThan, Value: ThresholdValue{Quantity: q("1024Mi")}, MinReclaim: &ThresholdValue{Quantity: q("1Mi")}}
	soft := a
	soft.GracePeriod = time.Minute
	b := Threshold{Signal: SignalNodeFsAvailable, Operator: OpLessThan, Value: ThresholdValue{Percentage: 0.1}}
	got := mergeThresholds([]Threshold{a}, []Threshold{aAgain, b, soft})
	if want := []Threshold{a, b, soft}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestPodQOS ports the kubelet's TestComputePodQOS
// (pkg/apis/core/v1/helper/qos/qos_test.go, v1.37.2): container cases,
// init-container variants, an ephemeral container, pod-level resources with
// the PodLevelResources and PodLevelResourcesFixKubeletQOSClass gates, and
// GetPodQOS's preference for status.qosClass.
func TestPodQOS(t *testing.T) {
	type tcase struct {
		pod      *v1.Pod
		want     v1.PodQOSClass
		plr, fix bool
	}
	rl := func(cpu, mem string) v1.ResourceList { return resources(cpu, mem, "") }
	newPod := func(name string, cs ...v1.ResourceRequirements) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, r := range cs {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Resources: r})
		}
		return p
	}
	guaranteed := v1.ResourceRequirements{ // ephemeral storage does not count
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi"),
			v1.ResourceEphemeralStorage: resource.MustParse("10Gi")},
		Limits: rl("100m", "100Mi"),
	}
	bestEffort := []v1.ResourceRequirements{
		{},
		{Requests: rl("0", "0")},
		{Requests: rl("0", "0"), Limits: rl("0", "0")},
		{Requests: v1.ResourceList{v1.ResourceCPU: resource.Quantity{}, v1.ResourceMemory: resource.Quantity{}}},
		{Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}},
		{Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}, Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}},
	}
	burstable := []v1.ResourceRequirements{
		{Requests: rl("100m", "100Mi"), Limits: rl("200m", "200Mi")},
		{Requests: rl("100m", "100Mi"), Limits: rl("100m", "200Mi")},
		{Requests: rl("100m", "100Mi"), Limits: rl("200m", "100Mi")},
		{Requests: rl("100m", "100Mi")},
		{Requests: rl("100m", "100Mi"), Limits: rl("100m", "")},
	}
	single := []tcase{{pod: newPod("guaranteed", guaranteed), want: v1.PodQOSGuaranteed}}
	for i, r := range bestEffort {
		single = append(single, tcase{pod: newPod(fmt.Sprintf("best-effort-%d", i), r), want: v1.PodQOSBestEffort})
	}
	for i, r := range burstable {
		single = append(single, tcase{pod: newPod(fmt.Sprintf("burstable-%d", i), r), want: v1.PodQOSBurstable})
	}
	containerTests := append([]tcase(nil), single...)
	second := []tcase{
		{pod: newPod("2c-guaranteed", guaranteed, guaranteed), want: v1.PodQOSGuaranteed},
		{pod: newPod("2c-best-effort", bestEffort[0], bestEffort[1]), want: v1.PodQOSBestEffort},
		{pod: newPod("2c-burstable", burstable[0], burstable[1]), want: v1.PodQOSBurstable},
	}
	for i, r1 := range []v1.ResourceRequirements{guaranteed, bestEffort[0], burstable[0]} {
		for j, r2 := range []v1.ResourceRequirements{guaranteed, bestEffort[1], burstable[1]} {
			if i != j {
				second = append(second, tcase{pod: newPod(fmt.Sprintf("2c-mixed-burstable-%d-%d", i, j), r1, r2), want: v1.PodQOSBurstable})
			}
		}
	}
	containerTests = append(containerTests, second...)
	for _, tc := range second { // the second container as an init container: the same class
		p := tc.pod.DeepCopy()
		p.Name += "-init"
		p.Spec.InitContainers = p.Spec.Containers[1:]
		p.Spec.Containers = p.Spec.Containers[:1]
		containerTests = append(containerTests, tcase{pod: p, want: tc.want})
	}
	ec := newPod("guaranteed-ephemeral", guaranteed)
	ec.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "ec"}}}
	containerTests = append(containerTests, tcase{pod: ec, want: v1.PodQOSGuaranteed})

	tests := append([]tcase(nil), containerTests...)
	for _, tc := range containerTests { // the gates on, no pod-level resources
		p := tc.pod.DeepCopy()
		p.Name += "-plr"
		tests = append(tests, tcase{pod: p, want: tc.want, plr: true, fix: true})
	}
	for _, tc := range single {
		// PLR on: the pod-level resources decide, over guaranteed containers
		p := tc.pod.DeepCopy()
		p.Name = "pod-" + p.Name + "-plr"
		p.Spec.Resources = p.Spec.Containers[0].Resources.DeepCopy()
		p.Spec.Containers[0].Resources = guaranteed
		want := tc.want
		if !resourcehelper.IsPodLevelResourcesSet(p) {
			want = v1.PodQOSGuaranteed
			p.Name += "-fallback"
		}
		tests = append(tests, tcase{pod: p, want: want, plr: true, fix: true})
		// PLR off: pod-level resources are ignored
		p = tc.pod.DeepCopy()
		p.Name += "-pod-no-plr"
		g := guaranteed
		p.Spec.Resources = &g
		tests = append(tests, tcase{pod: p, want: tc.want})
	}
	withPodResources := func(name string, r *v1.ResourceRequirements) *v1.Pod {
		p := newPod(name, v1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("100m", "100Mi")})
		p.Spec.Resources = r
		return p
	}
	hp := v1.ResourceName("hugepages-2Mi")
	tests = append(tests,
		tcase{withPodResources("empty-pod-level-resources-should-fallback-to-containers",
			&v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}), v1.PodQOSGuaranteed, true, true},
		tcase{withPodResources("completely-empty-pod-level-resources-should-fallback-to-containers", &v1.ResourceRequirements{}), v1.PodQOSGuaranteed, true, true},
		tcase{withPodResources("completely-empty-pod-level-resources-old-behavior", &v1.ResourceRequirements{}), v1.PodQOSBestEffort, true, false},
		tcase{withPodResources("nil-pod-level-resources-should-fallback-to-containers", nil), v1.PodQOSGuaranteed, true, true},
		tcase{withPodResources("zero-pod-level-resources-should-not-fallback-to-containers",
			&v1.ResourceRequirements{Requests: rl("0", "0"), Limits: rl("0", "0")}), v1.PodQOSBestEffort, true, true},
		tcase{withPodResources("zero-pod-level-resources-should-not-fallback-to-containers-fix-disabled",
			&v1.ResourceRequirements{Requests: rl("0", "0"), Limits: rl("0", "0")}), v1.PodQOSBestEffort, true, false},
		tcase{withPodResources("empty-pod-level-resources-old-behavior",
			&v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}), v1.PodQOSBestEffort, true, false},
		tcase{withPodResources("guaranteed-with-pod-level-resources-and-hugepages", &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("100Mi"), hp: resource.MustParse("100Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("100Mi"), hp: resource.MustParse("100Mi")},
		}), v1.PodQOSGuaranteed, true, true},
		tcase{func() *v1.Pod {
			p := newPod("burstable-with-pod-level-resources-and-hugepages", v1.ResourceRequirements{})
			p.Spec.Resources = &v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), hp: resource.MustParse("100Mi")},
				Limits:   v1.ResourceList{hp: resource.MustParse("100Mi")},
			}
			return p
		}(), v1.PodQOSBurstable, true, true},
	)
	for _, tc := range tests {
		t.Run(tc.pod.Name, func(t *testing.T) {
			gates := FeatureGates{PodLevelResources: tc.plr, PodLevelResourcesFixKubeletQOSClass: tc.fix}
			if got := PodQOS(tc.pod, gates); got != tc.want {
				t.Errorf("PodQOS = %s, want %s", got, tc.want)
			}
		})
	}
	// GetPodQOS: a pod's status.qosClass, once set, wins over its spec.
	p := newPod("status-wins", guaranteed)
	p.Status.QOSClass = v1.PodQOSBestEffort
	if got := PodQOS(p, DefaultFeatureGates()); got != v1.PodQOSBestEffort {
		t.Errorf("status.qosClass BestEffort: PodQOS = %s", got)
	}
	if len(tests) < 60 {
		t.Fatalf("only %d cases: the table lost its generated cases", len(tests))
	}
}

// TestEvictionMessage ports the kubelet's TestEvictionMessage: which
// containers the memory message names (init containers that still run,
// sidecars, regular containers; never ephemeral ones), with their requests,
// and the pod part with pod-level resources.
func TestEvictionMessage(t *testing.T) {
	type stat struct{ name, usage string }
	type exceeded struct{ name, request, usage string }
	mkc := func(name, req string) v1.Container { return container(name, resources("", req, ""), nil) }
	sidecar := func(name, req string) v1.Container {
		c := mkc(name, req)
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
		return c
	}
	const podName = "pod-eviction-message"
	cases := []struct {
		name          string
		podResources  v1.ResourceRequirements
		init, regular []v1.Container
		ephemeral     []v1.EphemeralContainer
		podMemory     string
		stats         []stat
		want          []exceeded
		annotations   map[string]string
		podLevel      bool
	}{
		{name: "No container exceeds memory usage",
			init: []v1.Container{mkc("init1", "100Mi"), sidecar("restartable-init1", "200Mi")}, regular: []v1.Container{mkc("regular1", "200Mi")},
			stats: []stat{{"restartable-init1", "150Mi"}, {"regular1", "100Mi"}}},
		{name: "Init container exceeds memory usage",
			init: []v1.Container{mkc("init1", "100Mi"), sidecar("restartable-init1", "200Mi"), mkc("init2", "150Mi")}, regular: []v1.Container{mkc("regular1", "200Mi")},
			stats: []stat{{"init1", "150Mi"}}, want: []exceeded{{"init1", "100Mi", "150Mi"}},
			annotations: map[string]string{OffendingContainersKey: "init1", OffendingContainersUsageKey: "150Mi"}},
		{name: "Restartable init container exceeds memory usage",
			init:    []v1.Container{mkc("init1", "100Mi"), sidecar("restartable-init1", "200Mi"), sidecar("restartable-init2", "200Mi")},
			regular: []v1.Container{mkc("regular1", "200Mi")},
			stats:   []stat{{"restartable-init1", "250Mi"}, {"restartable-init2", "150Mi"}, {"regular1", "200Mi"}},
			want:    []exceeded{{"restartable-init1", "200Mi", "250Mi"}}, annotations: map[string]string{OffendingContainersKey: "restartable-init1", OffendingContainersUsageKey: "250Mi"}},
		{name: "Regular container exceeds memory usage",
			init:    []v1.Container{mkc("init1", "100Mi"), sidecar("restartable-init1", "200Mi")},
			regular: []v1.Container{mkc("regular1", "200Mi"), mkc("regular2", "300Mi")},
			stats:   []stat{{"restartable-init1", "200Mi"}, {"regular1", "250Mi"}, {"regular2", "250Mi"}},
			want:    []exceeded{{"regular1", "200Mi", "250Mi"}}, annotations: map[string]string{OffendingContainersKey: "regular1", OffendingContainersUsageKey: "250Mi"}},
		{name: "Ephemeral container exceeds memory usage",
			init: []v1.Container{mkc("init1", "100Mi"), sidecar("restartable-init1", "200Mi")}, regular: []v1.Container{mkc("regular1", "200Mi")},
			ephemeral: []v1.EphemeralContainer{{TargetContainerName: "regular1", EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "ephemeral1"}}},
			stats:     []stat{{"restartable-init1", "200Mi"}, {"regular1", "150Mi"}, {"ephemeral1", "250Mi"}}},
		{name: "Both regular and restartable init containers exceed memory usage due to missing memory requests",
			init:        []v1.Container{mkc("init1", "100Mi"), sidecar("restartable-init1", ""), sidecar("restartable-init2", "300Mi")},
			regular:     []v1.Container{mkc("regular1", "")},
			stats:       []stat{{"restartable-init1", "250Mi"}, {"restartable-init2", "250Mi"}, {"regular1", "200Mi"}},
			want:        []exceeded{{"restartable-init1", "0", "250Mi"}, {"regular1", "0", "200Mi"}},
			annotations: map[string]string{OffendingContainersKey: "restartable-init1,regular1", OffendingContainersUsageKey: "250Mi,200Mi"}},
		{name: "Multiple regular and restartable init containers exceed memory usage",
			init: []v1.Container{mkc("init1", "100Mi"), mkc("init2", "100Mi"), mkc("init3", "100Mi"),
				sidecar("restartable-init1", "100Mi"), sidecar("restartable-init2", "200Mi"), sidecar("restartable-init3", "300Mi")},
			regular: []v1.Container{mkc("regular1", "300Mi"), mkc("regular2", "200Mi"), mkc("regular3", "100Mi")},
			stats: []stat{{"restartable-init1", "150Mi"}, {"restartable-init2", "250Mi"}, {"restartable-init3", "250Mi"},
				{"regular1", "50Mi"}, {"regular2", "250Mi"}, {"regular3", "400Mi"}},
			want: []exceeded{{"restartable-init1", "100Mi", "150Mi"}, {"restartable-init2", "200Mi", "250Mi"}, {"regular2", "200Mi", "250Mi"}, {"regular3", "100Mi", "400Mi"}},
			annotations: map[string]string{OffendingContainersKey: "restartable-init1,restartable-init2,regular2,regular3",
				OffendingContainersUsageKey: "150Mi,250Mi,250Mi,400Mi"}},
		{name: "Regular pod with pod level resources exceeds memory usage",
			podResources: v1.ResourceRequirements{Requests: resources("", "250Mi", ""), Limits: resources("", "1000Mi", "")},
			podMemory:    "600Mi", regular: []v1.Container{mkc("regular1", ""), mkc("regular2", "")},
			stats: []stat{{"regular1", "250Mi"}, {"regular2", "350Mi"}},
			want:  []exceeded{{"regular1", "0", "250Mi"}, {"regular2", "0", "350Mi"}},
			annotations: map[string]string{OffendingPodKey: podName, OffendingPodUsageKey: "600Mi",
				OffendingContainersKey: "regular1,regular2", OffendingContainersUsageKey: "250Mi,350Mi"},
			podLevel: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(podName, 1, tc.regular, nil)
			p.Spec.InitContainers = tc.init
			p.Spec.Resources = &tc.podResources
			p.Spec.EphemeralContainers = tc.ephemeral
			podMem := "1Mi"
			if tc.podLevel {
				podMem = tc.podMemory
			}
			ps := memStats(p, podMem)
			// as the kubelet's test: len(stats) empty entries, then the stats
			ps.Containers = make([]statsv1alpha1.ContainerStats, len(tc.stats))
			for _, s := range tc.stats {
				ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{Name: s.name, Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: u64(s.usage)}})
			}
			gates := DefaultFeatureGates()
			gates.PodLevelResources = tc.podLevel
			msg, ann := evictionMessage(v1.ResourceMemory, p, &ps, true, nil, &observations{}, gates)
			want := fmt.Sprintf(nodeLowMessageFmt, v1.ResourceMemory)
			keys := []string{OffendingContainersKey, OffendingContainersUsageKey}
			if tc.podLevel {
				want += fmt.Sprintf(podMessageFmt, p.Name, tc.podMemory, tc.podResources.Requests.Memory(), v1.ResourceMemory)
				keys = append(keys, OffendingPodKey, OffendingPodUsageKey)
			}
			for _, c := range tc.want {
				want += fmt.Sprintf(containerMessageFmt, c.name, c.usage, c.request, v1.ResourceMemory)
			}
			if msg != want {
				t.Errorf("message\n got %q\nwant %q", msg, want)
			}
			for _, k := range keys {
				v, ok := ann[k]
				if !ok {
					t.Errorf("annotation %s missing", k)
				}
				if v != tc.annotations[k] {
					t.Errorf("annotation %s = %q, want %q", k, v, tc.annotations[k])
				}
			}
		})
	}
}
