package policy

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// memSummary is a node with the given memory available out of 8Gi, stats
// taken at `at`, and pod working sets.
func memSummary(avail string, at time.Time, pods ...statsv1alpha1.PodStats) *statsv1alpha1.Summary {
	a := u64(avail)
	ws := uint64(8<<30) - *a
	return &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), AvailableBytes: a, WorkingSetBytes: &ws}},
		Pods: pods,
	}
}

func mustConfig(t *testing.T, hard, soft, grace, minReclaim map[string]string, maxGrace int64, transition time.Duration) Config {
	t.Helper()
	th, err := ParseThresholdConfig(nil, hard, soft, grace, minReclaim)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Thresholds: th, PressureTransitionPeriod: transition, MaxPodGracePeriodSeconds: maxGrace,
		LocalStorageCapacityIsolation: true, Features: DefaultFeatureGates()}
}

func evictedNames(d Decision) []string {
	var out []string
	for _, e := range d.Evictions {
		out = append(out, e.Pod.Name)
	}
	return out
}

func TestSoftThenHardMemoryPressure(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "1m30s"}, nil, 5, 5*time.Minute)
	e, err := NewEngine(cfg, Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	be := pod("best-effort", 0, []v1.Container{container("c", nil, nil)}, nil)
	bu := pod("burstable", 0, []v1.Container{container("c", resources("", "1Gi", ""), resources("", "2Gi", ""))}, nil)
	stats := []statsv1alpha1.PodStats{memStats(be, "500Mi"), memStats(bu, "300Mi")}
	pods := []*v1.Pod{bu, be}

	// no pressure
	d := e.Step(t0, Input{memSummary("3Gi", t0, stats...), pods})
	if len(d.NodeConditions) != 0 || len(d.Evictions) != 0 {
		t.Fatalf("no pressure: %+v", d)
	}
	// soft threshold met: condition at once, no eviction during the grace period
	t1 := t0.Add(time.Minute)
	d = e.Step(t1, Input{memSummary("1500Mi", t1, stats...), pods})
	if !reflect.DeepEqual(d.NodeConditions, []v1.NodeConditionType{v1.NodeMemoryPressure}) || len(d.Evictions) != 0 {
		t.Fatalf("soft met, in grace: conditions %v evictions %v", d.NodeConditions, evictedNames(d))
	}
	if len(d.InGrace) != 1 || d.InGrace[0].GraceRemaining != 90*time.Second {
		t.Fatalf("in grace = %+v, want 1m30s left", d.InGrace)
	}
	if r := e.Admit(be); r.Admit || r.Message != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort admitted under memory pressure: %+v", r)
	}
	if r := e.Admit(bu); !r.Admit {
		t.Errorf("Burstable rejected under memory pressure only: %+v", r)
	}
	// grace over: the soft threshold evicts with min(max grace, pod grace)
	t2 := t1.Add(2 * time.Minute)
	d = e.Step(t2, Input{memSummary("1500Mi", t2, stats...), pods})
	if got := evictedNames(d); !reflect.DeepEqual(got, []string{"best-effort"}) || d.Evictions[0].GracePeriodSeconds != 5 {
		t.Fatalf("soft eviction: %v %+v", got, d.Evictions)
	}
	ev := d.Evictions[0]
	wantMsg := "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. Container c was using 500Mi, request is 0, has larger consumption of memory. "
	if ev.Message != wantMsg {
		t.Errorf("message\n got %q\nwant %q", ev.Message, wantMsg)
	}
	if ev.Condition == nil || ev.Condition.Type != v1.DisruptionTarget || ev.Condition.Reason != v1.PodReasonTerminationByKubelet || ev.Condition.Message != wantMsg {
		t.Errorf("condition = %+v", ev.Condition)
	}
	wantAnn := map[string]string{"offending_containers": "c", "offending_containers_usage": "500Mi", "starved_resource": "memory"}
	if !reflect.DeepEqual(ev.Annotations, wantAnn) {
		t.Errorf("annotations = %v", ev.Annotations)
	}
	// hard threshold met while the soft one (grace satisfied) still is: either can
	// govern in the kubelet; evictd takes the later one in configuration order,
	// the soft one (the kubelet's most likely choice), so the grace period is 5.
	t3 := t2.Add(10 * time.Second)
	d = e.Step(t3, Input{memSummary("500Mi", t3, stats[1]), []*v1.Pod{bu}})
	if got := evictedNames(d); !reflect.DeepEqual(got, []string{"burstable"}) || d.Evictions[0].GracePeriodSeconds != 5 ||
		!strings.Contains(d.Evictions[0].Message, "Threshold quantity: 2Gi, available: 500Mi") {
		t.Fatalf("hard and soft both met: %v %+v", got, d.Evictions)
	}
	// relieved, then only the hard one is past its grace period: grace 1
	t35 := t3.Add(10 * time.Second)
	e.Step(t35, Input{memSummary("3Gi", t35, stats[1]), []*v1.Pod{bu}})
	t36 := t35.Add(10 * time.Second)
	d = e.Step(t36, Input{memSummary("500Mi", t36, stats[1]), []*v1.Pod{bu}})
	if got := evictedNames(d); !reflect.DeepEqual(got, []string{"burstable"}) || d.Evictions[0].GracePeriodSeconds != 1 ||
		!strings.Contains(d.Evictions[0].Message, "Threshold quantity: 1Gi, available: 500Mi") {
		t.Fatalf("hard eviction: %v %+v", got, d.Evictions)
	}
	// pressure gone: the condition stays for the transition period
	t4 := t36.Add(time.Minute)
	d = e.Step(t4, Input{memSummary("3Gi", t4), nil})
	if len(d.NodeConditions) != 1 {
		t.Fatalf("condition dropped inside the transition period: %v", d.NodeConditions)
	}
	t5 := t36.Add(5 * time.Minute)
	d = e.Step(t5, Input{memSummary("3Gi", t5), nil})
	if len(d.NodeConditions) != 0 {
		t.Fatalf("condition kept after the transition period: %v", d.NodeConditions)
	}
	if r := e.Admit(be); !r.Admit {
		t.Errorf("BestEffort rejected without pressure: %+v", r)
	}
}

func TestMinReclaimHysteresis(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, map[string]string{"memory.available": "500Mi"}, 0, 5*time.Minute)
	e, _ := NewEngine(cfg, Filesystems{})
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	step := func(at time.Duration, avail string) Decision {
		now := t0.Add(at)
		return e.Step(now, Input{memSummary(avail, now, memStats(p, "100Mi")), []*v1.Pod{p}})
	}
	if d := step(0, "500Mi"); len(d.Evictions) != 1 {
		t.Fatalf("below the threshold: no eviction")
	}
	if d := step(10*time.Second, "1.2Gi"); len(d.Evictions) != 1 || !d.Met[0].MinReclaimActive {
		t.Fatalf("above 1Gi but below 1Gi+500Mi: eviction must continue (%+v)", d.Met)
	}
	if d := step(20*time.Second, "2Gi"); len(d.Evictions) != 0 || len(d.Met) != 0 {
		t.Fatalf("recovered past 1.5Gi: no eviction (%v)", evictedNames(d))
	}
}

func TestStaleStatsAreNotActedOnTwice(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil, 0, 5*time.Minute)
	e, _ := NewEngine(cfg, Filesystems{})
	a := pod("a", 0, []v1.Container{container("c", nil, nil)}, nil)
	b := pod("b", 0, []v1.Container{container("c", nil, nil)}, nil)
	s := memSummary("500Mi", t0, memStats(a, "200Mi"), memStats(b, "100Mi"))
	if d := e.Step(t0, Input{s, []*v1.Pod{a, b}}); !reflect.DeepEqual(evictedNames(d), []string{"a"}) {
		t.Fatalf("first: %v", evictedNames(d))
	}
	d := e.Step(t0.Add(10*time.Second), Input{s, []*v1.Pod{b}})
	if len(d.Evictions) != 0 || len(d.Stale) != 1 || len(d.NodeConditions) != 1 {
		t.Fatalf("same stats again: evictions %v stale %d conditions %v", evictedNames(d), len(d.Stale), d.NodeConditions)
	}
	// Zero stats time is never stale.
	z := memSummary("500Mi", time.Time{}, memStats(b, "100Mi"))
	e.Step(t0.Add(20*time.Second), Input{z, []*v1.Pod{b}})
	if d := e.Step(t0.Add(30*time.Second), Input{z, []*v1.Pod{b}}); len(d.Evictions) != 1 {
		t.Fatalf("zero time: want an eviction each time, got %v", evictedNames(d))
	}
}

func TestTransitionPeriodZeroNeverReportsConditions(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil, 0, 0)
	e, _ := NewEngine(cfg, Filesystems{})
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	d := e.Step(t0, Input{memSummary("500Mi", t0, memStats(p, "1Mi")), []*v1.Pod{p}})
	if len(d.NodeConditions) != 0 || len(d.Evictions) != 1 {
		t.Fatalf("period 0 (engine level): conditions %v, evictions %v", d.NodeConditions, evictedNames(d))
	}
}

func TestCriticalPodsAreNeverEvicted(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil, 0, time.Minute)
	e, _ := NewEngine(cfg, Filesystems{})
	crit := pod("static", 2000000000, []v1.Container{container("c", nil, nil)}, nil)
	crit.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	other := pod("other", 0, []v1.Container{container("c", resources("", "1Gi", ""), nil)}, nil)
	d := e.Step(t0, Input{memSummary("500Mi", t0, memStats(crit, "2Gi"), memStats(other, "10Mi")), []*v1.Pod{crit, other}})
	if !reflect.DeepEqual(evictedNames(d), []string{"other"}) || len(d.SkippedCritical) != 1 {
		t.Fatalf("evicted %v skipped %v", evictedNames(d), d.SkippedCritical)
	}
	if r := e.Admit(crit); !r.Admit {
		t.Error("critical pod rejected")
	}
}

func TestLocalStorageLimitEvictions(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil, 0, time.Minute)
	e, _ := NewEngine(cfg, Filesystems{})
	vol := emptyDirVolume("scratch")
	vol.EmptyDir.SizeLimit = q("100Mi")
	emptyDir := pod("emptydir", 0, []v1.Container{container("c", nil, nil)}, []v1.Volume{vol})
	podLimit := pod("pod-limit", 0, []v1.Container{container("c", nil, resources("", "", "50Mi"))}, nil)
	always := v1.ContainerRestartPolicyAlways
	sidecar := pod("sidecar", 0, []v1.Container{container("main", nil, nil)}, nil)
	sidecar.Spec.InitContainers = []v1.Container{container("side", nil, resources("", "", "10Mi"))}
	sidecar.Spec.InitContainers[0].RestartPolicy = &always
	fine := pod("fine", 0, []v1.Container{container("c", nil, resources("", "", "1Gi"))}, nil)

	edStats := statsv1alpha1.PodStats{PodRef: ref(emptyDir), VolumeStats: []statsv1alpha1.VolumeStats{{Name: "scratch", FsStats: statsv1alpha1.FsStats{UsedBytes: u64("200Mi")}}}}
	plStats := statsv1alpha1.PodStats{PodRef: ref(podLimit), EphemeralStorage: &statsv1alpha1.FsStats{UsedBytes: u64("60Mi")}}
	scStats := statsv1alpha1.PodStats{PodRef: ref(sidecar), Containers: []statsv1alpha1.ContainerStats{{Name: "side",
		Rootfs: &statsv1alpha1.FsStats{UsedBytes: u64("40Mi")}, Logs: &statsv1alpha1.FsStats{UsedBytes: u64("10Mi")}}}}
	fineStats := diskStats(fine, "10Mi", "10Mi", "0", false)
	d := e.Step(t0, Input{memSummary("4Gi", t0, edStats, plStats, scStats, fineStats), []*v1.Pod{emptyDir, podLimit, sidecar, fine}})
	want := []string{"emptydir", "pod-limit", "sidecar"}
	if got := evictedNames(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("evicted %v, want %v", got, want)
	}
	msgs := []string{
		`Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". `,
		`Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. `,
		`Container side exceeded its local ephemeral storage limit "10Mi". `,
	}
	for i, ev := range d.Evictions {
		if ev.Message != msgs[i] || ev.GracePeriodSeconds != 1 || ev.Condition != nil || ev.Annotations != nil || !ev.Limit {
			t.Errorf("eviction %d = %+v", i, ev)
		}
	}
	// With a dedicated imagefs only the logs count against a container limit.
	e2, _ := NewEngine(cfg, Filesystems{DedicatedImageFs: true})
	d = e2.Step(t0, Input{memSummary("4Gi", t0, scStats), []*v1.Pod{sidecar}})
	if len(d.Evictions) != 0 {
		t.Errorf("dedicated imagefs: logs 10Mi do not exceed 10Mi, got %v", evictedNames(d))
	}
	// Isolation off: no limit evictions.
	cfg.LocalStorageCapacityIsolation = false
	e3, _ := NewEngine(cfg, Filesystems{})
	if d := e3.Step(t0, Input{memSummary("4Gi", t0, edStats), []*v1.Pod{emptyDir}}); len(d.Evictions) != 0 {
		t.Errorf("isolation off: evicted %v", evictedNames(d))
	}
}

func TestNodeLevelReclaim(t *testing.T) {
	th, _ := ParseThresholdConfig(nil, map[string]string{"nodefs.available": "1Gi"}, nil, nil, map[string]string{"nodefs.available": "500Mi"})
	cfg := Config{Thresholds: th, PressureTransitionPeriod: time.Minute, LocalStorageCapacityIsolation: true, Features: DefaultFeatureGates()}
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	summary := func(avail string, at time.Time) *statsv1alpha1.Summary {
		return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Fs: &statsv1alpha1.FsStats{Time: metav1.NewTime(at), AvailableBytes: u64(avail), CapacityBytes: u64("10Gi")}},
			Pods: []statsv1alpha1.PodStats{diskStats(p, "100Mi", "0", "0", false)}}
	}
	layouts := []struct {
		fs   Filesystems
		want []string
	}{
		{Filesystems{}, []string{"containerGC", "imageGC"}},
		{Filesystems{DedicatedImageFs: true}, []string{}},
		{Filesystems{DedicatedImageFs: true, SplitContainerFs: true}, []string{"containerGC"}},
	}
	for _, l := range layouts {
		e, _ := NewEngine(cfg, l.fs)
		d := e.Step(t0, Input{summary("500Mi", t0), []*v1.Pod{p}})
		if !reflect.DeepEqual(d.Reclaim, l.want) {
			t.Errorf("%+v: reclaim %v, want %v", l.fs, d.Reclaim, l.want)
		}
		if len(l.want) == 0 {
			if len(d.Evictions) != 1 {
				t.Errorf("%+v: no reclaim, want a direct eviction", l.fs)
			}
			continue
		}
		if !d.ReclaimPending || len(d.Evictions) != 0 {
			t.Fatalf("%+v: want a pending reclaim and no eviction yet", l.fs)
		}
		// GC freed enough (above 1Gi + 500Mi): nothing evicted.
		if d := e.Reclaimed(t0, summary("2Gi", t0)); !d.ReclaimSufficient || len(d.Evictions) != 0 {
			t.Errorf("%+v: reclaim enough: %+v", l.fs, d)
		}
		// GC freed something but not min-reclaim's worth: evict.
		t1 := t0.Add(10 * time.Second)
		e.Step(t1, Input{summary("500Mi", t1), []*v1.Pod{p}})
		if d := e.Reclaimed(t1, summary("1.2Gi", t1)); d.ReclaimSufficient || len(d.Evictions) != 1 {
			t.Errorf("%+v: reclaim not enough: evicted %v", l.fs, evictedNames(d))
		}
	}
}

func TestSplitFilesystemWithoutGate(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"nodefs.available": "1Gi"}, nil, nil, nil, 0, time.Minute)
	cfg.Features.KubeletSeparateDiskGC = false
	e, _ := NewEngine(cfg, Filesystems{DedicatedImageFs: true, SplitContainerFs: true})
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Fs: &statsv1alpha1.FsStats{AvailableBytes: u64("500Mi"), CapacityBytes: u64("10Gi")}},
		Pods: []statsv1alpha1.PodStats{diskStats(p, "100Mi", "0", "0", false)}}
	d := e.Step(t0, Input{s, []*v1.Pod{p}})
	if d.Error != ErrSplitFsWithoutGate.Error() || len(d.NodeConditions) != 0 {
		t.Fatalf("first sync: %+v", d)
	}
	d = e.Step(t0.Add(10*time.Second), Input{s, []*v1.Pod{p}})
	if len(d.NodeConditions) != 1 || len(d.Evictions) != 0 || len(d.Reclaim) != 0 {
		t.Fatalf("later syncs: conditions but never an eviction; got %+v", d)
	}
}

func TestAdmitUnderNodeConditions(t *testing.T) {
	be := pod("be", 0, []v1.Container{container("c", nil, nil)}, nil)
	bu := pod("bu", 0, []v1.Container{container("c", resources("100m", "100Mi", ""), nil)}, nil)
	gu := pod("gu", 0, []v1.Container{container("c", resources("100m", "100Mi", ""), resources("100m", "100Mi", ""))}, nil)
	tol := be.DeepCopy()
	tol.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	cases := []struct {
		conds []v1.NodeConditionType
		want  map[*v1.Pod]bool
	}{
		{nil, map[*v1.Pod]bool{be: true, bu: true, gu: true, tol: true}},
		{[]v1.NodeConditionType{v1.NodeMemoryPressure}, map[*v1.Pod]bool{be: false, bu: true, gu: true, tol: true}},
		{[]v1.NodeConditionType{v1.NodeDiskPressure, v1.NodeMemoryPressure}, map[*v1.Pod]bool{be: false, bu: false, gu: false, tol: false}},
		{[]v1.NodeConditionType{v1.NodePIDPressure}, map[*v1.Pod]bool{be: false, bu: false, gu: false, tol: false}},
	}
	for _, tc := range cases {
		e := engineWith()
		e.conditions = tc.conds
		for p, want := range tc.want {
			if got := e.Admit(p); got.Admit != want {
				t.Errorf("conditions %v, pod %s: admit %v, want %v (%s)", tc.conds, p.Name, got.Admit, want, got.Message)
			}
		}
	}
	e := engineWith()
	e.conditions = []v1.NodeConditionType{v1.NodeDiskPressure, v1.NodeMemoryPressure}
	if r := e.Admit(be); r.Reason != "Evicted" || r.Message != "The node had condition: [DiskPressure MemoryPressure]. " {
		t.Errorf("rejection = %+v", r)
	}
}

func TestStateRoundTrip(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "1m"}, nil, 0, 5*time.Minute)
	a, _ := NewEngine(cfg, Filesystems{})
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	a.Step(t0, Input{memSummary("1500Mi", t0, memStats(p, "1Mi")), []*v1.Pod{p}})
	js, err := json.Marshal(a.State())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(js, &st); err != nil {
		t.Fatal(err)
	}
	b, _ := NewEngine(cfg, Filesystems{})
	if err := b.Restore(st); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(61 * time.Second)
	da := a.Step(t1, Input{memSummary("1500Mi", t1, memStats(p, "1Mi")), []*v1.Pod{p}})
	db := b.Step(t1, Input{memSummary("1500Mi", t1, memStats(p, "1Mi")), []*v1.Pod{p}})
	ja, _ := json.Marshal(da)
	jb, _ := json.Marshal(db)
	if string(ja) != string(jb) {
		t.Errorf("restored engine decides differently:\n%s\n%s", ja, jb)
	}
	if len(da.Evictions) != 1 {
		t.Errorf("the soft threshold's grace ran out across the restore: want an eviction")
	}
	other, _ := NewEngine(mustConfig(t, map[string]string{"memory.available": "3Gi"}, nil, nil, nil, 0, time.Minute), Filesystems{})
	if err := other.Restore(st); err == nil || !strings.Contains(err.Error(), "restore") {
		t.Errorf("restore into another configuration: err = %v", err)
	}
}

func TestPodFactsFollowPodUpdates(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil, 0, time.Minute)
	e, _ := NewEngine(cfg, Filesystems{})
	a := pod("a", 0, []v1.Container{container("c", resources("", "1Gi", ""), nil)}, nil)
	b := pod("b", 0, []v1.Container{container("c", resources("", "1Gi", ""), nil)}, nil)
	a.ResourceVersion, b.ResourceVersion = "1", "1"
	stats := func(at time.Time) *statsv1alpha1.Summary {
		return memSummary("500Mi", at, memStats(a, "600Mi"), memStats(b, "500Mi"))
	}
	// both below their requests: the larger usage-request (a: -424Mi, b: -524Mi) goes first
	if d := e.Step(t0, Input{stats(t0), []*v1.Pod{a, b}}); d.Candidates[0].Pod.Name != "a" {
		t.Fatalf("first ranking: %v", d.Candidates)
	}
	// b is resized in place to a 100Mi request: a new resourceVersion, now b exceeds it
	b.Spec.Containers[0].Resources.Requests = resources("", "100Mi", "")
	b.ResourceVersion = "2"
	t1 := t0.Add(10 * time.Second)
	if d := e.Step(t1, Input{stats(t1), []*v1.Pod{a, b}}); d.Candidates[0].Pod.Name != "b" || !d.Candidates[0].ExceedsRequest {
		t.Fatalf("after the update: %+v", d.Candidates)
	}
}

func TestDerivedContainerFsThresholdsFromSecondSync(t *testing.T) {
	th, _ := ParseThresholdConfig(nil, map[string]string{"nodefs.available": "10%"}, nil, nil, nil)
	e, _ := NewEngine(Config{Thresholds: th, PressureTransitionPeriod: time.Minute, Features: DefaultFeatureGates()}, Filesystems{})
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	s := func(at time.Time) *statsv1alpha1.Summary {
		return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
			Fs:      &statsv1alpha1.FsStats{Time: metav1.NewTime(at), AvailableBytes: u64("20Gi"), CapacityBytes: u64("32Gi")},
			Runtime: &statsv1alpha1.RuntimeStats{ContainerFs: &statsv1alpha1.FsStats{Time: metav1.NewTime(at), AvailableBytes: u64("1Gi"), CapacityBytes: u64("32Gi")}},
		}, Pods: []statsv1alpha1.PodStats{diskStats(p, "1Gi", "0", "0", false)}}
	}
	d := e.Step(t0, Input{s(t0), []*v1.Pod{p}})
	if len(d.Met) != 0 || len(d.Unevaluated) != 1 || d.Unevaluated[0].Signal != SignalContainerFsAvailable {
		t.Fatalf("first sync: met %v, unevaluated %v", d.Met, d.Unevaluated)
	}
	t1 := t0.Add(10 * time.Second)
	d = e.Step(t1, Input{s(t1), []*v1.Pod{p}})
	if d.Signal != SignalContainerFsAvailable || !reflect.DeepEqual(d.Reclaim, []string{"containerGC", "imageGC"}) || len(d.Unevaluated) != 0 {
		t.Fatalf("second sync: signal %q reclaim %v", d.Signal, d.Reclaim)
	}
}

// TestRestoreIndexKeyedState: a state file written while the engine keyed
// thresholds by index (testdata/state-index-keyed.json, written by that code
// after 61 s of a met soft threshold) is read by its thresholds' text, and
// the engine goes on as the engine that wrote it would have; a configuration
// without that threshold refuses it.
func TestRestoreIndexKeyedState(t *testing.T) {
	b, err := os.ReadFile("testdata/state-index-keyed.json")
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Met[0].Signal != "" || st.Met[0].Index == nil {
		t.Fatalf("the fixture is not an index-keyed state: %+v", st.Met[0])
	}
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "1m"}, nil, 0, 5*time.Minute)
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	live, _ := NewEngine(cfg, Filesystems{})
	live.Step(t0, Input{memSummary("1500Mi", t0, memStats(p, "1Mi")), []*v1.Pod{p}})
	t1 := t0.Add(61 * time.Second)
	live.Step(t1, Input{memSummary("1500Mi", t1, memStats(p, "1Mi")), []*v1.Pod{p}})

	restored, _ := NewEngine(cfg, Filesystems{})
	if err := restored.Restore(st); err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, restored.State()), mustJSON(t, live.State()); got != want {
		t.Errorf("migrated state differs from the live engine's:\n%s\n%s", got, want)
	}
	t2 := t1.Add(10 * time.Second)
	dl := live.Step(t2, Input{memSummary("1600Mi", t2, memStats(p, "1Mi")), []*v1.Pod{p}})
	dr := restored.Step(t2, Input{memSummary("1600Mi", t2, memStats(p, "1Mi")), []*v1.Pod{p}})
	if a, b := mustJSON(t, dl), mustJSON(t, dr); a != b {
		t.Errorf("restored engine decides differently:\n%s\n%s", b, a)
	}
	if len(dr.Evictions) != 1 || len(dr.Met) != 1 || dr.Met[0].FirstObserved != t0 {
		t.Errorf("the soft threshold's first observation was lost: met %+v, evictions %d", dr.Met, len(dr.Evictions))
	}

	other, _ := NewEngine(mustConfig(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "3Gi"},
		map[string]string{"memory.available": "1m"}, nil, 0, 5*time.Minute), Filesystems{})
	if err := other.Restore(st); err == nil || !strings.Contains(err.Error(), `"memory.available<2Gi (soft, grace 1m0s)" of the state is not in this configuration`) {
		t.Errorf("restore into a configuration without the threshold: err = %v", err)
	}
}

// TestStateKeyedByValue: the state names thresholds by value, so it fits a
// configuration listing the same thresholds in another order, as the
// kubelet's threshold-keyed maps would.
func TestStateKeyedByValue(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi", "nodefs.available": "10%"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "1m"}, nil, 0, 5*time.Minute)
	p := pod("p", 0, []v1.Container{container("c", nil, nil)}, nil)
	a, _ := NewEngine(cfg, Filesystems{})
	a.Step(t0, Input{memSummary("1500Mi", t0, memStats(p, "1Mi")), []*v1.Pod{p}})
	st := a.State()
	if len(st.FirstObserved) != 1 || st.FirstObserved[0].Signal != SignalMemoryAvailable || st.FirstObserved[0].GracePeriod != time.Minute ||
		st.FirstObserved[0].Value == nil || st.FirstObserved[0].Value.String() != "2Gi" || st.FirstObserved[0].Index != nil {
		t.Fatalf("state not keyed by value: %+v", st.FirstObserved)
	}
	reordered := cfg
	reordered.Thresholds = append([]Threshold(nil), cfg.Thresholds...)
	for i, j := 0, len(reordered.Thresholds)-1; i < j; i, j = i+1, j-1 {
		reordered.Thresholds[i], reordered.Thresholds[j] = reordered.Thresholds[j], reordered.Thresholds[i]
	}
	b, _ := NewEngine(reordered, Filesystems{})
	if err := b.Restore(st); err != nil {
		t.Fatalf("restore into the same thresholds in another order: %v", err)
	}
	t1 := t0.Add(61 * time.Second)
	da := a.Step(t1, Input{memSummary("1500Mi", t1, memStats(p, "1Mi")), []*v1.Pod{p}})
	db := b.Step(t1, Input{memSummary("1500Mi", t1, memStats(p, "1Mi")), []*v1.Pod{p}})
	if len(da.Evictions) != 1 || mustJSON(t, da.Evictions) != mustJSON(t, db.Evictions) || mustJSON(t, da.Met) != mustJSON(t, db.Met) {
		t.Errorf("reordered configuration decides differently:\n%s\n%s", mustJSON(t, da), mustJSON(t, db))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
