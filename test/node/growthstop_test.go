package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/test/node"
)

// The workload on the real node: a pod whose container ignores
// SIGTERM and touches memory from two threads at full speed, wanting 1 GiB
// more than the node has before the kubelet's hard threshold. evictd
// (installed from deploy/kubernetes/) stops its growth on the node before
// it posts the eviction; the kubelet's kill ends it after the 1 s grace;
// the kernel OOM killer never fires; and the pod ends as any evicted pod
// ends: its object goes, containerd holds no container, task or shim for
// it, its cgroups are removed.
//
// Two things the kubelet and containerd do meanwhile, as they would
// without the stop: the hog ignores SIGTERM, so the kubelet's kill takes
// its 2 s runtime minimum, during which the held pod still holds its
// memory and the kubelet's own 10 s synchronize may evict it as well (after
// evictd); and on cgroup v1 containerd reports its container as OOMKilled,
// since the hold's limit with the OOM killer off is an OOM condition of the
// pod cgroup, which the kernel notifies to the container's cgroup, although
// no OOM kill happens (docs/kubernetes.md). The kernel's own record of OOM
// kills is the kernel log.
func TestGrowthStopOnNode(t *testing.T) {
	c := node.Get(t)
	k, err := openKmsg()
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	logFile := installEvictd(t, c)
	ns := c.Namespace(t, "kube-growthstop")
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if n, _ := k.oomKills(col.PodsCgroup()); n > 0 {
		t.Logf("%d kernel OOM kill(s) in the pods cgroup before the test", n)
	}
	if err != nil {
		t.Fatal(err)
	}
	threshold := resource.MustParse(c.Threshold)
	script := fmt.Sprintf("ignore-term; threads 2; alloc %d; hold", hogTarget(t, c, threshold, 1<<30))
	pod := node.HogPod("hog", script, "64Mi", "")
	if _, err := c.Client.CoreV1().Pods(ns).Create(node.Ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// While the pod lives: its cgroup (the stop's evidence is in it), its
	// containers in containerd, the last state of its container.
	var uid string
	var dirs, ids []string
	var failcnt uint64
	memRoot, version := col.MemoryRoot()
	c.WaitFor(t, 180*time.Second, "the hog's end", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		uid = string(p.UID)
		if ws, err := col.Workloads(); err == nil {
			for _, w := range ws {
				if w.PodUID == uid && !slices.Contains(dirs, memRoot+w.Cgroup) {
					dirs = append(dirs, memRoot+w.Cgroup)
				}
			}
		}
		for _, d := range dirs {
			if n, err := limitHits(d, version); err == nil && n > failcnt {
				failcnt = n
			}
		}
		for _, id := range podContainers(t, c, uid) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return false, nil
	})
	if uid == "" || len(dirs) == 0 || len(ids) == 0 {
		t.Fatalf("never saw the hog running: uid %q, cgroups %v, containers %v", uid, dirs, ids)
	}
	// Evicted by evictd first, with its growth stopped before that.
	l, err := c.Client.CoreV1().Events(ns).List(node.Ctx(t), metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.uid": uid, "reason": "Evicted"}.AsSelector().String()})
	if err != nil || len(l.Items) == 0 {
		t.Fatalf("no Evicted event for the hog: %v", err)
	}
	slices.SortFunc(l.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	if first := l.Items[0]; first.Source.Component != "evictd" {
		t.Errorf("the %s evicted the hog first, not evictd: %q", first.Source.Component, first.Message)
	}
	for _, e := range l.Items[1:] {
		t.Logf("then %s evicted it too, %s later: %q", e.Source.Component, eventTime(e).Sub(eventTime(l.Items[0])), e.Message)
	}
	b, _ := os.ReadFile(logFile)
	var evictedLine string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "msg=evicted") && strings.Contains(line, "pod="+ns+"/hog") {
			evictedLine = line
		}
		if strings.Contains(line, "kernel OOM killer") {
			t.Errorf("evictd saw a kernel OOM kill: %s", line)
		}
	}
	// The stop as this cgroup version makes it: v1 has no memory.high.
	wantStop := "growth_stopped=memory.limit_in_bytes+oom_kill_disable"
	if version == 2 {
		wantStop = "growth_stopped=memory.high"
	}
	if !strings.Contains(evictedLine, wantStop) {
		t.Fatalf("evictd's eviction line does not say it stopped the hog's growth: %q", evictedLine)
	}
	t.Logf("evictd: %s", evictedLine)
	// The stop held it back (the kernel's count of charges refused at the
	// limit), and the kernel OOM killer did not end it.
	if failcnt == 0 {
		t.Errorf("the hog's pod cgroup never hit a limit: the stop was not what kept the OOM killer away")
	}
	if n, err := k.oomKills(col.PodsCgroup()); err != nil || n > 0 {
		t.Errorf("the kernel log has %d OOM kill(s) in the pods cgroup (%v)", n, err)
	}
	for _, reason := range []string{"SystemOOM", "OOMKilling"} {
		l, err := c.Client.CoreV1().Events("default").List(node.Ctx(t), metav1.ListOptions{FieldSelector: fields.Set{"reason": reason}.AsSelector().String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l.Items {
			t.Errorf("%s event from %s: %s %q", reason, x.Source.Component, x.InvolvedObject.Name, x.Message)
		}
	}
	// Nothing left: cgroups, containerd's containers and tasks, shims.
	for deadline := time.Now().Add(time.Duration(c.TimeoutScale) * 60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := leftOf(t, c, uid, dirs, ids)
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the hog's pod went: %s", left)
		}
	}
}

// limitHits is the kernel's count of the times the pod cgroup's memory hit
// a limit: memory.failcnt on v1 (charges refused at memory.limit_in_bytes),
// the high and max events of memory.events on v2 (the stop is memory.high).
func limitHits(dir string, version int) (uint64, error) {
	if version == 2 {
		ev, err := cgroupv2.ReadMemoryEvents(dir)
		return ev.High + ev.Max, err
	}
	return cgroupv1.ReadMemoryFailcnt(dir)
}

// leftOf says what is left of an ended pod on the node: its cgroups in any
// hierarchy, its containers and tasks in containerd, its shims.
func leftOf(t *testing.T, c *node.Cluster, uid string, dirs, ids []string) string {
	for _, d := range dirs {
		for _, h := range []string{"memory", "freezer", "pids"} {
			if p := strings.Replace(d, "/memory/", "/"+h+"/", 1); exists(p) {
				return "cgroup " + p + " still there"
			}
		}
	}
	if left := podContainers(t, c, uid); len(left) > 0 {
		return fmt.Sprintf("containerd still lists containers %v", left)
	}
	if tasks := ctr(t, c, "tasks", "ls", "-q"); containsAny(tasks, ids) {
		return "containerd still has tasks: " + tasks
	}
	if shims := shimsOf(ids); len(shims) > 0 {
		return fmt.Sprintf("shims still running: %v", shims)
	}
	return ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// eventTime is when an Event was first recorded, in either API's field.
func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// ctr runs the node's containerd client in the k8s.io namespace.
func ctr(t *testing.T, c *node.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(c.TimeoutScale)*30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"-a", c.Containerd, "--timeout", "20s", "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// podContainers lists the IDs of containerd's containers (the sandbox's
// too) that belong to the pod uid.
func podContainers(t *testing.T, c *node.Cluster, uid string) []string {
	return strings.Fields(ctr(t, c, "containers", "ls", "-q", `labels."io.kubernetes.pod.uid"==`+uid))
}

// shimsOf lists the shim processes serving any of ids (a shim's command
// line names its sandbox with -id).
func shimsOf(ids []string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), "containerd-shim") {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "-id" && i+1 < len(args) && slices.Contains(ids, args[i+1]) {
				out = append(out, e.Name()+" "+strings.Join(args, " "))
			}
		}
	}
	return out
}

func containsAny(text string, ids []string) bool {
	for _, id := range ids {
		if strings.Contains(text, id) {
			return true
		}
	}
	return false
}
