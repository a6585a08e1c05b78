package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/policy"
)

// apiserver starts a server for one test (about 3 s; stopped at its end).
func apiserver(t *testing.T) *kubetest.Server {
	t.Helper()
	return kubetest.Start(t)
}

func testPod(ns, name string, mut ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}},
			AutomountServiceAccountToken: new(bool)},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func names(pods []*v1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name)
	}
	return strings.Join(s, ",")
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRealPodSource: the informer lists only this node's pods, and only the
// active ones (admitted, not terminal); evictd's own pod comes back marked
// critical, so the engine never evicts it.
func TestRealPodSource(t *testing.T) {
	srv := apiserver(t)
	ns := "pods"
	srv.Namespace(t, ns)
	self := srv.RunningPod(t, testPod(ns, "evictd-x"), "node-a")
	srv.RunningPod(t, testPod(ns, "a"), "node-a")
	srv.RunningPod(t, testPod(ns, "elsewhere"), "node-b")
	srv.RunningPod(t, testPod(ns, "mirror", func(p *v1.Pod) {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.mirror": "abc"}
	}), "node-a")
	// Bound but not admitted by the kubelet yet: no start time.
	pending := testPod(ns, "pending")
	pending.Spec.NodeName = "node-a"
	if _, err := srv.Client.CoreV1().Pods(ns).Create(context.Background(), pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := srv.RunningPod(t, testPod(ns, "done"), "node-a")
	done.Status.Phase = v1.PodSucceeded
	if _, err := srv.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps, err := NewPods(ctx, srv.API, "node-a", Self{UID: self.UID})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	var got []*v1.Pod
	waitUntil(t, "the informer to list the node's pods", func() bool {
		got, _ = ps.Pods(ctx)
		return names(got) == "a,evictd-x,mirror"
	})
	for _, p := range got {
		crit := policy.IsCriticalPod(p)
		if want := p.Name != "a"; crit != want {
			t.Errorf("pod %s: critical = %v, want %v", p.Name, crit, want)
		}
	}
	if cached := ps.Get(ns, "evictd-x", self.UID); cached.Annotations[SelfAnnotation] != "" {
		t.Errorf("the informer's cached object was modified: %v", cached.Annotations)
	}
	// A new pod shows up once the kubelet has admitted it.
	srv.RunningPod(t, testPod(ns, "b"), "node-a")
	waitUntil(t, "pod b", func() bool { got, _ = ps.Pods(ctx); return names(got) == "a,b,evictd-x,mirror" })
}

func pdb(ns, app string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
}

func softEviction(p *v1.Pod, msg string) policy.Eviction {
	return policy.Eviction{Pod: policy.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		GracePeriodSeconds: 30, Message: msg, Signal: "memory.available",
		Annotations: map[string]string{"offending_containers": "main", "offending_containers_usage": "100Mi", "starved_resource": "memory"},
		Condition:   &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: msg}}
}

// TestRealEviction: the Eviction API with the kubelet's grace and a UID
// precondition, then the DisruptionTarget condition and the Evicted Event
// with the kubelet's message and annotations.
func TestRealEviction(t *testing.T) {
	srv := apiserver(t)
	ns := "evict"
	srv.Namespace(t, ns)
	pod := srv.RunningPod(t, testPod(ns, "hog"), "node-a")
	msg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container main was using 100Mi, request is 0, has larger consumption of memory. "
	e := &Evictor{Client: srv.API, Node: "node-a", PDBWait: DefaultPDBWait,
		Events:     NewRecorder("Events", "events", 1, 0, nil, nil),
		Conditions: NewRecorder("conditions", "conditions", 1, 0, nil, nil)}
	ev := softEviction(pod, msg)
	res, err := e.Evict(context.Background(), pod, 7*time.Second, ev)
	if err != nil {
		t.Fatalf("Evict: %v (%+v)", err, res)
	}
	// The condition and the Event are written off the eviction path.
	if !e.Events.Close(20*time.Second) || !e.Conditions.Close(20*time.Second) {
		t.Fatal("the Event and the condition were not written within 20 s")
	}
	if res.Method != "Eviction API" || res.Gone {
		t.Errorf("result %+v", res)
	}
	got, err := srv.Client.CoreV1().Pods(ns).Get(context.Background(), "hog", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 7 {
		t.Errorf("after eviction: deletionTimestamp %v, grace %v; want set, 7", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	var cond *v1.PodCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.DisruptionTarget {
			cond = &got.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Reason != v1.PodReasonTerminationByKubelet || cond.Message != msg || cond.Status != v1.ConditionTrue {
		t.Errorf("DisruptionTarget condition = %+v, want reason %s and the kubelet's message", cond, v1.PodReasonTerminationByKubelet)
	}
	evs, err := srv.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "hog").String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 {
		t.Fatalf("events of the pod: %d, want 1", len(evs.Items))
	}
	x := evs.Items[0]
	if x.Reason != "Evicted" || x.Type != v1.EventTypeWarning || x.Message != msg || x.InvolvedObject.UID != pod.UID || x.Source.Component != Component || x.Source.Host != "node-a" {
		t.Errorf("event %+v", x)
	}
	for k, v := range ev.Annotations {
		if x.Annotations[k] != v {
			t.Errorf("event annotation %s = %q, want %q", k, x.Annotations[k], v)
		}
	}
}

// TestRealEvictionGraceZero: a soft eviction with grace 0 (the kubelet's
// evictionMaxPodGracePeriod default) is no force delete through the API:
// the pod gets 1 s and stays until its kubelet is done.
func TestRealEvictionGraceZero(t *testing.T) {
	srv := apiserver(t)
	ns := "grace0"
	srv.Namespace(t, ns)
	pod := srv.RunningPod(t, testPod(ns, "p"), "node-a")
	e := &Evictor{Client: srv.API, Node: "node-a"}
	if _, err := e.Evict(context.Background(), pod, 0, softEviction(pod, "m")); err != nil {
		t.Fatal(err)
	}
	got, err := srv.Client.CoreV1().Pods(ns).Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pod was force-deleted: %v", err)
	}
	if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 1 {
		t.Errorf("grace %v, want 1", got.DeletionGracePeriodSeconds)
	}
}

// TestRealEvictionGone: a pod deleted by someone else, or replaced by a
// new pod of the same name, is not evicted twice, and the replacement is
// left alone (UID precondition).
func TestRealEvictionGone(t *testing.T) {
	srv := apiserver(t)
	ns := "gone"
	srv.Namespace(t, ns)
	ctx := context.Background()
	old := srv.RunningPod(t, testPod(ns, "p"), "node-a")
	zero := int64(0)
	if err := srv.Client.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e := &Evictor{Client: srv.API, Node: "node-a"}
	res, err := e.Evict(ctx, old, time.Second, softEviction(old, "m"))
	if err != nil || !res.Gone {
		t.Fatalf("deleted pod: %+v, %v; want gone, no error", res, err)
	}
	repl := srv.RunningPod(t, testPod(ns, "p"), "node-a")
	res, err = e.Evict(ctx, old, time.Second, softEviction(old, "m"))
	if err != nil || !res.Gone {
		t.Fatalf("replaced pod: %+v, %v; want gone, no error", res, err)
	}
	got, err := srv.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil || got.UID != repl.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the replacement was touched: %v %+v", err, got.ObjectMeta)
	}
	evs, _ := srv.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if len(evs.Items) != 0 {
		t.Errorf("events recorded for a pod evicted by nobody: %d", len(evs.Items))
	}
}

// TestRealPDB: a PodDisruptionBudget's 429 is overridden at once for an
// immediate (hard) eviction, after PDBWait for a soft one, never with a
// negative PDBWait; and the refused call returns at once (client-go's
// silent 429 retry would take about 100 s).
func TestRealPDB(t *testing.T) {
	srv := apiserver(t)
	ns := "pdb"
	srv.Namespace(t, ns)
	ctx := context.Background()
	for _, app := range []string{"hard", "soft", "strict"} {
		if _, err := srv.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb(ns, app), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deleting := func(name string) bool {
		p, err := srv.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil)
	}

	hard := srv.RunningPod(t, testPod(ns, "hard"), "node-a")
	e := &Evictor{Client: srv.API, Node: "node-a", PDBWait: DefaultPDBWait}
	ev := softEviction(hard, "m")
	ev.Immediate, ev.GracePeriodSeconds = true, 1
	start := time.Now()
	res, err := e.Evict(ctx, hard, time.Second, ev)
	if err != nil || res.Method != "delete (a PodDisruptionBudget refused the eviction)" || !deleting("hard") {
		t.Fatalf("hard: %+v, %v, deleting %v; want the pod deleted despite the PDB", res, err, deleting("hard"))
	}
	if took := time.Since(start); took > 2*DefaultCallTimeout {
		t.Errorf("hard eviction past a PDB took %s: a 429 was retried", took)
	}

	now := time.Now()
	clock := func() time.Time { return now }
	soft := srv.RunningPod(t, testPod(ns, "soft"), "node-a")
	e = &Evictor{Client: srv.API, Node: "node-a", PDBWait: 10 * time.Second, Now: clock}
	if _, err := e.Evict(ctx, soft, 30*time.Second, softEviction(soft, "m")); err == nil || !strings.Contains(err.Error(), "429") || deleting("soft") {
		t.Fatalf("soft, first refusal: err %v, deleting %v; want a 429 error and the pod kept", err, deleting("soft"))
	}
	now = now.Add(9 * time.Second)
	if _, err := e.Evict(ctx, soft, 30*time.Second, softEviction(soft, "m")); err == nil || deleting("soft") {
		t.Fatalf("soft, before the wait: err %v, deleting %v; want refused and kept", err, deleting("soft"))
	}
	now = now.Add(time.Second)
	res, err = e.Evict(ctx, soft, 30*time.Second, softEviction(soft, "m"))
	if err != nil || !deleting("soft") {
		t.Fatalf("soft, after the wait: %+v, %v; want deleted", res, err)
	}
	p, _ := srv.Client.CoreV1().Pods(ns).Get(ctx, "soft", metav1.GetOptions{})
	if p != nil && (p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30) {
		t.Errorf("soft delete grace = %v, want 30", p.DeletionGracePeriodSeconds)
	}

	strict := srv.RunningPod(t, testPod(ns, "strict"), "node-a")
	e = &Evictor{Client: srv.API, Node: "node-a", PDBWait: -1, Now: clock}
	for range 3 {
		if _, err := e.Evict(ctx, strict, 30*time.Second, softEviction(strict, "m")); err == nil {
			t.Fatal("strict: eviction past a PDB succeeded")
		}
		now = now.Add(time.Hour)
	}
	if deleting("strict") {
		t.Fatal("strict: the pod was deleted despite --pdb-wait < 0")
	}
}

// TestRealEvictionLoopEvent: with the profile's loop breaker, the second
// eviction of a DaemonSet's pods records a loop; Kubernetes mode records
// its EvictionLoop Event against the pod whose eviction closed it (the
// node's Events are recorded against the Node, as the kubelet's).
func TestRealEvictionLoopEvent(t *testing.T) {
	srv := apiserver(t)
	ns := "loop"
	srv.Namespace(t, ns)
	owned := func(p *v1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-ds-agent", Controller: &yes}}
	}
	cfg := policy.Config{Thresholds: mustThresholds(t, "memory.available", "1Gi"), PressureTransitionPeriod: time.Minute,
		LocalStorageCapacityIsolation: true, Features: policy.DefaultFeatureGates(), Profile: policy.Profile{LoopBreaker: true}}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	events := &NodeEvents{Client: srv.API, Node: "node-a"}
	t0 := time.Now()
	var last agent.Record
	for i, name := range []string{"agent-1", "agent-2"} {
		pod := srv.RunningPod(t, testPod(ns, name, owned), "node-a")
		now := t0.Add(time.Duration(i) * 30 * time.Second)
		d := eng.Step(now, policy.Input{Summary: loopSummary(now, pod), Pods: []*v1.Pod{pod}})
		if len(d.Evictions) != 1 {
			t.Fatalf("step %d: evictions %+v", i, d.Evictions)
		}
		last = agent.Record{Time: now, Decision: d}
		events.Record(last)
	}
	evs, err := srv.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", policy.EvictionLoopReason).String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 {
		t.Fatalf("EvictionLoop events: %d, want 1 (decision events %+v)", len(evs.Items), last.Decision.Events)
	}
	x := evs.Items[0]
	if x.InvolvedObject.Kind != "Pod" || x.InvolvedObject.Name != "agent-2" || x.Type != v1.EventTypeWarning ||
		!strings.Contains(x.Message, "DaemonSet loop/agent") || x.Source.Component != Component {
		t.Errorf("event %+v", x)
	}
}

func mustThresholds(t *testing.T, signal, value string) []policy.Threshold {
	t.Helper()
	th, err := policy.ParseThresholdConfig(nil, map[string]string{signal: value}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// loopSummary: 500Mi available of 8Gi, the pod using 600Mi.
func loopSummary(at time.Time, p *v1.Pod) *statsv1alpha1.Summary {
	avail, ws, use := uint64(500<<20), uint64(8<<30-500<<20), uint64(600<<20)
	return &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{Memory: &statsv1alpha1.MemoryStats{Time: metav1.NewTime(at), AvailableBytes: &avail, WorkingSetBytes: &ws}},
		Pods: []statsv1alpha1.PodStats{{PodRef: statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
			Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: &use}}},
	}
}
