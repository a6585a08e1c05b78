package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/test/node"
)

// orderPod is one pod of TestSameOrderAsKubelet.
type orderPod struct {
	name           string
	request, limit string // memory ("" none): the QoS class
	class          string // PriorityClass
	holdMi         int64  // what it allocates and holds
}

// The pods of TestSameOrderAsKubelet: the three QoS classes and two
// priorities. The kubelet ranks for memory by usage over request first,
// then lower priority first, then the larger usage − request first; wherever
// one of these keys decides here, the pods are 40 MiB or more apart, and
// every pod holds its memory flat for 20 s or more before the pressure, so
// that the kubelet, which ranks on cAdvisor's lagging stats (a pod's first
// 10–20 s read 0; docs/kubernetes.md, Tests), ranks them as evictd does on
// fresh ones. The test does not say the order: evictd's policy computes it
// from these pods (policyOrder).
var orderPods = []orderPod{
	{"guaranteed-low", "160Mi", "160Mi", orderLow, 128}, // never over its request
	{"burstable-low", "8Mi", "", orderLow, 64},          // over by 56 MiB
	{"besteffort-low", "", "", orderLow, 16},            // over by 16 MiB
	{"besteffort-high", "", "", orderHigh, 96},          // over by the most, higher priority
}

const (
	orderLow  = "evictd-test-low"
	orderHigh = "evictd-test-high"
	// orderExcess is how far past the threshold the critical filler pushes
	// the pods cgroup. The first three pods in the order hold 176 MiB and
	// relieve only part of it (60 MiB still past), the fourth 128 MiB more
	// (68 MiB under): four evictions in a row, each decided on a node still
	// under pressure, and none after. At the peak the pods cgroup is 64 MiB
	// under its limit (the kernel's OOM killer stays out).
	orderExcess = 236 << 20
)

// TestSameOrderAsKubelet: the same choice as the kubelet over several
// successive evictions. Pods of the three QoS classes and two priorities
// hold their memory; then a critical pod (system-cluster-critical, never
// evicted by either) grows until the pods cgroup is 236 MiB past the
// kubelet's threshold, so that the pods must go one after the other, four
// in a row. Run once with evictd acting (the evictions in the order the API
// server recorded them: evictd's, the first at the crossing, and the
// kubelet's when its tick falls between two of evictd's) and once in shadow
// mode where the kubelet acts (the kubelet's evictions, and evictd's record
// of each: decided, and how much earlier). Both orders must equal the one
// evictd's policy computes from the pods (their QoS, priority and usage),
// with the kubelet's own configuration file.
func TestSameOrderAsKubelet(t *testing.T) {
	c := node.Get(t)
	for _, pc := range []struct {
		name  string
		value int32
	}{{orderLow, 1000}, {orderHigh, 100000}} {
		obj := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc.name}, Value: pc.value}
		if _, err := c.Client.SchedulingV1().PriorityClasses().Create(node.Ctx(t), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), node.APITimeout)
			defer cancel()
			_ = c.Client.SchedulingV1().PriorityClasses().Delete(ctx, pc.name, metav1.DeleteOptions{})
		})
	}
	t.Cleanup(func() { waitNoMemoryPressure(t, c) }) // the next test's pods are admitted

	t.Run("evictd", func(t *testing.T) {
		logFile := installEvictd(t, c)
		run := startOrderRun(t, c, "kube-order-evictd")
		got := run.wait(t, c)
		t.Logf("evictions in the API: %v; the policy's order: %v", got, run.want)
		if !slices.Equal(got, run.want) {
			t.Errorf("the pods were evicted in the order %v, evictd's policy orders %v", got, run.want)
		}
		// Who evicted each pod: evictd, or the kubelet when its 10 s tick
		// fell in the seconds evictd takes to evict them one after the
		// other (it waits for each pod's cleanup, as the kubelet does, while
		// the pressure lasts). evictd evicts the first, at the crossing, and
		// its evictions are in the order.
		by := map[string][]string{}
		for _, e := range evictedEvents(t, c, run.ns) {
			by[e.InvolvedObject.Name] = append(by[e.InvolvedObject.Name], e.Source.Component)
		}
		var ours []string
		for _, name := range run.want {
			t.Logf("%s evicted by %v", name, by[name])
			if slices.Contains(by[name], "evictd") {
				ours = append(ours, name)
			}
			if len(by[name]) == 0 {
				t.Errorf("no Evicted event for %s", name)
			}
		}
		if !slices.Contains(by[run.want[0]], "evictd") {
			t.Errorf("%v evicted %s, the first: evictd, woken at the crossing, should have", by[run.want[0]], run.want[0])
		}
		var logged []string
		for _, l := range evictdLog(t, logFile, "msg=evicted") {
			logged = append(logged, logField(l, "pod"))
			t.Logf("evictd: %s", l)
		}
		if want := prefixed(run.ns, ours); !slices.Equal(logged, want) {
			t.Errorf("evictd logged evictions of %v, want %v (its Evicted events, in the order)", logged, want)
		}
	})

	t.Run("shadow", func(t *testing.T) {
		logFile := installEvictd(t, c, "--shadow")
		run := startOrderRun(t, c, "kube-order-shadow")
		got := run.wait(t, c)
		t.Logf("the kubelet's evictions: %v; the policy's order: %v", got, run.want)
		if !slices.Equal(got, run.want) {
			t.Errorf("the kubelet evicted %v, evictd's policy orders %v", got, run.want)
		}
		var records []string
		c.WaitFor(t, 30*time.Second, "evictd's shadow record of every eviction", func(context.Context) (bool, error) {
			records = evictdLog(t, logFile, "shadow: the kubelet evicted a pod")
			return len(records) >= len(got), nil
		})
		var recorded []string
		for _, r := range records {
			t.Logf("evictd: %s", r)
			recorded = append(recorded, logField(r, "pod"))
			if logField(r, "evictd_decided") != "true" || logField(r, "lead") == "" {
				t.Errorf("shadow record %q: want evictd to have decided the same pod earlier", r)
			}
		}
		if want := prefixed(run.ns, got); !slices.Equal(recorded, want) {
			t.Errorf("shadow records for %v, want %v", recorded, want)
		}
		if n := len(evictdLog(t, logFile, "msg=evicted")); n != 0 {
			t.Errorf("shadow mode evicted %d pod(s)", n)
		}
		for _, e := range evictedEvents(t, c, run.ns) {
			if e.Source.Component == "evictd" {
				t.Errorf("shadow mode recorded an event: %q", e.Message)
			}
		}
	})
}

// orderRun is one run of TestSameOrderAsKubelet: its namespace, the order
// evictd's policy computes, and the evictions the API server recorded.
type orderRun struct {
	ns      string
	want    []string
	evicted func() ([]string, error)
}

// startOrderRun starts orderPods in a namespace, waits until the kubelet's
// stats show each pod's memory, computes the policy's order, and starts the
// critical filler that brings the pressure.
func startOrderRun(t *testing.T, c *node.Cluster, ns string) *orderRun {
	t.Helper()
	waitNoMemoryPressure(t, c)
	c.Namespace(t, ns)
	evicted := evictionOrder(t, c, ns)
	use := map[string]int64{}
	for _, op := range orderPods {
		p := node.HogPod(op.name, fmt.Sprintf("alloc %dMi; hold", op.holdMi), op.request, op.limit)
		p.Spec.PriorityClassName = op.class
		if _, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		use[op.name] = op.holdMi << 20
	}
	var pods []*corev1.Pod
	for _, op := range orderPods {
		pods = append(pods, c.WaitRunning(t, ns, op.name))
	}
	waitKubeletMemory(t, c, pods, use)

	threshold := resource.MustParse(c.Threshold)
	target := hogTarget(t, c, threshold, orderExcess)
	filler := node.HogPod("critical-filler", fmt.Sprintf("ramp %d 200Mi; hold", target), "", "")
	filler.Spec.PriorityClassName = "system-cluster-critical"
	filler, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), filler, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	use[filler.Name] = target
	limit, _ := podsCgroupMemory(t, c)
	want := policyOrder(t, c, append(pods, filler), use, limit, limit-threshold.Value()+orderExcess)
	if len(want) < 3 {
		t.Fatalf("evictd's policy evicts only %v: the test's pods do not force several evictions", want)
	}
	return &orderRun{ns: ns, want: want, evicted: evicted}
}

// wait waits for the run's evictions (as many as the policy's order has),
// then one kubelet period more to see that no other pod is evicted.
func (r *orderRun) wait(t *testing.T, c *node.Cluster) []string {
	t.Helper()
	c.WaitFor(t, 180*time.Second, fmt.Sprintf("%d evictions", len(r.want)), func(context.Context) (bool, error) {
		got, err := r.evicted()
		return len(got) >= len(r.want), err
	})
	time.Sleep(12 * time.Second)
	got, err := r.evicted()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// evictionOrder watches the pods of ns and returns a function that gives
// the pods evicted so far, in the order the API server recorded it: a
// deletion timestamp (the Eviction API), or phase Failed or the
// DisruptionTarget condition (the kubelet's own eviction). It fails the
// test (through the function) when the watch ends early.
func evictionOrder(t *testing.T, c *node.Cluster, ns string) func() ([]string, error) {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Timeout = 0 // a watch outlives APITimeout; it is bounded by the test
	cl, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// From the watch cache's list, as an informer starts: a watch with no
	// resource version is refused on this node ("Too large resource
	// version") whenever the cache is behind etcd, which Debian's etcd 3.4
	// does not report progress to.
	l, err := cl.CoreV1().Pods(ns).List(node.Ctx(t), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	timeout := int64(900)
	w, err := cl.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, TimeoutSeconds: &timeout})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var failed error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			mu.Lock()
			switch {
			case !ok:
				failed = fmt.Errorf("watching the pods of %s: %s %+v", ns, ev.Type, ev.Object)
			case evictionMarked(p) && !slices.Contains(order, p.Name):
				order = append(order, p.Name)
			}
			mu.Unlock()
		}
		mu.Lock()
		if ctx.Err() == nil && failed == nil {
			failed = fmt.Errorf("watching the pods of %s: the watch ended", ns)
		}
		mu.Unlock()
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order), failed
	}
}

func evictionMarked(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// policyOrder is the order in which evictd's policy engine, configured from
// the node's kubelet configuration file as evictd reads it, evicts pods: one
// per synchronize, as the kubelet, until the pressure is relieved. Each pod
// uses use[name] bytes; the pods cgroup (allocatable memory) has the limit
// and, at first, the working set ws, which each eviction lowers by what the
// evicted pod used.
func policyOrder(t *testing.T, c *node.Cluster, pods []*corev1.Pod, use map[string]int64, limit, ws int64) []string {
	t.Helper()
	kc, err := kubeletconfig.Read(c.KubeletConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kc.Policy()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	u := func(v int64) *uint64 { x := uint64(v); return &x }
	now := time.Now()
	var order []string
	for len(pods) > 0 {
		now = now.Add(time.Second)
		ts := metav1.NewTime(now)
		sum := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: c.Node,
			// The machine has memory to spare: only allocatable memory
			// (the pods cgroup) is under pressure.
			Memory: &statsapi.MemoryStats{Time: ts, AvailableBytes: u(16 << 30), WorkingSetBytes: u(4 << 30)},
			SystemContainers: []statsapi.ContainerStats{{Name: "pods",
				Memory: &statsapi.MemoryStats{Time: ts, AvailableBytes: u(limit - ws), WorkingSetBytes: u(ws)}}}}}
		for _, p := range pods {
			sum.Pods = append(sum.Pods, statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
				Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u(use[p.Name])}})
		}
		d := eng.Step(now, policy.Input{Summary: sum, Pods: pods})
		if len(d.Evictions) == 0 {
			break
		}
		name := d.Evictions[0].Pod.Name
		order = append(order, name)
		ws -= use[name]
		pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return p.Name == name })
	}
	return order
}

// waitKubeletMemory waits until the kubelet's /stats/summary shows each pod
// using at least what it holds: the kubelet then ranks on these figures.
func waitKubeletMemory(t *testing.T, c *node.Cluster, pods []*corev1.Pod, use map[string]int64) {
	t.Helper()
	c.WaitFor(t, 90*time.Second, "the kubelet's stats to show the pods' memory", func(ctx context.Context) (bool, error) {
		b, err := c.KubeletGet(ctx, "/stats/summary")
		if err != nil {
			return false, err
		}
		var s statsapi.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return false, err
		}
		for _, p := range pods {
			ps := podStats(&s, string(p.UID))
			if ps == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil || int64(*ps.Memory.WorkingSetBytes) < use[p.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

// statusLag is how long a node condition can lag the kubelet's own view:
// the kubelet reports a change at its next node status update, up to
// nodeStatusUpdateFrequency (10 s, the default) later, and admits pods by
// its own view meanwhile. A second more for the API round trip.
const statusLag = 11 * time.Second

// waitNoMemoryPressure waits until the node reports no MemoryPressure and
// carries no memory-pressure taint, throughout statusLag: under pressure
// the kubelet rejects BestEffort pods and the scheduler places no pod, and
// a "False" read just after an eviction can be the status from before it
// (a node run rejected the next test's BestEffort pod "The node had
// condition: [MemoryPressure]" 6.7 s after an eviction whose cleanup had
// read False at once).
func waitNoMemoryPressure(t *testing.T, c *node.Cluster) {
	t.Helper()
	var clearSince time.Time
	c.WaitFor(t, 150*time.Second, "the node without MemoryPressure for "+statusLag.String(), func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if underMemoryPressure(n) {
			clearSince = time.Time{}
			return false, nil
		}
		if clearSince.IsZero() {
			clearSince = time.Now()
		}
		return time.Since(clearSince) >= statusLag, nil
	})
}

func underMemoryPressure(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeMemoryPressure && cond.Status != corev1.ConditionFalse {
			return true
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeMemoryPressure {
			return true
		}
	}
	return false
}

var logFieldRE = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// logField is the value of key in a logfmt line from evictd's log ("" when
// absent), unquoted.
func logField(line, key string) string {
	for _, m := range logFieldRE.FindAllStringSubmatch(line, -1) {
		if m[1] == key {
			return strings.Trim(m[2], `"`)
		}
	}
	return ""
}

func prefixed(ns string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = ns + "/" + n
	}
	return out
}
