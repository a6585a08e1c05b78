package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/test/node"
)

// TestMemoryQoSNeverFights: the kubelet with MemoryQoS (beta, on by
// default in v1.37) and memoryReservationPolicy: TieredReservation writes
// memory.min, memory.low and memory.high on the pods' cgroups; evictd,
// installed beside it, evicts a pod under pressure. The files the kubelet
// wrote on the pods that stay are what evictd's own arithmetic
// (internal/memqos, `evictd qos`) says the kubelet writes, before evictd
// runs, and they are still exactly that after evictd's install and
// eviction: evictd in Kubernetes mode writes none of them (its growth stop
// writes the victim's pod cgroup memory.high, which the kubelet does not
// write), and nothing it does makes the kubelet rewrite them. MemoryQoS acts on cgroup v2 only, so
// on the v1 node the test skips.
func TestMemoryQoSNeverFights(t *testing.T) {
	c := node.Get(t)
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	if _, v := col.MemoryRoot(); v != 2 {
		t.Skipf("the memory controller is on cgroup v%d here: the kubelet's MemoryQoS writes nothing on v1 (the cgroup v2 node runs this test)", v)
	}
	// The kubelet's configuration with TieredReservation and a throttling
	// factor (without one the v1.37 kubelet writes no memory.high), the
	// kubelet restarted on it, and restored at the end.
	cfgPath := filepath.Join(c.Dir, "kubelet.yaml")
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(cfgPath, orig, 0o644); err != nil {
			t.Error(err)
		}
		c.RestartKubelet(t)
	})
	qosCfg := string(orig) + "featureGates:\n  MemoryQoS: true\nmemoryReservationPolicy: TieredReservation\nmemoryThrottlingFactor: 0.9\n"
	if err := os.WriteFile(cfgPath, []byte(qosCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c.RestartKubelet(t)
	kc, err := load.ParseKubeletConfig([]byte(qosCfg), cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	s, err := memqos.FromKubelet(kc)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Client.CoreV1().Nodes().Get(node.Ctx(t), c.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	capacity := n.Status.Capacity[corev1.ResourceMemory]
	s.CgroupV2, s.MemoryCapacity = true, capacity.Value()
	if s.NodeAllocatableMemory, err = memqos.NodeAllocatableMemory(capacity.Value(), kc); err != nil {
		t.Fatal(err)
	}

	ns := c.Namespace(t, "kube-memqos")
	pods := map[string]*corev1.Pod{}
	for _, p := range []struct{ name, req, lim string }{
		{"guaranteed", "64Mi", "64Mi"},
		{"burstable", "48Mi", "256Mi"},
		{"burstable-nolimit", "32Mi", ""},
		{"besteffort", "", ""},
	} {
		pods[p.name] = c.RunPod(t, ns, node.HogPod(p.name, "alloc 16Mi; hold", p.req, p.lim))
	}
	want := map[string]string{} // file → value the kubelet writes, by evictd's arithmetic
	for name, p := range pods {
		v := memqos.ForPod(p, s)
		w := workloadOf(t, col, p)
		for _, f := range []struct {
			file string
			val  memqos.Value
		}{{"memory.min", v.Cgroup.MemoryMin}, {"memory.low", v.Cgroup.MemoryLow}, {"memory.high", v.Cgroup.MemoryHigh}} {
			if f.val.Written {
				want[w.Cgroup+"/"+f.file] = f.val.String()
			}
		}
		for _, ct := range w.Containers {
			if ct.ID != node.ContainerID(p) {
				continue // the sandbox
			}
			for _, f := range []struct {
				file string
				val  memqos.Value
			}{{"memory.min", v.Containers[0].MemoryMin}, {"memory.low", v.Containers[0].MemoryLow}, {"memory.high", v.Containers[0].MemoryHigh}} {
				if f.val.Written {
					want[ct.Cgroup+"/"+f.file] = f.val.String()
				}
			}
		}
		t.Logf("%s: evictd's arithmetic: pod %+v, container %+v", name, v.Cgroup, v.Containers)
	}
	root, _ := col.MemoryRoot()
	read := func() map[string]string {
		got := map[string]string{}
		for f := range want {
			b, err := os.ReadFile(root + f)
			if err != nil {
				got[f] = err.Error()
				continue
			}
			got[f] = strings.TrimSpace(string(b))
		}
		return got
	}
	// The kubelet writes container values when it creates a container and
	// pod values at its pod sync: wait until the files hold them.
	var before map[string]string
	c.WaitFor(t, 90*time.Second, "the kubelet's MemoryQoS values in the pods' cgroups", func(context.Context) (bool, error) {
		before = read()
		for f, v := range want {
			if before[f] != v {
				return false, nil
			}
		}
		return true, nil
	})
	written := 0
	for f, v := range want {
		if v != "0" && v != "max" {
			written++
		}
		t.Logf("%s = %s (the kubelet's, as evictd computes it)", f, v)
	}
	if written == 0 {
		t.Fatal("the kubelet wrote no memory.min, memory.low or memory.high other than 0 and max: MemoryQoS is not in force")
	}

	// evictd beside it, and a hog past the threshold that evictd evicts.
	logFile := installEvictd(t, c)
	threshold := resource.MustParse(c.Threshold)
	c.RunPod(t, ns, node.HogPod("hog", fmt.Sprintf("ramp %d 100Mi; hold", hogTarget(t, c, threshold, 120<<20)), "64Mi", ""))
	c.WaitFor(t, 3*time.Minute, "the hog's eviction", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed)), nil
	})
	for _, e := range evictedEvents(t, c, ns) {
		if e.Source.Component != "evictd" || e.InvolvedObject.Name != "hog" {
			t.Errorf("Evicted event from %s for %s: %q", e.Source.Component, e.InvolvedObject.Name, e.Message)
		}
	}
	if t.Failed() {
		for _, l := range evictdLog(t, logFile, "level=") {
			t.Logf("evictd: %s", l)
		}
	}
	time.Sleep(15 * time.Second) // a kubelet housekeeping period after the eviction
	after := read()
	for f, v := range want {
		if after[f] != v {
			t.Errorf("%s: %s after evictd's eviction, the kubelet wrote %s", f, after[f], v)
		}
	}
	// evictd's one write of these files is issue 18's growth stop on the
	// victim: memory.high on its pod cgroup, a file the kubelet's MemoryQoS
	// never writes for that pod (it writes container cgroups' memory.high),
	// so the two never write the same file.
	hogPod := node.HogPod("hog", "", "64Mi", "")
	if v := memqos.ForPod(hogPod, s).Cgroup.MemoryHigh; v.Written {
		t.Errorf("the kubelet writes the hog's pod cgroup memory.high (%s), which evictd's growth stop writes too", v)
	}
	for _, l := range evictdLog(t, logFile, "msg=evicted") {
		if m := logField(l, "growth_stopped"); m != "" && (m != "memory.high" || !strings.Contains(l, "pod="+ns+"/hog")) {
			t.Errorf("evictd's growth stop %s outside the victim's pod cgroup: %s", m, l)
		}
	}
	for _, l := range append(evictdLog(t, logFile, "memory.min"), evictdLog(t, logFile, "memory.low")...) {
		t.Errorf("evictd logged about memory protection: %s", l)
	}
}

// workloadOf is the pod's discovered cgroup and container cgroups.
func workloadOf(t *testing.T, col *collect.Collector, p *corev1.Pod) collect.Workload {
	t.Helper()
	ws, err := col.Workloads()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.PodUID == string(p.UID) {
			return w
		}
	}
	t.Fatalf("pod %s (%s): no cgroup discovered", p.Name, p.UID)
	return collect.Workload{}
}
