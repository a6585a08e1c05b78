package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/policy"
)

// A /configz document as the kubelet v1.37.2 of the node tier serves it
// (abridged): defaulted, evictionHard merged.
const configz = `{"kubeletconfig":{"enableServer":true,"staticPodPath":"/x","evictionHard":{"memory.available":"300Mi","nodefs.available":"1%"},
"evictionPressureTransitionPeriod":"20s","enforceNodeAllocatable":["pods"],"featureGates":{"KubeletSeparateDiskGC":true},"someFieldOfANewerKubelet":1}}`

// configzKubelet is the configuration of the configz document above as the
// cluster view reads it.
func configzKubelet(t *testing.T) *kubeletconfigv1beta1.KubeletConfiguration {
	t.Helper()
	c, err := kubeletconfig.ParseConfigz([]byte(configz), "node n /configz")
	if err != nil {
		t.Fatal(err)
	}
	return c.Kubelet
}

func TestConfigz(t *testing.T) {
	c, err := kubeletconfig.ParseConfigz([]byte(configz), "node n /configz")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range cfg.Thresholds {
		got = append(got, th.String())
	}
	if s := strings.Join(got, ","); s != "memory.available<300Mi,nodefs.available<1%,allocatableMemory.available<300Mi" || cfg.PressureTransitionPeriod != 20*time.Second {
		t.Fatalf("thresholds %s, transition %v", s, cfg.PressureTransitionPeriod)
	}
	// The field a newer kubelet has is a warning, as the kubelet's own
	// lenient decoding would take it.
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Error(), "someFieldOfANewerKubelet") {
		t.Errorf("warnings %v", c.Warnings)
	}
	for _, bad := range []string{``, `{}`, `{"kubeletconfig":[]}`, `not json`, `{"evictionHard":{}}`} {
		if _, err := kubeletconfig.ParseConfigz([]byte(bad), "node n /configz"); err == nil {
			t.Errorf("ParseConfigz(%q) accepted", bad)
		}
	}
}

func TestRefused(t *testing.T) {
	if !refused(apierrors.NewBadRequest("address not allowed")) {
		t.Error("the proxy's refusal is not recognised")
	}
	// What client-go makes of the proxy's 400 (seen on the node tier: it
	// negotiates protobuf and does not decode the JSON Status), with the
	// Status left in the body.
	generic := apierrors.NewGenericServerResponse(400, "GET", schema.GroupResource{Resource: "nodes"}, "n", "unknown", 0, true)
	body := []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"address not allowed","reason":"BadRequest","code":400}`)
	if refused(generic) {
		t.Error("a generic 400 taken for the refusal")
	}
	if err := proxyError(generic, body); !refused(err) || errText(err) != "address not allowed" {
		t.Errorf("the proxy's Status in the body is not recognised: %v (%q)", err, errText(err))
	}
	if err := proxyError(generic, []byte("plain")); err != generic {
		t.Errorf("a body that is no Status replaced the error: %v", err)
	}
	for _, err := range []error{apierrors.NewBadRequest("invalid node request"), apierrors.NewServiceUnavailable("address not allowed"), errors.New("address not allowed")} {
		if refused(err) {
			t.Errorf("%v taken for the proxy's refusal", err)
		}
	}
}

func u(v uint64) *uint64 { return &v }

func memSummary(at time.Time, avail, ws uint64) *statsapi.Summary {
	return &statsapi.Summary{Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), AvailableBytes: u(avail), WorkingSetBytes: u(ws)},
		Fs: &statsapi.FsStats{Time: metav1.NewTime(at), AvailableBytes: u(90 << 30), CapacityBytes: u(100 << 30), InodesFree: u(900), Inodes: u(1000)}}}
}

// The nearest threshold is the least headroom relative to capacity, the
// trend comes from the stats' own times, and the time to cross follows.
func TestNearestAndTrend(t *testing.T) {
	kc := configzKubelet(t)
	kc.EvictionHard["nodefs.available"] = "89%" // 1Gi of headroom on 100Gi: 1%
	cfg, err := policy.ConfigFromKubelet(kc)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 8Gi node, 700Mi available then 600Mi 20 s later: 400Mi of headroom on
	// 8Gi (4.9%) is more than nodefs' 1%, so nodefs is nearest...
	s1, s2 := memSummary(t0, 700<<20, 8<<30-700<<20), memSummary(t0.Add(20*time.Second), 600<<20, 8<<30-600<<20)
	n := nearest(eng.Resolve(s2))
	if n == nil || n.Signal != "nodefs.available" || n.MarginPercent != 1 {
		t.Fatalf("nearest %+v", n)
	}
	// ...and its stats did not change: no trend.
	if tr := trend(eng, []sample{{t0, s1}, {t0.Add(20 * time.Second), s2}}, n); tr == nil || tr.PerSecond != 0 || tr.CrossesIn != "" {
		t.Fatalf("nodefs trend %+v", tr)
	}
	// Memory alone: 300Mi of headroom falling 5Mi/s crosses in 60 s.
	delete(kc.EvictionHard, "nodefs.available")
	cfg, _ = policy.ConfigFromKubelet(kc)
	eng, _ = policy.NewEngine(cfg, policy.Filesystems{})
	n = nearest(eng.Resolve(s2))
	if n == nil || n.Threshold != "memory.available<300Mi" || n.Margin != "300Mi" || n.Met {
		t.Fatalf("nearest %+v", n)
	}
	tr := trend(eng, []sample{{t0, s1}, {t0.Add(20 * time.Second), s2}}, n)
	if tr == nil || tr.PerSecond != -5*(1<<20) || tr.CrossesIn != "1m0s" || tr.Over != "20s" {
		t.Fatalf("trend %+v", tr)
	}
	// The same stats twice (the kubelet's cache not refreshed): no trend.
	if tr := trend(eng, []sample{{t0, s2}, {t0.Add(10 * time.Second), s2}}, n); tr != nil {
		t.Fatalf("trend from one value %+v", tr)
	}
}

func TestWhyAndFirst(t *testing.T) {
	cfg, _ := policy.ConfigFromKubelet(configzKubelet(t))
	eng, _ := policy.NewEngine(cfg, policy.Filesystems{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name, req string) *v1.Pod {
		c := v1.Container{Name: "c"}
		if req != "" {
			c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(req)}
		}
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	}
	s := memSummary(t0, 2<<30, 6<<30)
	for _, p := range []struct {
		name string
		ws   uint64
	}{{"hog", 900 << 20}, {"small", 100 << 20}} {
		s.Pods = append(s.Pods, statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.name, Namespace: "ns", UID: "uid-" + p.name},
			Memory: &statsapi.MemoryStats{WorkingSetBytes: u(p.ws)}})
	}
	pods := []*v1.Pod{pod("small", "200Mi"), pod("hog", "")}
	d := eng.Step(t0, policy.Input{Summary: s, Pods: pods})
	n := nearest(eng.Resolve(s))
	v := first(eng, d, s, pods, n)
	if v == nil || v.Pod != "ns/hog" || v.Now || v.Why != "uses 900Mi, over its request 0 by 900Mi, priority 0" {
		t.Fatalf("first %+v", v)
	}
	// Met: the eviction itself.
	s2 := memSummary(t0.Add(10*time.Second), 200<<20, 8<<30-200<<20)
	s2.Pods = s.Pods
	d = eng.Step(t0.Add(10*time.Second), policy.Input{Summary: s2, Pods: pods})
	if v := first(eng, d, s2, pods, nearest(eng.Resolve(s2))); v == nil || v.Pod != "ns/hog" || !v.Now || !strings.Contains(v.Message, "Threshold quantity: 300Mi") {
		t.Fatalf("first when met %+v", v)
	}
}

func TestSortRows(t *testing.T) {
	rows := []Row{
		{Node: "b-error", Error: "x"},
		{Node: "far", Nearest: &Nearest{MarginPercent: 40}},
		{Node: "a-error", Error: "y"},
		{Node: "met", Nearest: &Nearest{MarginPercent: -2, Met: true}},
		{Node: "near", Nearest: &Nearest{MarginPercent: 3}},
	}
	sortRows(rows)
	var got []string
	for _, r := range rows {
		got = append(got, r.Node)
	}
	if s := strings.Join(got, " "); s != "met near far a-error b-error" {
		t.Fatalf("order %s", s)
	}
}

// A /configz body is whatever the node answers: it never panics the decoder
// or the engine's configuration.
func FuzzConfigz(f *testing.F) {
	f.Add([]byte(configz))
	f.Add([]byte(`{"kubeletconfig":{"evictionHard":{"memory.available":"-1"}}}`))
	f.Add([]byte(`{"kubeletconfig":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := kubeletconfig.ParseConfigz(b, "node n /configz")
		if err != nil {
			return
		}
		_, _ = c.Policy()
	})
}
