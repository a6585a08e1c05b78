package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
)

const saToken = "evictd-serviceaccount-token"

// The ServiceAccount and namespace deploy/kubernetes/ installs.
const deployNamespace, deploySA = "kube-system", "evictd"

// installDeploy applies deploy/kubernetes/ as a user does.
func installDeploy(t *testing.T, srv *kubetest.Server) {
	t.Helper()
	srv.Kubectl(t, "apply", "-k", filepath.Join("..", "..", "deploy", "kubernetes"))
}

// TestRealClusterRole: the shipped ClusterRole allows every call evictd
// makes, and nothing it must not do.
func TestRealClusterRole(t *testing.T) {
	srv := kubetest.Start(t, kubetest.ServiceAccountUser(saToken, deployNamespace, deploySA))
	installDeploy(t, srv)
	user := kubetest.ServiceAccountUser(saToken, deployNamespace, deploySA)
	check := func(verb, resource, sub, ns string) bool {
		group, resource, _ := strings.Cut(resource, ".")
		if resource == "" {
			group, resource = "", group
		} else {
			group, resource = resource, group
		}
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: user.Name, Groups: user.Groups,
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns}}}
		r, err := srv.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, a := range []struct{ verb, res, sub, ns string }{
		{"list", "pods", "", ""}, {"watch", "pods", "", ""}, {"get", "pods", "", "any"},
		{"create", "pods", "eviction", "any"}, {"delete", "pods", "", "any"}, {"patch", "pods", "status", "any"},
		{"create", "events", "", "any"}, {"create", "events", "", "default"},
		{"get", "nodes", "", ""}, {"get", "nodes", "stats", ""},
		// The secure metrics endpoint's reviews of each scraper's token.
		{"create", "tokenreviews.authentication.k8s.io", "", ""}, {"create", "subjectaccessreviews.authorization.k8s.io", "", ""},
	} {
		if !check(a.verb, a.res, a.sub, a.ns) {
			t.Errorf("the ClusterRole does not allow %s %s/%s (evictd needs it)", a.verb, a.res, a.sub)
		}
	}
	for _, a := range []struct{ verb, res, sub, ns string }{
		{"get", "secrets", "", "any"}, {"list", "secrets", "", ""}, {"create", "pods", "", "any"},
		{"update", "pods", "", "any"}, {"patch", "pods", "", "any"}, {"update", "pods", "status", "any"},
		{"delete", "nodes", "", ""}, {"patch", "nodes", "", ""}, {"patch", "nodes", "status", ""},
		{"get", "nodes", "proxy", ""}, {"create", "pods", "exec", "any"}, {"delete", "events", "", "any"},
		{"list", "configmaps", "", ""}, {"delete", "poddisruptionbudgets", "", "any"},
	} {
		if check(a.verb, a.res, a.sub, a.ns) {
			t.Errorf("the ClusterRole allows %s %s/%s, which evictd must not do", a.verb, a.res, a.sub)
		}
	}
	// And the real answers with the real token: 403 on what it must not do.
	sa, err := kubernetes.NewForConfig(srv.ConfigFor(saToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.Node(t, "node-a")
	if err := sa.CoreV1().Nodes().Delete(ctx, "node-a", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete node: %v, want 403", err)
	}
	if _, err := sa.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: %v, want 403", err)
	}
	if _, err := sa.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Errorf("get node: %v", err)
	}
}

// nodeSetup is a real API server with deploy/kubernetes/ applied, a node,
// and three pods with real cgroups (v1) under a kubepods tree limited to
// 256M: evictd's own (96 MiB), hog (64 MiB, plus a 1 MiB sandbox) and small
// (8 MiB). allocatable available ≈ 256 − 170 MiB < 120 MiB; ≈ 140 MiB once
// hog is gone.
type nodeSetup struct {
	srv            *kubetest.Server
	ns, pods       string
	self, hog      *v1.Pod
	hogProc, pause *cgrouptest.Hog
	hogDir         string // hog's container cgroup
	smallDir       string // small's container cgroup
	cfg            policy.Config
	logs           *syncbuf.Buffer
}

func setupNode(t *testing.T) *nodeSetup {
	srv := kubetest.Start(t, kubetest.ServiceAccountUser(saToken, deployNamespace, deploySA))
	cgrouptest.RequireV1Memory(t)
	installDeploy(t, srv)
	ns := "work"
	srv.Namespace(t, ns)
	srv.Node(t, "node-a")
	self := srv.RunningPod(t, testPod(ns, "evictd-abc"), "node-a")
	hog := srv.RunningPod(t, testPod(ns, "hog"), "node-a")
	small := srv.RunningPod(t, testPod(ns, "small"), "node-a")

	base := cgrouptest.UniqueName(t)
	pods := base + "/kubepods"
	cid := func(p *v1.Pod) string { return containerID(p.Status.ContainerStatuses[0].ContainerID) }
	mk := func(rel string, mib int) *cgrouptest.Hog {
		d := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, rel)
		return cgrouptest.StartHog(t, mib, d)
	}
	cgrouptest.Mkdirs(t, cgrouptest.V1Memory, pods)
	if err := cgroupv1.WriteMemoryLimitInBytes(filepath.Join(cgrouptest.V1Memory, pods), 256<<20); err != nil {
		t.Fatal(err)
	}
	mk(fmt.Sprintf("%s/besteffort/pod%s/%s", pods, self.UID, cid(self)), 96)
	hogDir := fmt.Sprintf("%s/besteffort/pod%s/%s", pods, hog.UID, cid(hog))
	hogProc := mk(hogDir, 64)
	pause := mk(fmt.Sprintf("%s/besteffort/pod%s/%s", pods, hog.UID, strings.Repeat("f", 64)), 1)
	smallDir := fmt.Sprintf("%s/besteffort/pod%s/%s", pods, small.UID, cid(small))
	mk(smallDir, 8)
	fitOverhead(t, filepath.Join(cgrouptest.V1Memory, pods), 96+64+1+8)
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "120Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &nodeSetup{srv: srv, ns: ns, pods: pods, self: self, hog: hog, hogProc: hogProc, pause: pause, hogDir: filepath.Join(cgrouptest.V1Memory, hogDir),
		smallDir: filepath.Join(cgrouptest.V1Memory, smallDir), cfg: cfg, logs: &syncbuf.Buffer{}}
	// A failed wait (t.Fatal) ends the test before it logs what evictd did.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("evictd's log (the test failed):\n%s", s.logs.String())
		}
	})
	return s
}

// fitOverhead raises the kubepods limit by what the hogs use beyond the
// MiB they allocate (designed), so that allocatable available is the round
// figure the tests' thresholds are set against. Each hog process adds its Go
// runtime and the file pages of its binary that it keeps active, a few MiB
// that depend on the machine: on a fresh CI machine the five processes took
// 33 MiB more than their 173 MiB, available read 53 MiB instead of ≈ 86, and
// TestRealLocalFallbackAPIServerDown's 60Mi threshold was met before its
// pressure began (its hog evicted at evictd's start).
func fitOverhead(t *testing.T, dir string, designed int) {
	t.Helper()
	u, err := cgroupv1.ReadMemoryUsageInBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cgroupv1.ReadMemoryStat(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws := int64(cgroupv1.WorkingSet(u, &st))
	over := max(0, ws-int64(designed)<<20)
	if err := cgroupv1.WriteMemoryLimitInBytes(dir, uint64(256<<20+over)); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubepods: working set %.1f MiB for %d MiB of hogs; limit raised by %.1f MiB to %.1f MiB", float64(ws)/(1<<20), designed, float64(over)/(1<<20), float64(256<<20+over)/(1<<20))
}

// options wire evictd as `evictd run --kubernetes` does, with the
// ServiceAccount's token, a 1 s period and no kernel wake-ups.
func (s *nodeSetup) options() Options {
	return Options{
		Rest: s.srv.ConfigFor(saToken), Node: "node-a", Self: Self{UID: s.self.UID},
		Options: agent.Options{Policy: s.cfg, Wakeups: agent.NoWakeups, Interval: time.Second, Log: slog.New(slog.NewTextHandler(s.logs, nil))},
		Collect: collect.Config{PodsCgroup: "/" + s.pods}, PDBWait: DefaultPDBWait,
	}
}

// TestRealKubernetesMode: evictd wired as `evictd run --kubernetes` wires
// it, with the shipped RBAC's identity, on a real API server and a real
// kubepods tree (cgroup v1), a kubelet simulated by the test (it removes an
// evicted pod's processes and its API object). evictd evicts the pod the
// kubelet would, with the kubelet's grace, message, condition and Events,
// and skips its own pod, which uses the most memory.
func TestRealKubernetesMode(t *testing.T) {
	s := setupNode(t)
	srv, ns, hogProc, pause, logs := s.srv, s.ns, s.hogProc, s.pause, s.logs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := s.options()
	o.Metrics = agent.NewMetrics()
	n, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()

	// The kubelet's part: once the API marks hog for deletion, stop its
	// processes and remove the object.
	var got *v1.Pod
	waitUntil(t, "evictd to evict hog", func() bool {
		got, err = srv.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil
	})
	if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 1 {
		t.Errorf("grace %v, want 1 s (hard threshold)", got.DeletionGracePeriodSeconds)
	}
	waitUntil(t, "the DisruptionTarget condition", func() bool {
		got, _ = srv.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		for _, c := range got.Status.Conditions {
			if c.Type == v1.DisruptionTarget && c.Reason == v1.PodReasonTerminationByKubelet {
				return strings.Contains(c.Message, "Container main was using")
			}
		}
		return false
	})
	// evictd's own eviction carries the kubelet's condition, but is not
	// one of the kubelet's: the informer has seen the condition (evictd
	// patched it after noting the pod), and the counter stays at 0.
	waitUntil(t, "the informer to see the condition", func() bool {
		p, ok, _ := n.Pods.Informer().GetStore().GetByKey(ns + "/hog")
		return ok && EvictedByKubelet(p.(*v1.Pod))
	})
	if got := counterValue(t, o.Metrics.KubeletEvictionsObserved()); got != 0 {
		t.Errorf("evictd_kubelet_evictions_observed_total = %v after evictd's own eviction, want 0", got)
	}
	_ = hogProc.Cmd.Process.Kill()
	_ = pause.Cmd.Process.Kill()
	zero := int64(0)
	if err := srv.Client.CoreV1().Pods(ns).Delete(ctx, "hog", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	evs := func(obj string) []v1.Event {
		var out []v1.Event
		for _, namespace := range []string{ns, "default"} {
			l, err := srv.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", obj).String()})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l.Items...)
		}
		return out
	}
	waitUntil(t, "the pod and node events", func() bool { return len(evs("hog")) > 0 && len(evs("node-a")) > 0 })
	pe := evs("hog")[0]
	want := "The node was low on resource: memory. Threshold quantity: 120Mi, available: "
	if pe.Reason != "Evicted" || !strings.HasPrefix(pe.Message, want) || !strings.Contains(pe.Message, "Container main was using") ||
		pe.Annotations["offending_containers"] != "main" || pe.Annotations["starved_resource"] != "memory" {
		t.Errorf("pod event %s %q %v", pe.Reason, pe.Message, pe.Annotations)
	}
	ne := evs("node-a")[0]
	if ne.Reason != "EvictionThresholdMet" || ne.Message != "Attempting to reclaim memory" || ne.InvolvedObject.Kind != "Node" {
		t.Errorf("node event %s %q %+v", ne.Reason, ne.Message, ne.InvolvedObject)
	}
	// Pressure is gone: a few more synchronizes evict nothing else.
	time.Sleep(3 * time.Second)
	for _, name := range []string{"evictd-abc", "small"} {
		p, err := srv.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was evicted too: %v", name, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "evicted") || strings.Contains(out, "eviction failed") {
		t.Errorf("log:\n%s", out)
	}
	t.Logf("evictd's log:\n%s", out)
}

// TestRealShadowMode: in shadow mode evictd changes nothing, and when the
// kubelet evicts a pod it records that evictd had decided the same pod and
// how much earlier.
func TestRealShadowMode(t *testing.T) {
	s := setupNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := s.options()
	o.Shadow = true
	o.Metrics = agent.NewMetrics()
	n, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	waitUntil(t, "evictd to decide", func() bool { return strings.Contains(s.logs.String(), "dry run: would evict") })
	time.Sleep(1500 * time.Millisecond)
	// The kubelet evicts hog.
	hog, err := s.srv.Client.CoreV1().Pods(s.ns).Get(ctx, "hog", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hog.DeletionTimestamp != nil {
		t.Fatal("shadow mode evicted hog")
	}
	hog.Status.Phase, hog.Status.Reason, hog.Status.Message = v1.PodFailed, "Evicted", "The node was low on resource: memory."
	if _, err := s.srv.Client.CoreV1().Pods(s.ns).UpdateStatus(ctx, hog, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var reps []ShadowReport
	waitUntil(t, "the shadow report", func() bool { reps = n.Shadow.Reports(); return len(reps) > 0 })
	if r := reps[0]; r.Pod.Name != "hog" || !r.Decided || r.Lead < time.Second {
		t.Errorf("shadow report %+v, want hog, decided, lead ≥ 1 s", r)
	}
	waitUntil(t, "evictd_kubelet_evictions_observed_total 1", func() bool {
		return counterValue(t, o.Metrics.KubeletEvictionsObserved()) == 1
	})
	// The log line follows the report (Shadow logs after it publishes).
	waitUntil(t, "the shadow log line", func() bool { return strings.Contains(s.logs.String(), "shadow: the kubelet evicted a pod") })
	// The kubelet's eviction wakes evictd, which decides again at once (as
	// after an eviction of its own): hog's processes still run here, so
	// the next pod in its ranking.
	waitUntil(t, "the decision after the kubelet's eviction", func() bool {
		return strings.Contains(s.logs.String(), "pod=work/small signal=allocatableMemory.available grace=1s trigger=wake wake_source=shadow")
	})
	evs, _ := s.srv.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	for _, e := range evs.Items {
		if e.Source.Component == Component {
			t.Errorf("shadow mode recorded an event: %s %q", e.Reason, e.Message)
		}
	}
	cancel()
	<-done
}

func runNode(t *testing.T, o Options) (*Node, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n, err := New(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	return n, cancel, done
}

func podCgroupEmpty(t *testing.T, dir string) bool {
	pids, err := actuate.ProcsRecursive(filepath.Dir(dir))
	return err == nil && len(pids) == 0
}

func untouched(t *testing.T, s *nodeSetup, names ...string) {
	t.Helper()
	for _, name := range names {
		p, err := s.srv.Client.CoreV1().Pods(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was evicted too: %v", name, err)
		}
	}
}

// TestRealLocalFallbackKubeletWedged: the API accepts the eviction but no
// kubelet stops the pod; after grace + deadline evictd kills the pod's
// cgroup itself (on v1 SIGKILL with the pod held at its limit: its growth
// stop keeps it from forking), and does not pick the pod again
// while its API object lingers, nor any other pod.
func TestRealLocalFallbackKubeletWedged(t *testing.T) {
	s := setupNode(t)
	o := s.options()
	o.LocalDeadline = time.Second
	_, cancel, done := runNode(t, o)
	defer cancel()
	waitUntil(t, "the local kill of hog's cgroup", func() bool { return podCgroupEmpty(t, s.hogDir) })
	p, err := s.srv.Client.CoreV1().Pods(s.ns).Get(context.Background(), "hog", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("hog: %v; want the eviction accepted (deletion timestamp set)", err)
	}
	waitUntil(t, "the eviction to be logged", func() bool {
		return strings.Contains(s.logs.String(), "then local SIGKILL (held) after grace 1s + deadline 1s")
	})
	time.Sleep(3 * time.Second)
	untouched(t, s, "evictd-abc", "small")
	if n := strings.Count(s.logs.String(), "msg=evicted"); n != 1 {
		t.Errorf("%d evictions, want 1:\n%s", n, s.logs.String())
	}
	cancel()
	<-done
}

// TestRealLocalFallbackAPIServerDown: the API server stops; pressure comes;
// evictd keeps deciding from its cache and its own stats, and, the
// eviction call failing, kills the pod's cgroup itself after grace +
// deadline, and records that it did; its goroutines and descriptors do not
// grow while the server is away; when the server is back, evictions go
// through the API again.
func TestRealLocalFallbackAPIServerDown(t *testing.T) {
	s := setupNode(t)
	o := s.options()
	o.LocalDeadline = time.Second
	// allocatable available ≈ 256 − 170 MiB: not under 60 MiB yet.
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "60Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	o.Policy = cfg
	// gone: a pod that dies while the API server is away (its cgroup
	// removed, as the kubelet removes a stopped pod's), which the informer
	// keeps listing as running.
	gone := s.srv.RunningPod(t, testPod(s.ns, "gone"), "node-a")
	goneDir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, fmt.Sprintf("%s/besteffort/pod%s/%s", s.pods, gone.UID, containerID(gone.Status.ContainerStatuses[0].ContainerID)))
	goneProc := cgrouptest.StartHog(t, 4, goneDir)
	_, cancel, done := runNode(t, o)
	defer cancel()
	time.Sleep(2 * time.Second)
	if strings.Contains(s.logs.String(), "msg=evicted") {
		t.Fatalf("evicted before the pressure:\n%s", s.logs.String())
	}
	s.srv.StopAPIServer()
	_ = goneProc.Cmd.Process.Kill()
	_ = goneProc.Cmd.Wait()
	cgrouptest.RemoveTree(t, filepath.Dir(goneDir))
	cgrouptest.StartHog(t, 48, s.hogDir) // hog's container grows by 48 MiB
	waitUntil(t, "the local kill of hog's cgroup", func() bool { return podCgroupEmpty(t, s.hogDir) })
	waitUntil(t, "the eviction to be logged", func() bool {
		return strings.Contains(s.logs.String(), "local SIGKILL (held) after grace 1s + deadline 1s (eviction API:")
	})
	// gone, without stats, would have been ranked first, and its eviction
	// could neither reach the API nor find anything to kill.
	if !strings.Contains(s.logs.String(), "has no cgroup on this node any more") || strings.Contains(s.logs.String(), "pod=work/gone signal") {
		t.Errorf("want gone left out of the ranking, not evicted:\n%s", s.logs.String())
	}

	// Still away: a few more synchronizes and informer retries.
	time.Sleep(2 * time.Second)
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	time.Sleep(5 * time.Second)
	g1, f1 := runtime.NumGoroutine(), openFDs(t)
	if g1 > g0+5 || f1 > f0+3 {
		t.Errorf("while the API server is away: goroutines %d → %d, descriptors %d → %d", g0, g1, f0, f1)
	}
	t.Logf("while the API server is away: goroutines %d → %d, descriptors %d → %d", g0, g1, f0, f1)

	s.srv.RestartAPIServer(t)
	cgrouptest.StartHog(t, 100, s.smallDir) // small grows past evictd's own pod
	waitUntil(t, "the API eviction of small", func() bool {
		p, err := s.srv.Client.CoreV1().Pods(s.ns).Get(context.Background(), "small", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil
	})
	untouched(t, s, "evictd-abc")
	cancel()
	<-done
	t.Logf("evictd's log:\n%s", s.logs.String())
}

func openFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
