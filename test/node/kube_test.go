package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/test/node"
)

// kubectl runs the node's kubectl as admin.
func kubectl(t testing.TB, c *node.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.TimeoutScale)*60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig, "--request-timeout", "20s"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installEvictd installs evictd as a user does with kustomize: `kubectl
// apply -k` of an overlay of deploy/kubernetes/ (kustomizeOverlay) into
// kube-system, whose PodSecurity admission is set to enforce the level the
// docs state. The overlay sets the image to the one `make image` built
// (imported into the node as evictd.local/evictd:node) and the two settings
// this test node needs: the kubelet's configuration is not at
// /var/lib/kubelet/config.yaml but in the run's directory, and the node
// runs no kube-proxy, so the in-cluster address of the API server (the
// kubernetes Service's cluster IP) does not answer: the pod is pointed at
// the API server's loopback address. args are added to evictd's. It waits
// for the rollout (the pod Ready: /readyz) and for evictd to run, removes it
// when the test ends, and returns evictd's log file on the node.
func installEvictd(t testing.TB, c *node.Cluster, args ...string) string {
	t.Helper()
	kubectl(t, c, "label", "--overwrite", "namespace", "kube-system", "pod-security.kubernetes.io/enforce="+podSecurityLevel, "pod-security.kubernetes.io/enforce-version=latest")
	kubectl(t, c, "apply", "-k", kustomizeOverlay(t, c, args...))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.TimeoutScale)*60*time.Second)
		defer cancel()
		_ = exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "--kubeconfig", c.Kubeconfig, "delete", "-k", filepath.Join("..", "..", "deploy", "kubernetes"), "--wait=true").Run()
		c.WaitFor(t, 60*time.Second, "evictd's pod gone", func(ctx context.Context) (bool, error) {
			l, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=evictd"})
			return err == nil && len(l.Items) == 0, err
		})
		// evictd's node events live in "default", which outlives the
		// test's namespace: remove them, as the other tests read the
		// node's events.
		l, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("listing node events: %v", err)
			return
		}
		for _, e := range l.Items {
			if e.Source.Component == "evictd" {
				_ = c.Client.CoreV1().Events("default").Delete(ctx, e.Name, metav1.DeleteOptions{})
			}
		}
	})
	// The rollout waits for the pod to be Ready, which its startup probe
	// allows up to 3 min: longer than kubectl's 60 s here.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.TimeoutScale)*200*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "--kubeconfig", c.Kubeconfig, "-n", "kube-system",
		"rollout", "status", "daemonset/evictd", fmt.Sprintf("--timeout=%ds", 180*c.TimeoutScale)).CombinedOutput(); err != nil {
		t.Fatalf("kubectl rollout status daemonset/evictd: %v\n%s", err, out)
	}
	var logFile string
	c.WaitFor(t, 90*time.Second, "evictd running on the node", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=evictd"})
		if err != nil || len(l.Items) != 1 {
			return false, err
		}
		p := l.Items[0]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil ||
			!strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), strings.Join(args, " ")) {
			return false, nil
		}
		logFile = filepath.Join(c.PodLogs, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "evictd", "0.log")
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "evictd running in Kubernetes mode"), nil
	})
	return logFile
}

// TestEvictdEvictsFirst: coexistence on a real node. The kubelet polls
// every 10 s with its memory.available hard threshold; evictd runs as the
// DaemonSet's pod with the kubelet's own configuration. A pod ramps its
// memory past the threshold: evictd evicts it through the API, with the
// kubelet's message (container part included) and its 1 s grace, before
// the kubelet does anything; the kubelet never evicts and the kernel OOM
// killer never fires.
func TestEvictdEvictsFirst(t *testing.T) {
	c := node.Get(t)
	logFile := installEvictd(t, c)
	ns := c.Namespace(t, "kube-coexist")
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	threshold := resource.MustParse(c.Threshold)
	script, gate := gatedHog(t, c, threshold, 120<<20, "", ramp100)
	hog := c.RunPod(t, ns, node.HogPod("hog", script, "64Mi", ""))
	openGateAfterKubeletSync(t, c, gate)
	crossed := sampleCrossing(t, col, threshold, 20*time.Millisecond)
	var grace *int64
	c.WaitFor(t, 120*time.Second, "the hog's eviction", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if p.DeletionTimestamp != nil {
			grace = p.DeletionGracePeriodSeconds
			return true, nil
		}
		return p.Status.Phase == corev1.PodFailed, nil
	})
	seen := time.Now()
	select {
	case at := <-crossed:
		t.Logf("threshold crossed → eviction seen in the API: %.3f s", seen.Sub(at).Seconds())
	default:
		t.Errorf("evicted, but the pods cgroup never crossed the threshold")
	}
	if grace != nil && *grace != 1 {
		t.Errorf("deletion grace %d s, want 1 (hard threshold)", *grace)
	}
	var evicted []corev1.Event
	c.WaitFor(t, 30*time.Second, "the Evicted event", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.uid": string(hog.UID), "reason": "Evicted"}.AsSelector().String()})
		if err != nil {
			return false, err
		}
		evicted = l.Items
		return len(evicted) > 0, nil
	})
	for _, e := range evicted {
		if e.Source.Component != "evictd" {
			t.Errorf("the %s evicted the hog (%q), not evictd", e.Source.Component, e.Message)
		}
	}
	e := evicted[0]
	want := "The node was low on resource: memory. Threshold quantity: " + c.Threshold + ", available: "
	if !strings.HasPrefix(e.Message, want) || !strings.Contains(e.Message, "Container hog was using") ||
		e.Annotations["offending_containers"] != "hog" || e.Annotations["starved_resource"] != "memory" {
		t.Errorf("Evicted event %q %v; want the kubelet's message with the container part", e.Message, e.Annotations)
	}
	// The kubelet: no eviction of its own and no OOM kill on the node, over
	// more than one of its 10 s periods.
	time.Sleep(12 * time.Second)
	for _, reason := range []string{"Evicted", "SystemOOM", "OOMKilling"} {
		for _, nsName := range []string{ns, "default"} {
			l, err := c.Client.CoreV1().Events(nsName).List(node.Ctx(t), metav1.ListOptions{FieldSelector: fields.Set{"reason": reason}.AsSelector().String()})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range l.Items {
				if x.Source.Component != "evictd" {
					t.Errorf("%s event from %s: %s %q", reason, x.Source.Component, x.InvolvedObject.Name, x.Message)
				}
			}
		}
	}
	b, _ := os.ReadFile(logFile)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "msg=evicted") || strings.Contains(l, "eviction failed") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Logf("evictd: %s", l)
		}
	}
}

// kustomizeOverlay is a user's overlay of deploy/kubernetes/ for this node:
// the image the node tier built with make image and imported, the kubelet's
// configuration file, the API server's address, and evictd's extra args.
func kustomizeOverlay(t testing.TB, c *node.Cluster, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Abs(filepath.Join("..", "..", "deploy", "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, base) // kustomize takes relative paths only
	if err != nil {
		t.Fatal(err)
	}
	name, tag, _ := strings.Cut(node.EvictdImage, ":")
	// The base names its placeholder image; an overlay replaces that name.
	var kz struct{ Images []struct{ NewName string } }
	if b, err := os.ReadFile(filepath.Join(base, "kustomization.yaml")); err != nil {
		t.Fatal(err)
	} else if err := yaml.Unmarshal(b, &kz); err != nil || len(kz.Images) != 1 {
		t.Fatalf("%s/kustomization.yaml: images %v: %v", base, kz.Images, err)
	}
	addr, port, _ := strings.Cut(strings.TrimPrefix(c.Config.Host, "https://"), ":")
	ops := []map[string]any{
		{"op": "replace", "path": "/spec/template/spec/volumes/1/hostPath/path", "value": filepath.Join(c.Dir, "kubelet.yaml")},
		{"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": map[string]string{"name": "KUBERNETES_SERVICE_HOST", "value": addr}},
		{"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": map[string]string{"name": "KUBERNETES_SERVICE_PORT", "value": port}},
	}
	for _, a := range args {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": a})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	k, err := json.Marshal(map[string]any{
		"resources": []string{rel},
		"images":    []map[string]string{{"name": kz.Images[0].NewName, "newName": name, "newTag": tag}},
		"patches":   []map[string]any{{"target": map[string]string{"kind": "DaemonSet", "name": "evictd"}, "patch": string(patch)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil { // JSON is YAML
		t.Fatal(err)
	}
	return dir
}

// hogTarget is how much a pod must allocate so that, with what the pods
// cgroup holds now, allocatable memory falls more below level (available)
// by over: the pods cgroup's limit − level + over − its working set.
func hogTarget(t *testing.T, c *node.Cluster, level resource.Quantity, over int64) int64 {
	t.Helper()
	limit, ws := podsCgroupMemory(t, c)
	return limit - level.Value() + over - ws
}

// podsCgroupMemory is the pods cgroup's memory limit (allocatable memory
// plus the kubelet's hard threshold) and working set now.
func podsCgroupMemory(t *testing.T, c *node.Cluster) (limit, ws int64) {
	t.Helper()
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := col.ReadCgroupMemory(col.PodsCgroup(), true)
	if err != nil || !pc.HasLimit {
		t.Fatalf("pods cgroup memory: %+v, %v", pc, err)
	}
	return int64(pc.Limit), int64(pc.WorkingSet)
}

// evictedEvents are the Evicted events in ns, the kubelet's and evictd's.
func evictedEvents(t *testing.T, c *node.Cluster, ns string) []corev1.Event {
	t.Helper()
	l, err := c.Client.CoreV1().Events(ns).List(node.Ctx(t), metav1.ListOptions{FieldSelector: fields.Set{"reason": "Evicted"}.AsSelector().String()})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func evictdLog(t *testing.T, logFile, substr string) []string {
	b, _ := os.ReadFile(logFile)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestPDB: PodDisruptionBudgets refuse evictd's evictions (429, the
// disruption controller counting the pod, 0 disruptions allowed). On a soft
// threshold evictd retries and, once the first refusal is --pdb-wait (the
// default, 10 s) old, deletes the pod with the soft eviction's grace; on a
// hard threshold it deletes the pod at once with grace 1 s, as the kubelet,
// which ignores PDBs, would. evictd's thresholds are above the kubelet's
// (hard memory.available<900Mi, soft allocatableMemory.available<1300Mi),
// so the kubelet does not act.
func TestPDB(t *testing.T) {
	c := node.Get(t)
	logFile := installEvictd(t, c, "--eviction-hard=memory.available<900Mi",
		"--eviction-soft=allocatableMemory.available<1300Mi", "--eviction-soft-grace-period=allocatableMemory.available=2s")
	ns := c.Namespace(t, "kube-pdb")
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	one := intstr.FromInt32(1)
	for _, name := range []string{"soft", "hog"} {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
		if _, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(node.Ctx(t), pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The pods hold nothing until the test opens their gate.
		pods[name] = c.RunPod(t, ns, gatedHogPod(name))
	}
	for name := range pods {
		c.WaitFor(t, 60*time.Second, "the disruption controller to count "+name, func(ctx context.Context) (bool, error) {
			p, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0, err
		})
	}
	deleted := func(t *testing.T, name string) (grace *int64) {
		c.WaitFor(t, 120*time.Second, name+"'s deletion", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err == nil && p.DeletionTimestamp != nil {
				grace = p.DeletionGracePeriodSeconds
				return true, nil
			}
			return false, err
		})
		return grace
	}
	// evictd logs an eviction once the pod's processes are gone (its local
	// fallback waits for them): a moment after the deletion.
	record := func(t *testing.T, name string) (failed []string, done string) {
		c.WaitFor(t, 30*time.Second, "evictd's log of "+name+"'s deletion", func(context.Context) (bool, error) {
			failed = nil
			for _, l := range evictdLog(t, logFile, "pod="+ns+"/"+name) {
				switch {
				case strings.Contains(l, "eviction failed"):
					failed = append(failed, l)
				case strings.Contains(l, "msg=evicted"):
					done = l
				}
			}
			return done != "", nil
		})
		for _, l := range append(failed, done) {
			t.Logf("evictd: %s", l)
		}
		if logField(done, "method") != "delete (a PodDisruptionBudget refused the eviction)" {
			t.Errorf("%s: method %q, want the deletion past the PDB", name, logField(done, "method"))
		}
		return failed, done
	}

	t.Run("soft", func(t *testing.T) {
		// soft brings allocatable memory 150 MiB under the soft threshold,
		// 250 MiB over the hard one.
		openGate(t, col, pods["soft"], fmt.Sprintf("ramp %d 200Mi; hold", hogTarget(t, c, resource.MustParse("1300Mi"), 150<<20)))
		if g := deleted(t, "soft"); g != nil && *g != 1 {
			t.Errorf("deletion grace %d, want 1 (the soft eviction's 0, sent as 1)", *g)
		}
		failed, done := record(t, "soft")
		if len(failed) == 0 || !strings.Contains(failed[0], "a PodDisruptionBudget refused the eviction (429)") ||
			!strings.Contains(failed[0], "deleting the pod if still refused after 10s") {
			t.Fatalf("want the PDB's refusals before the deletion, the first saying when evictd deletes")
		}
		waited := logTime(t, done).Sub(logTime(t, failed[0]))
		t.Logf("first refusal → deletion: %.1f s, %d refusal(s)", waited.Seconds(), len(failed))
		if waited < kube.DefaultPDBWait {
			t.Errorf("deleted %.1f s after the first refusal, want ≥ --pdb-wait %s", waited.Seconds(), kube.DefaultPDBWait)
		}
		c.WaitFor(t, 60*time.Second, "soft's memory freed", func(ctx context.Context) (bool, error) {
			_, ok := podCgroups(t, col)[string(pods["soft"].UID)]
			return !ok, nil
		})
	})

	t.Run("hard", func(t *testing.T) {
		// A synchronize must first see the soft threshold no longer met:
		// until one does, the engine keeps its first-observed time from
		// the soft subtest, whose 2 s grace is long over, so the hog
		// passing through the soft threshold on its way down is evicted on
		// it at once and the PDB's refusal is waited out (a CI run: three
		// refusals before the hard deletion).
		c.WaitFor(t, 60*time.Second, "evictd to see no threshold met after soft's eviction", func(context.Context) (bool, error) {
			last := ""
			for _, l := range evictdLog(t, logFile, "threshold") {
				switch {
				case strings.Contains(l, "msg=\"no eviction threshold met any more\""):
					last = "clear"
				case strings.Contains(l, "msg=\"eviction thresholds met\""):
					last = "met"
				}
			}
			return last == "clear", nil
		})
		// hog brings allocatable memory 300 MiB under the hard threshold
		// (300 MiB above the kubelet's) at once.
		openGate(t, col, pods["hog"], fmt.Sprintf("alloc %d; hold", hogTarget(t, c, resource.MustParse("900Mi"), 300<<20)))
		if g := deleted(t, "hog"); g != nil && *g != 1 {
			t.Errorf("deletion grace %d, want 1", *g)
		}
		if failed, _ := record(t, "hog"); len(failed) != 0 {
			t.Errorf("hard threshold: want the deletion at the first refusal, got %d failure(s)", len(failed))
		}
	})
	events := evictedEvents(t, c, ns)
	if len(events) != 2 {
		t.Errorf("%d Evicted events, want one per pod", len(events))
	}
	for _, e := range events {
		if e.Source.Component != "evictd" {
			t.Errorf("Evicted event from %s for %s", e.Source.Component, e.InvolvedObject.Name)
		}
	}
}

// TestStaticPodNeverEvicted: a static pod (from the kubelet's manifest
// directory; the API shows its mirror pod) uses the most memory, and a
// regular pod pushes the node past the threshold: evictd ranks the static
// pod first, as the kubelet does, skips it as critical, and evicts the
// regular pod.
func TestStaticPodNeverEvicted(t *testing.T) {
	c := node.Get(t)
	logFile := installEvictd(t, c)
	ns := c.Namespace(t, "kube-static")
	staticHogPod(t, c, ns, "static-hog", "alloc 1000Mi; hold")()
	c.WaitFor(t, 90*time.Second, "the static pod's mirror running", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "static-hog-"+c.Node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready, err
	})
	time.Sleep(3 * time.Second) // the static pod's 1000 MiB touched
	// Gated, as TestEvictdEvictsFirst is: the regular pod's memory is held
	// at the threshold by its growth stop until its grace (1 s) ends, and a
	// kubelet synchronize in that time evicts it again (a CI run: the
	// kubelet's Evicted event for a pod evictd had evicted).
	script, gate := gatedHog(t, c, resource.MustParse(c.Threshold), 120<<20, "", ramp100)
	c.RunPod(t, ns, node.HogPod("regular", script, "64Mi", ""))
	openGateAfterKubeletSync(t, c, gate)
	c.WaitFor(t, 120*time.Second, "the regular pod's eviction", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "regular", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed)), nil
	})
	p, err := c.Client.CoreV1().Pods(ns).Get(node.Ctx(t), "static-hog-"+c.Node, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the static pod: %v; want it running", err)
	}
	var ev []string
	c.WaitFor(t, 30*time.Second, "evictd's log of the eviction", func(context.Context) (bool, error) {
		ev = evictdLog(t, logFile, "msg=evicted")
		return len(ev) > 0, nil
	})
	if len(ev) != 1 || !strings.Contains(ev[0], "pod="+ns+"/regular") {
		t.Errorf("evictd's evictions: %q; want the regular pod only", ev)
	}
	for _, e := range evictedEvents(t, c, ns) {
		if e.Source.Component != "evictd" || e.InvolvedObject.Name != "regular" {
			t.Errorf("Evicted event from %s for %s: %q", e.Source.Component, e.InvolvedObject.Name, e.Message)
		}
	}
}

// sampleCrossing samples the pods cgroup every period until allocatable
// memory is below threshold, and sends that time; it stops when the test
// ends.
func sampleCrossing(t *testing.T, col *collect.Collector, threshold resource.Quantity, period time.Duration) <-chan time.Time {
	crossed := make(chan time.Time, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
			m, err := col.ReadCgroupMemory(col.PodsCgroup(), true)
			if err == nil && int64(m.Limit)-int64(m.WorkingSet) < threshold.Value() {
				crossed <- time.Now()
				return
			}
		}
	}()
	return crossed
}

// staticHogPod returns a function that puts a static pod running the hog
// with script into the kubelet's manifest directory (its mirror pod in the
// API is name-<node>). The manifest is removed, and the mirror pod waited
// out, when the test ends, whether or not the function was called.
func staticHogPod(t *testing.T, c *node.Cluster, ns, name, script string) (start func()) {
	t.Helper()
	manifest := filepath.Join(c.Dir, "manifests", name+".yaml")
	t.Cleanup(func() {
		os.Remove(manifest)
		c.WaitFor(t, 60*time.Second, "the static pod gone", func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name+"-"+c.Node, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
	return func() {
		t.Helper()
		args, _ := json.Marshal(strings.Fields(strings.ReplaceAll(script, ";", " ; ")))
		// Written whole and renamed in: the kubelet, watching the
		// directory, would read a file still empty (and log it as bad);
		// it ignores hidden files.
		tmp := filepath.Join(filepath.Dir(manifest), "."+filepath.Base(manifest))
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: hog, image: %s, imagePullPolicy: Never, args: %s}
`, name, ns, node.WorkImage, args)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, manifest); err != nil {
			t.Fatal(err)
		}
	}
}
