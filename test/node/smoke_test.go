package node_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/test/node"
)

var update = flag.Bool("update", false, "rewrite testdata/kubelet-eviction.json from this run")

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(node.Main(m))
}

// The node registered under its name, is Ready, and its allocatable memory
// is the small one set by reservation.
func TestNodeReady(t *testing.T) {
	c := node.Get(t)
	n, err := c.Client.CoreV1().Nodes().Get(node.Ctx(t), c.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		t.Fatalf("node %s not Ready: %+v", c.Node, n.Status.Conditions)
	}
	want := resource.MustParse(c.Allocatable)
	got := n.Status.Allocatable[corev1.ResourceMemory]
	// Capacity is MemTotal, the reservation whole MiB: allocatable is the
	// wanted value plus under 1 MiB.
	if d := got.Value() - want.Value(); d < 0 || d >= 1<<20 {
		t.Errorf("allocatable memory %s, want %s (+ < 1Mi)", got.String(), want.String())
	}
	t.Logf("node %s Ready, kubelet %s, runtime %s, allocatable memory %s", c.Node, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion, got.String())
	if v := n.Status.NodeInfo.KubeletVersion; v != "v1.37.2" {
		t.Errorf("kubelet version %q, want v1.37.2", v)
	}
	// The three images were imported before the kubelet started (it
	// reports them in the node's status at its first update).
	have := map[string]bool{}
	for _, img := range n.Status.Images {
		for _, name := range img.Names {
			have[name] = true
		}
	}
	for _, img := range []string{node.PauseImage, node.WorkImage, node.EvictdImage} {
		if !have[img] {
			t.Errorf("image %s not on the node; it has %v", img, n.Status.Images)
		}
	}
}

// One pod of each QoS class runs, sits in the cgroup where internal/collect
// discovers it, and `evictd stat --summary` (the binary built from this tree)
// agrees with the kubelet's /stats/summary on the pods' memory.
func TestPodsOfEachQoSClass(t *testing.T) {
	c := node.Get(t)
	ns := c.Namespace(t, "smoke-qos")
	pods := map[string]*corev1.Pod{}
	for _, p := range []struct{ qos, req, lim string }{
		{"guaranteed", "64Mi", "64Mi"},
		{"burstable", "32Mi", ""},
		{"besteffort", "", ""},
	} {
		pods[p.qos] = c.RunPod(t, ns, node.HogPod(p.qos, fmt.Sprintf("alloc %d; hold", hogHolds), p.req, p.lim))
	}

	t.Run("cgroups", func(t *testing.T) {
		col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
		if err != nil {
			t.Fatal(err)
		}
		wantPods := collect.PodsCgroupCgroupfs
		if c.CgroupDriver == "systemd" {
			wantPods = collect.PodsCgroupSystemd
		}
		if got := col.PodsCgroup(); got != wantPods {
			t.Fatalf("pods cgroup %q, want %q (%s driver)", got, wantPods, c.CgroupDriver)
		}
		ws, err := col.Workloads()
		if err != nil {
			t.Fatal(err)
		}
		byUID := map[string]collect.Workload{}
		for _, w := range ws {
			byUID[w.PodUID] = w
		}
		for qos, p := range pods {
			if got := strings.ToLower(string(p.Status.QOSClass)); got != qos {
				t.Errorf("pod %s: QoS class %s, want %s", p.Name, got, qos)
			}
			w, ok := byUID[string(p.UID)]
			if !ok {
				t.Errorf("pod %s (%s): not discovered; discovered %+v", p.Name, p.UID, ws)
				continue
			}
			if w.QOS != qos {
				t.Errorf("pod %s: discovered as %s, want %s", p.Name, w.QOS, qos)
			}
			wantCgroup := podCgroup(c, qos, string(p.UID))
			if w.Cgroup != wantCgroup {
				t.Errorf("pod %s: cgroup %s, want %s", p.Name, w.Cgroup, wantCgroup)
			}
			id := node.ContainerID(p)
			found := false
			for _, ct := range w.Containers {
				found = found || ct.ID == id
			}
			if !found {
				t.Errorf("pod %s: container %s not among the discovered %+v", p.Name, id, w.Containers)
			}
			t.Logf("%s pod %s: %s, containers %+v", qos, p.UID, w.Cgroup, w.Containers)
		}
	})

	t.Run("stat-summary", func(t *testing.T) {
		// Pod-level memory reads 0 for the first 10–20 s of a pod, and the
		// kubelet's figures come from cAdvisor's cache (refreshed every
		// 10–15 s; on the v2 node under emulation a pod's first sample was
		// seen taken before its hog had allocated): wait until every pod
		// shows at least what its hog holds.
		var kubelet statsapi.Summary
		c.WaitFor(t, 90*time.Second, "the kubelet's /stats/summary to report the pods' memory", func(ctx context.Context) (bool, error) {
			b, err := c.KubeletGet(ctx, "/stats/summary")
			if err != nil {
				return false, err
			}
			kubelet = statsapi.Summary{}
			if err := json.Unmarshal(b, &kubelet); err != nil {
				return false, err
			}
			for _, p := range pods {
				ps := podStats(&kubelet, string(p.UID))
				if ps == nil || ps.Memory == nil || ps.Memory.WorkingSetBytes == nil || *ps.Memory.WorkingSetBytes < hogHolds {
					return false, nil
				}
			}
			return true, nil
		})
		evictd := filepath.Join(c.Images, "bin", "evictd")
		ctx, cancel := context.WithTimeout(context.Background(), node.APITimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, evictd, "stat", "--summary", "--kubelet-root", c.KubeletRoot, "--pod-logs", c.PodLogs).Output()
		if err != nil {
			t.Fatalf("evictd stat --summary: %v", err)
		}
		var ours statsapi.Summary
		if err := json.Unmarshal(out, &ours); err != nil {
			t.Fatalf("evictd stat --summary: %v\n%s", err, out)
		}
		// The two are read seconds apart and the kubelet's comes from a
		// cache refreshed every 10 s; the hogs hold their memory, so what
		// moves is the runtime's and the page cache's small change.
		const tolAbs, tolRel = 4 << 20, 0.05
		for qos, p := range pods {
			k, o := podStats(&kubelet, string(p.UID)), podStats(&ours, string(p.UID))
			if o == nil || o.Memory == nil {
				t.Errorf("%s pod %s: not in evictd's summary", qos, p.UID)
				continue
			}
			for _, f := range []struct {
				name string
				k, o *uint64
			}{
				{"workingSetBytes", k.Memory.WorkingSetBytes, o.Memory.WorkingSetBytes},
				{"usageBytes", k.Memory.UsageBytes, o.Memory.UsageBytes},
				{"rssBytes", k.Memory.RSSBytes, o.Memory.RSSBytes},
			} {
				if f.k == nil || f.o == nil {
					t.Errorf("%s pod: %s kubelet %v, evictd %v: want both", qos, f.name, f.k, f.o)
					continue
				}
				d := math.Abs(float64(*f.k) - float64(*f.o))
				tol := math.Max(tolAbs, tolRel*float64(*f.k))
				t.Logf("%s pod: %s kubelet %d, evictd %d (differ by %.0f, tolerance %.0f)", qos, f.name, *f.k, *f.o, d, tol)
				if d > tol {
					t.Errorf("%s pod: %s kubelet %d, evictd %d: differ by %.0f > %.0f", qos, f.name, *f.k, *f.o, d, tol)
				}
			}
		}
	})
}

// podCgroup is where the kubelet puts a pod of the QoS class (lower case)
// with its driver, relative to the hierarchy's root:
//
//	cgroupfs: /kubepods[/<qos>]/pod<uid>
//	systemd:  /kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid with _>.slice
//
// (Guaranteed pods directly under the pods cgroup.)
func podCgroup(c *node.Cluster, qos, uid string) string {
	if c.CgroupDriver == "systemd" {
		if qos == "guaranteed" {
			return "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
		}
		return "/kubepods.slice/kubepods-" + qos + ".slice/kubepods-" + qos + "-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	}
	if qos == "guaranteed" {
		return "/kubepods/pod" + uid
	}
	return "/kubepods/" + qos + "/pod" + uid
}

// hogHolds is what TestPodsOfEachQoSClass's hogs allocate and hold.
const hogHolds = 24 << 20

func podStats(s *statsapi.Summary, uid string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.UID == uid {
			return &s.Pods[i]
		}
	}
	return nil
}

// EvictionRecord is what the kubelet's own eviction manager leaves in the
// API when it evicts a pod for memory: the baseline evictd's Kubernetes
// mode is compared with. Messages are kept with their numbers masked ("N")
// in testdata/kubelet-eviction.json.
type EvictionRecord struct {
	Threshold  string        `json:"threshold"`
	Phase      string        `json:"phase"`
	Reason     string        `json:"reason"`
	Message    string        `json:"message"`
	Condition  RecordedCond  `json:"disruptionTargetCondition"`
	PodEvents  []RecordedEvt `json:"podEvents"`
	NodeEvents []RecordedEvt `json:"nodeEvents"`
}

type RecordedCond struct {
	Type, Status, Reason, Message string
}

type RecordedEvt struct {
	Type, Reason, Message, Component string
}

// The kubelet's eviction manager evicts a memory hog when the pods'
// allocatable memory.available crosses the hard threshold. The test
// watches the pods cgroup to time the crossing, records what the kubelet
// leaves in the API and compares it with testdata/kubelet-eviction.json.
func TestKubeletEvictsMemoryHog(t *testing.T) {
	c := node.Get(t)
	// The eviction leaves the node under MemoryPressure for the kubelet's
	// transition period (20 s), when it rejects the next test's BestEffort
	// pods: wait it out (registered first, so it runs after the namespace
	// and the hog are gone).
	t.Cleanup(func() { waitNoMemoryPressure(t, c) })
	ns := c.Namespace(t, "smoke-evict")
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	threshold := resource.MustParse(c.Threshold)
	// The pods signal is the pods cgroup's limit (capacity − reserved) less
	// its working set: the hog grows to 120 MiB above the threshold and
	// holds, below the limit, so only an eviction ends it.
	pc, err := col.ReadCgroupMemory(col.PodsCgroup(), true)
	if err != nil || !pc.HasLimit {
		t.Fatalf("pods cgroup memory: %+v, %v: want a limit (enforceNodeAllocatable: pods)", pc, err)
	}
	target := int64(pc.Limit) - threshold.Value() + 120<<20 - int64(pc.WorkingSet)
	script := fmt.Sprintf("ramp %d 100Mi; hold", target)
	t.Logf("pods cgroup limit %d, working set %d, threshold %s: hog %q", pc.Limit, pc.WorkingSet, c.Threshold, script)

	if _, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), node.HogPod("hog", script, "64Mi", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Sample the pods cgroup every 50 ms for the crossing time.
	crossed := sampleCrossing(t, col, threshold, 50*time.Millisecond)
	var p *corev1.Pod
	c.WaitFor(t, 120*time.Second, "the kubelet to evict the hog", func(ctx context.Context) (bool, error) {
		var err error
		p, err = c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodFailed, nil
	})
	failedAt := time.Now()
	var crossedAt time.Time
	select {
	case at := <-crossed:
		crossedAt = at
		t.Logf("threshold crossed → pod Failed/%s seen in the API: %.2f s (the kubelet polls every 10 s)", p.Status.Reason, failedAt.Sub(at).Seconds())
	default:
		t.Errorf("the pod failed (%s: %s) but the pods cgroup never crossed the threshold", p.Status.Reason, p.Status.Message)
	}

	rec := EvictionRecord{Threshold: "memory.available<" + c.Threshold, Phase: string(p.Status.Phase), Reason: p.Status.Reason, Message: p.Status.Message}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			rec.Condition = RecordedCond{string(cond.Type), string(cond.Status), cond.Reason, cond.Message}
		}
	}
	// Events are written asynchronously: wait for the pod's Evicted and
	// the node's EvictionThresholdMet of this eviction. The node's events
	// outlive the tests (and the kubelet updates one event's count and
	// lastTimestamp when it repeats): one last written before the crossing
	// is an earlier test's. (Event times have whole seconds.)
	since := crossedAt.Truncate(time.Second)
	defer func() {
		if t.Failed() {
			logEvents(t, c, ns, "default")
		}
	}()
	c.WaitFor(t, 30*time.Second, "the eviction's events", func(ctx context.Context) (bool, error) {
		rec.PodEvents, err = events(ctx, c, ns, fields.Set{"involvedObject.uid": string(p.UID)}, time.Time{}, "Evicted", "Killing")
		if err != nil {
			return false, err
		}
		rec.NodeEvents, err = events(ctx, c, "default", fields.Set{"involvedObject.kind": "Node", "involvedObject.name": c.Node}, since, "EvictionThresholdMet")
		return err == nil && hasReason(rec.PodEvents, "Evicted") && hasReason(rec.NodeEvents, "EvictionThresholdMet"), err
	})
	live, _ := json.MarshalIndent(rec, "", "  ")
	t.Logf("the kubelet's eviction, as the API shows it:\n%s", live)

	golden := filepath.Join("testdata", "kubelet-eviction.json")
	masked := mask(rec)
	if *update {
		b, _ := json.MarshalIndent(masked, "", "  ")
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var want EvictionRecord
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	got, _ := json.MarshalIndent(masked, "", "  ")
	wantB, _ := json.MarshalIndent(want, "", "  ")
	if string(got) != string(wantB) {
		t.Errorf("the kubelet's eviction differs from %s (numbers masked):\ngot  %s\nwant %s", golden, got, wantB)
	}
}

// events lists the events of ns that sel selects, with one of the reasons
// and last written at or after since.
func events(ctx context.Context, c *node.Cluster, ns string, sel fields.Set, since time.Time, reasons ...string) ([]RecordedEvt, error) {
	l, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, err
	}
	var out []RecordedEvt
	for _, e := range l.Items {
		if e.LastTimestamp.Time.Before(since) {
			continue
		}
		for _, r := range reasons {
			if e.Reason == r {
				comp := e.Source.Component
				if comp == "" {
					comp = e.ReportingController
				}
				out = append(out, RecordedEvt{e.Type, e.Reason, e.Message, comp})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out, nil
}

// logEvents logs every event of the namespaces, for a failed wait: which
// events the kubelet did write, with their counts and times.
func logEvents(t *testing.T, c *node.Cluster, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		l, err := c.Client.CoreV1().Events(ns).List(node.Ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Logf("events in %s: %v", ns, err)
			continue
		}
		var b strings.Builder
		for _, e := range l.Items {
			fmt.Fprintf(&b, "\n  %s %s/%s %s %s %q from %s/%s count %d first %s last %s", e.Name, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message,
				e.Source.Component, e.ReportingController, e.Count, e.FirstTimestamp.UTC().Format(time.TimeOnly), e.LastTimestamp.UTC().Format(time.TimeOnly))
		}
		t.Logf("%d events in %s (now %s):%s", len(l.Items), ns, time.Now().UTC().Format(time.TimeOnly), b.String())
	}
}

func hasReason(es []RecordedEvt, r string) bool {
	for _, e := range es {
		if e.Reason == r {
			return true
		}
	}
	return false
}

var digits = regexp.MustCompile(`[0-9]+`)

// mask replaces the numbers in the record's messages (sizes, which vary
// from run to run) with N; the threshold keeps its own.
func mask(r EvictionRecord) EvictionRecord {
	m := func(s string) string { return digits.ReplaceAllString(s, "N") }
	r.Message = m(r.Message)
	r.Condition.Message = m(r.Condition.Message)
	for _, es := range [][]RecordedEvt{r.PodEvents, r.NodeEvents} {
		for i := range es {
			es[i].Message = m(es[i].Message)
		}
	}
	return r
}

// The no-traffic guard counts (and drops) a packet that the cluster sends
// off the machine: one ping to TEST-NET-3 from the cluster's cgroup, and one
// from a hostNetwork pod. Main's final check discounts exactly the packets
// to that address; any other fails the tier.
func TestNoTrafficGuardCountsALeak(t *testing.T) {
	c := node.Get(t)
	counted := func(what string, send func() string) {
		t.Helper()
		before, err := c.Canary()
		if err != nil {
			t.Fatal(err)
		}
		said := send()
		after, err := c.Canary()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: the guard counted and dropped %d packet(s) to %s (ping said %q)", what, after-before, node.CanaryAddr, said)
		if after == before {
			t.Errorf("%s: a ping to %s was not counted (ping said %q)", what, node.CanaryAddr, said)
		}
	}
	counted("a process in the cluster's cgroup", func() string { return c.PingFromClusterCgroup(node.Ctx(t)) })
	counted("a hostNetwork pod", func() string {
		ns := c.Namespace(t, "smoke-canary")
		p := node.HogPod("canary", "", "", "")
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Command = []string{"/bin/ping", "-c", "1", "-W", "1", node.CanaryAddr}
		if _, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		c.WaitFor(t, 60*time.Second, "the canary pod to end", func(ctx context.Context) (bool, error) {
			var err error
			got, err = c.Client.CoreV1().Pods(ns).Get(ctx, "canary", metav1.GetOptions{})
			return err == nil && (got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded), err
		})
		return fmt.Sprintf("pod %s", got.Status.Phase)
	})
	if left, err := c.Leaked(); err != nil || left != 0 {
		t.Errorf("besides the canaries, %d packet(s) counted (err %v)", left, err)
	}
}

// A pull goes nowhere: the registry host config's default server is a closed
// loopback port, so the kubelet's pulls of a Docker Hub image and of one
// from another registry fail there, and resolve no name (a DNS query would
// also fail the no-traffic check).
func TestPullsStayOnLoopback(t *testing.T) {
	c := node.Get(t)
	ns := c.Namespace(t, "smoke-pull")
	for i, img := range []string{"docker.io/library/busybox:1.36", "registry.example.org/evictd/none:1"} {
		name := fmt.Sprintf("pull-%d", i)
		p := node.HogPod(name, "hold", "", "")
		p.Spec.Containers[0].Image = img
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
		if _, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var msg string
		c.WaitFor(t, 60*time.Second, "the pull of "+img+" to fail", func(ctx context.Context) (bool, error) {
			got, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(got.Status.ContainerStatuses) == 0 {
				return false, err
			}
			w := got.Status.ContainerStatuses[0].State.Waiting
			if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") || w.Message == "" {
				return false, nil
			}
			msg = w.Message
			return true, nil
		})
		t.Logf("%s: %s", img, msg)
		if !strings.Contains(msg, "127.0.0.1:1") {
			t.Errorf("the pull of %s failed, but not on the loopback guard: %s", img, msg)
		}
	}
	if left, err := c.Leaked(); err != nil || left != 0 {
		t.Errorf("the pulls sent %d packet(s) off loopback (err %v)", left, err)
	}
}
