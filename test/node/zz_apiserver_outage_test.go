package node_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/test/node"
)

// Thresholds of TestAPIServerOutage, on top of the kubelet's
// memory.available<300Mi hard (applied to allocatable memory). evictd's
// hard one is met 600 MiB earlier and the pods never bring allocatable
// memory below 650 MiB, so the kubelet's threshold is never met: while
// the API server is away the kubelet, which evicts locally without it,
// has nothing to do, and every kill is evictd's.
const (
	outageHard      = "900Mi" // memory.available (and its allocatable copy)
	outageSoft      = "1300Mi"
	outageSoftGrace = 40 * time.Second
	outageDeadline  = 2 * time.Second // --local-deadline
)

// This file's name sorts last: go test runs a package's tests in file
// order, and the other tests then run on the API server the fixture
// started, not on the one this test started again.

// TestAPIServerOutage: the node's kube-apiserver stops in the middle of
// pressure. evictd keeps deciding from its informer's cache and its own
// stats: on its hard threshold it kills the pod's cgroup itself after the
// grace period and the deadline, and records it; a soft threshold met
// before the outage keeps its grace timer, and its eviction, decided when
// the grace period runs out during the outage, goes through the API as
// soon as the server is back. evictd does not crash (its pod's restart
// count stays 0) and its goroutines and descriptors do not grow.
//
// The outage also makes the two races between the informer and the
// cgroups real and long: a static pod started while the API server is
// away has a cgroup but no pod in the informer (the kubelet cannot create
// its mirror pod), and a pod whose container dies meanwhile is torn down
// by the kubelet (cgroup removed) while the informer still lists it
// running. Neither is evicted, ranked or logged as an error.
func TestAPIServerOutage(t *testing.T) {
	c := node.Get(t)
	logFile := installEvictd(t, c, "--eviction-hard=memory.available<"+outageHard,
		"--eviction-soft=allocatableMemory.available<"+outageSoft,
		"--eviction-soft-grace-period=allocatableMemory.available="+outageSoftGrace.String(),
		"--local-deadline="+outageDeadline.String())
	ns := c.Namespace(t, "kube-outage")
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	quitter := c.RunPod(t, ns, node.HogPod("quitter", "alloc 8Mi; hold", "", ""))
	// hog holds nothing until the test opens its gate.
	hog := c.RunPod(t, ns, gatedHogPod("hog"))
	// soft holds allocatable memory 150 MiB under the soft threshold (250
	// MiB over the hard one), under its request: ranked after hog.
	softHold := hogTarget(t, c, resource.MustParse(outageSoft), 150<<20)
	c.RunPod(t, ns, node.HogPod("soft", fmt.Sprintf("alloc %d; hold", softHold), "1Gi", ""))
	var metLine string
	c.WaitFor(t, 30*time.Second, "evictd to see the soft threshold met", func(context.Context) (bool, error) {
		for _, l := range evictdLog(t, logFile, "eviction thresholds met") {
			if strings.Contains(l, "allocatableMemory.available<"+outageSoft) {
				metLine = l
				return true, nil
			}
		}
		return false, nil
	})
	softMet := logTime(t, metLine)
	before := evictdProcess(t)
	t.Logf("before the outage: %d goroutines, %d descriptors", before.goroutines, before.fds)

	// The static pod (registered now: its cleanup runs after the API
	// server is back).
	startStatic := staticHogPod(t, c, ns, "outage-static", "alloc 100Mi; hold")
	known := podCgroups(t, col)

	restart := c.StopAPIServer(t)
	stopped := time.Now()
	t.Logf("kube-apiserver stopped %.1f s after the soft threshold was met", stopped.Sub(softMet).Seconds())

	// A cgroup before its pod: the static pod runs, the informer has no pod
	// for it.
	startStatic()
	var staticUID string
	c.WaitFor(t, 60*time.Second, "the static pod's cgroup holding its memory", func(context.Context) (bool, error) {
		for uid, dir := range podCgroups(t, col) {
			if known[uid] == "" {
				m, err := col.ReadCgroupMemory(strings.TrimPrefix(dir, memoryRoot(col)), true)
				staticUID = uid
				return err == nil && m.WorkingSet > 100<<20, nil
			}
		}
		return false, nil
	})
	// A pod without its cgroup: quitter's container dies; the kubelet
	// tears the pod down, the API still says Running.
	for _, pid := range containerPIDs(t, col, quitter) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	c.WaitFor(t, 60*time.Second, "the kubelet to remove quitter's cgroup", func(context.Context) (bool, error) {
		_, ok := podCgroups(t, col)[string(quitter.UID)]
		return !ok, nil
	})

	// The hard threshold: hog grows.
	openGate(t, col, hog, "ramp 300Mi 100Mi; hold")
	c.WaitFor(t, 60*time.Second, "hog's cgroup killed", func(context.Context) (bool, error) {
		_, ok := podCgroups(t, col)[string(hog.UID)]
		return !ok || len(containerPIDs(t, col, hog)) == 0, nil
	})
	var killed []string
	c.WaitFor(t, 30*time.Second, "evictd's record of the local kill", func(context.Context) (bool, error) {
		// (Its "eviction started" line, logged at the decision, is not a
		// record.)
		killed = nil
		for _, l := range evictdLog(t, logFile, "msg=evicted") {
			if logField(l, "pod") == ns+"/hog" {
				killed = append(killed, l)
			}
		}
		return len(killed) > 0, nil
	})
	for _, l := range killed {
		t.Logf("evictd: %s", l)
	}
	want := fmt.Sprintf("local SIGKILL (held) after grace 1s + deadline %s (eviction API:", outageDeadline)
	if len(killed) != 1 || !strings.Contains(killed[0], want) {
		t.Errorf("evictd's records of hog: want one eviction with method %q", want)
	}

	if d := logTime(t, killed[0]).Sub(softMet); d >= outageSoftGrace {
		t.Fatalf("hog was killed %.1f s after the soft threshold was met, after its grace period: the test's timeline did not hold", d.Seconds())
	}

	// Still away: goroutines and descriptors stay put.
	time.Sleep(2 * time.Second)
	during0 := evictdProcess(t)
	time.Sleep(8 * time.Second)
	during1 := evictdProcess(t)
	t.Logf("during the outage: goroutines %d → %d, descriptors %d → %d", during0.goroutines, during1.goroutines, during0.fds, during1.fds)
	if during1.goroutines > during0.goroutines+5 || during1.fds > during0.fds+3 {
		t.Errorf("evictd grows while the API server is away: goroutines %d → %d, descriptors %d → %d", during0.goroutines, during1.goroutines, during0.fds, during1.fds)
	}

	// The soft threshold's grace period runs out during the outage: evictd
	// decides soft's eviction then, and cannot carry it out (a soft
	// eviction never kills locally).
	var attempt string
	c.WaitFor(t, outageSoftGrace+20*time.Second, "evictd's soft eviction attempt", func(context.Context) (bool, error) {
		for _, l := range evictdLog(t, logFile, "pod="+ns+"/soft") {
			if strings.Contains(l, "eviction failed") {
				attempt = l
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("evictd: %s", attempt)
	// (The threshold's line is logged a moment after its first
	// observation; 100 ms covers that.)
	if d := logTime(t, attempt).Sub(softMet); d < outageSoftGrace-100*time.Millisecond || d > outageSoftGrace+3*time.Second {
		t.Errorf("soft eviction first decided %.1f s after the threshold was met, want its %s grace period (+ < 3 s)", d.Seconds(), outageSoftGrace)
	}
	if logField(attempt, "signal") != "allocatableMemory.available" {
		t.Errorf("soft eviction attempt %q: want the soft threshold's signal", attempt)
	}

	restart()
	back := time.Now()
	t.Logf("kube-apiserver was away %.1f s", back.Sub(stopped).Seconds())
	c.WaitFor(t, 60*time.Second, "soft's eviction through the API", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "soft", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), nil
	})
	t.Logf("API server ready → soft's eviction seen: %.1f s", time.Since(back).Seconds())
	var done []string
	c.WaitFor(t, 30*time.Second, "evictd's record of soft's eviction", func(context.Context) (bool, error) {
		done = nil
		for _, l := range evictdLog(t, logFile, "msg=evicted") {
			if logField(l, "pod") == ns+"/soft" {
				done = append(done, l)
			}
		}
		return len(done) > 0, nil
	})
	t.Logf("evictd: %s", done[0])
	if len(done) != 1 || logField(done[0], "method") != "Eviction API" {
		t.Errorf("soft's eviction: %q, want one through the Eviction API", done)
	}

	// The races: the static pod still runs, and evictd named neither it
	// nor quitter (but for the vanished-pod line). (The kubelet creates
	// the static pod's mirror pod only at its next periodic sync of the
	// pod, a minute or more after the API server is back: not waited for.)
	if pids := podCgroupPIDs(t, col, staticUID); len(pids) == 0 {
		t.Errorf("the static pod's cgroup %s holds no process", staticUID)
	}
	for _, l := range evictdLog(t, logFile, " level=") { // the log lines, not the decision log's records
		if strings.Contains(l, "outage-static") || strings.Contains(l, staticUID) ||
			(strings.Contains(l, ns+"/quitter") && !strings.Contains(l, "has no cgroup on this node any more")) {
			t.Errorf("evictd named a pod of the races: %s", l)
		}
	}
	for _, e := range evictedEvents(t, c, ns) {
		if e.Source.Component != "evictd" || e.InvolvedObject.Name != "soft" {
			t.Errorf("Evicted event from %s for %s: %q", e.Source.Component, e.InvolvedObject.Name, e.Message)
		}
	}

	// No crash, no growth.
	self, err := c.Client.CoreV1().Pods("kube-system").List(node.Ctx(t), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=evictd"})
	if err != nil || len(self.Items) != 1 || len(self.Items[0].Status.ContainerStatuses) != 1 {
		t.Fatalf("evictd's pod: %v %+v", err, self)
	}
	if n := self.Items[0].Status.ContainerStatuses[0].RestartCount; n != 0 {
		t.Errorf("evictd restarted %d time(s)", n)
	}
	after := evictdProcess(t)
	t.Logf("after the outage: %d goroutines (%d before), %d descriptors (%d before)", after.goroutines, before.goroutines, after.fds, before.fds)
	if after.goroutines > before.goroutines+5 || after.fds > before.fds+3 {
		t.Errorf("evictd grew across the outage: goroutines %d → %d, descriptors %d → %d", before.goroutines, after.goroutines, before.fds, after.fds)
	}
}

// gatedHogPod is a pod of the work image that waits for the test to open
// its gate (openGate) and then runs the hog with the script written there:
// the pod runs and holds nothing until then.
func gatedHogPod(name string) *corev1.Pod {
	p := node.HogPod(name, "", "", "")
	ct := &p.Spec.Containers[0]
	ct.Command = []string{"/bin/sh", "-c", `until cat /evictd-gate >/dev/null 2>&1; do sleep 0.1; done; exec /hog $(cat /evictd-gate)`}
	ct.Args = nil
	return p
}

// openGate starts a gatedHogPod's hog with script, through the container's
// root as its processes see it.
func openGate(t *testing.T, col *collect.Collector, p *corev1.Pod, script string) {
	t.Helper()
	pids := containerPIDs(t, col, p)
	if len(pids) == 0 {
		t.Fatalf("pod %s: no process in its container", p.Name)
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/root/evictd-gate", pids[0]), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
}

func memoryRoot(col *collect.Collector) string {
	root, _ := col.MemoryRoot()
	return root
}

// podCgroups are the pod cgroups under kubepods now, by pod UID (absolute
// paths in the memory hierarchy).
func podCgroups(t *testing.T, col *collect.Collector) map[string]string {
	t.Helper()
	ws, err := col.Workloads()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, w := range ws {
		out[w.PodUID] = memoryRoot(col) + w.Cgroup
	}
	return out
}

// podCgroupPIDs are the processes in the pod's cgroup tree.
func podCgroupPIDs(t *testing.T, col *collect.Collector, uid string) []int {
	t.Helper()
	dir, ok := podCgroups(t, col)[uid]
	if !ok {
		return nil
	}
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids
}

// containerPIDs are the processes of the pod's (first) container, the
// sandbox left out.
func containerPIDs(t *testing.T, col *collect.Collector, p *corev1.Pod) []int {
	t.Helper()
	ws, err := col.Workloads()
	if err != nil {
		t.Fatal(err)
	}
	// The container's cgroup as discovered: <id> (cgroupfs driver) or
	// cri-containerd-<id>.scope (systemd).
	dir := ""
	for _, w := range ws {
		for _, ct := range w.Containers {
			if w.PodUID == string(p.UID) && ct.ID == node.ContainerID(p) {
				dir = memoryRoot(col) + ct.Cgroup
			}
		}
	}
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// processStats are evictd's go_goroutines and process_open_fds, from its
// metrics on the node's loopback (the DaemonSet's pod uses the host's
// network).
type processStats struct{ goroutines, fds int }

func evictdProcess(t *testing.T) processStats {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get("http://127.0.0.1:9847/metrics")
	if err != nil {
		t.Fatalf("evictd's metrics: %v", err)
	}
	defer resp.Body.Close()
	var s processStats
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "go_goroutines":
			s.goroutines = int(v)
		case "process_open_fds":
			s.fds = int(v)
		}
	}
	if s.goroutines == 0 || s.fds == 0 {
		t.Fatalf("evictd's metrics lack go_goroutines or process_open_fds: %+v", s)
	}
	return s
}

// logTime is the time= field of a line of evictd's log.
func logTime(t *testing.T, line string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, logField(line, "time"))
	if err != nil {
		t.Fatalf("no time in %q: %v", line, err)
	}
	return at
}
