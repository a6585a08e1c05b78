package policy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestParseProfile(t *testing.T) {
	for _, c := range []struct {
		in, want string
		err      bool
	}{
		{"", "kubelet", false},
		{"kubelet", "kubelet", false},
		{"extended", "extended", false},
		{"swap-aware", "swap-aware", false},
		{"memavailable, loop-breaker", "loop-breaker,memavailable", false},
		{"hard-preempts-soft,reclaim-first,swap-aware,loop-breaker,memavailable", "extended", false},
		{"swap", "", true},
		{"kubelet,swap-aware", "", true},
	} {
		p, err := ParseProfile(c.in)
		if (err != nil) != c.err {
			t.Errorf("ParseProfile(%q): err %v", c.in, err)
			continue
		}
		if err == nil && p.String() != c.want {
			t.Errorf("ParseProfile(%q) = %s, want %s", c.in, p, c.want)
		}
	}
	if _, err := ParseProfile("swap"); err == nil || !strings.Contains(err.Error(), "swap-aware") {
		t.Errorf("an unknown name's error should list the names: %v", err)
	}
}

func dsPod(name string) *v1.Pod {
	p := pod(name, 0, []v1.Container{container("c", nil, nil)}, nil)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: types.UID("uid-ds"), Controller: boolPtr(true)}}
	return p
}

func boolPtr(b bool) *bool { return &b }

// The loop breaker: a second eviction of a controller's pods within the
// window records a loop (one EvictionLoop Event), the same pod decided
// again is no new eviction, the loop's pods rank last while the node stays
// under pressure, the loop survives a restart (State), and it is forgotten a
// window after the pressure ends.
func TestLoopBreaker(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil, 0, time.Minute)
	cfg.Profile = Profile{LoopBreaker: true}
	e, err := NewEngine(cfg, Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	hog := pod("hog", 0, []v1.Container{container("c", resources("", "2Gi", ""), nil)}, nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(at time.Duration, avail string, ds *v1.Pod) Decision {
		now := t0.Add(at)
		return e.Step(now, Input{Summary: memSummary(avail, now, memStats(hog, "2200Mi"), memStats(ds, "600Mi")), Pods: []*v1.Pod{hog, ds}})
	}
	events := func(d Decision) (n int) {
		for _, ev := range d.Events {
			if ev.Reason == EvictionLoopReason {
				n++
			}
		}
		return n
	}
	victim := func(d Decision) string {
		if len(d.Evictions) != 1 {
			t.Fatalf("evictions %+v", d.Evictions)
		}
		return d.Evictions[0].Pod.Name
	}

	d := step(0, "500Mi", dsPod("ds-1"))
	if victim(d) != "ds-1" || events(d) != 0 {
		t.Fatalf("first eviction: %s, %d loop events", victim(d), events(d))
	}
	// The same pod again (its eviction not done yet): not a loop.
	if d = step(10*time.Second, "500Mi", dsPod("ds-1")); victim(d) != "ds-1" || events(d) != 0 || len(d.Loops) != 1 || !d.Loops[0].Recorded.IsZero() {
		t.Fatalf("same pod again: %s, %d loop events, loops %+v", victim(d), events(d), d.Loops)
	}
	// Its replacement evicted within the window: a loop, one Event.
	d = step(40*time.Second, "500Mi", dsPod("ds-2"))
	if victim(d) != "ds-2" || events(d) != 1 || len(d.Loops) != 1 || d.Loops[0].Recorded.IsZero() {
		t.Fatalf("replacement: %s, %d loop events, loops %+v", victim(d), events(d), d.Loops)
	}
	if ev := d.Events[len(d.Events)-1]; ev.Object != "default/ds-2" || !strings.Contains(ev.Message, "DaemonSet default/agent") || !strings.Contains(ev.Message, "2 times within 10m0s") {
		t.Fatalf("loop event %+v", ev)
	}

	// A restart keeps the loop.
	b, err := json.Marshal(e.State())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	e2, _ := NewEngine(cfg, Filesystems{})
	if err := e2.Restore(st); err != nil {
		t.Fatal(err)
	}
	e = e2

	// The third pod ranks after the hog, which is evicted instead.
	d = step(70*time.Second, "500Mi", dsPod("ds-3"))
	if victim(d) != "hog" || events(d) != 0 {
		t.Fatalf("loop: evicted %s, %d loop events", victim(d), events(d))
	}
	if c := d.Candidates; len(c) != 2 || c[1].Pod.Name != "ds-3" || !c[1].Looping || c[0].Looping {
		t.Fatalf("candidates %+v", c)
	}
	// Pressure ends; the loop is remembered for the window, then forgotten.
	if d = step(5*time.Minute, "3Gi", dsPod("ds-3")); len(d.Loops) != 1 {
		t.Fatalf("loops right after the pressure: %+v", d.Loops)
	}
	if d = step(70*time.Second+10*time.Minute, "3Gi", dsPod("ds-3")); len(d.Loops) != 0 {
		t.Fatalf("loops a window after the pressure: %+v", d.Loops)
	}

	// Without the profile the same engine never demotes a pod.
	cfg.Profile = Profile{}
	e, _ = NewEngine(cfg, Filesystems{})
	for i, name := range []string{"ds-1", "ds-2", "ds-3"} {
		if d = step(time.Duration(i)*30*time.Second, "500Mi", dsPod(name)); victim(d) != name || len(d.Loops) != 0 || events(d) != 0 {
			t.Fatalf("kubelet profile, %s: evicted %s, loops %+v", name, victim(d), d.Loops)
		}
	}
}

// With hard-preempts-soft a hard threshold decides when a soft one is
// actionable too: the kubelet's order puts the soft memory threshold first
// (byEvictionPriority reverses the memory thresholds), and its grace
// applies.
func TestPreferHard(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "30s"}, nil, 600, time.Minute)
	bu := pod("burstable", 0, []v1.Container{container("c", resources("", "1Gi", ""), nil)}, nil)
	tgps := int64(3600)
	bu.Spec.TerminationGracePeriodSeconds = &tgps
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		prof  Profile
		grace int64
	}{{Profile{}, 600}, {Profile{HardPreemptsSoft: true}, 1}} {
		cfg.Profile = c.prof
		e, _ := NewEngine(cfg, Filesystems{})
		e.Step(t0, Input{Summary: memSummary("1500Mi", t0, memStats(bu, "2Gi")), Pods: []*v1.Pod{bu}})
		t1 := t0.Add(time.Minute)
		d := e.Step(t1, Input{Summary: memSummary("500Mi", t1, memStats(bu, "2Gi")), Pods: []*v1.Pod{bu}})
		if len(d.Evictions) != 1 || d.Evictions[0].GracePeriodSeconds != c.grace {
			t.Errorf("profile %s: evictions %+v, want grace %d", c.prof, d.Evictions, c.grace)
		}
	}
}

// The node memory figures side by side, and the profile's choice among them.
func TestNodeMemoryFigures(t *testing.T) {
	cfg := mustConfig(t, map[string]string{"memory.available": "500Mi"}, nil, nil, nil, 0, time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memSummary("300Mi", t0)
	free := *u64("2Gi")
	s.Node.Swap = &statsv1alpha1.SwapStats{SwapAvailableBytes: &free, SwapUsageBytes: u64("1Gi")}
	host := &HostMemory{MemTotalBytes: 8 << 30, MemAvailableBytes: 3 << 30}
	for _, c := range []struct {
		prof      Profile
		avail     string
		used, met string
	}{
		{Profile{}, "300Mi", "working set", "met"},
		{Profile{MemAvailable: true}, "3Gi", "MemAvailable", ""},
		{Profile{SwapAware: true}, "2348Mi", "working set + free swap", ""},
		{Profile{MemAvailable: true, SwapAware: true}, "5Gi", "MemAvailable + free swap", ""},
	} {
		cfg.Profile = c.prof
		e, _ := NewEngine(cfg, Filesystems{})
		d := e.StepHost(t0, Input{Summary: s}, host)
		nm := d.NodeMemory
		if nm == nil || nm.WorkingSetAvailable.String() != "300Mi" || nm.MemAvailable.String() != "3Gi" || nm.SwapAvailable.String() != "2Gi" || nm.Used != c.used {
			t.Errorf("profile %s: node memory %+v", c.prof, nm)
		}
		if got := d.Observations[0].Available.String(); got != c.avail {
			t.Errorf("profile %s: memory.available %s, want %s", c.prof, got, c.avail)
		}
		if met := len(d.Met) > 0; met != (c.met == "met") {
			t.Errorf("profile %s: met %v", c.prof, d.Met)
		}
	}
	// MemAvailable asked for but not read: the kubelet's figure, with a note.
	cfg.Profile = Profile{MemAvailable: true}
	e, _ := NewEngine(cfg, Filesystems{})
	d := e.Step(t0, Input{Summary: s})
	if d.Observations[0].Available.String() != "300Mi" || len(d.Notes) == 0 || !strings.Contains(d.Notes[0], "no /proc/meminfo") {
		t.Errorf("memavailable without meminfo: %v, notes %q", d.Observations[0].Available.String(), d.Notes)
	}
}

// ParseProfile takes a flag's text: no input panics, and whatever it
// accepts prints back as a profile it accepts again, to the same value.
func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{"", "kubelet", "extended", "swap-aware,memavailable", " loop-breaker ", ",", "kubelet,extended"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProfile(s)
		if err != nil {
			return
		}
		q, err := ParseProfile(p.String())
		if err != nil || q != p {
			t.Fatalf("%q → %s → %+v, %v", s, p, q, err)
		}
	})
}
