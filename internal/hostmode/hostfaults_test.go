package hostmode

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func hostOptions(t *testing.T, rootRel string, logs *syncbuf.Buffer) Options {
	t.Helper()
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Options: agent.Options{Policy: cfg, Log: logTo(logs), Wakeups: agent.WakeupOptions{MemcgNotification: agent.Auto, PSI: agent.Off, MemoryEvents: agent.Off, FastPoll: agent.Off}}, WorkloadRoot: rootRel}
}

// stopHost ends a Host that never ran: Run with a done context closes its
// notifiers and drops its lock.
func stopHost(h *Host) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.Run(ctx)
}

// A second agent on the same workloads, or on cgroups inside or around
// them, is refused with the PID of the first; one on another root is not.
// A dry run (which changes nothing) may run beside a real agent.
func TestSecondInstanceRefused(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	inner, err := sb.Child("inner")
	if err != nil {
		t.Fatal(err)
	}
	other, err := sb.Child("other")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	first, err := New(hostOptions(t, inner.Rel, &logs))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{inner.Rel, sb.Parent.Rel} {
		_, err := New(hostOptions(t, rel, &logs))
		if !errors.Is(err, ErrOtherInstance) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
			t.Fatalf("second agent on %s: err = %v, want %v naming pid %d", rel, err, ErrOtherInstance, os.Getpid())
		}
	}
	dry := hostOptions(t, inner.Rel, &logs)
	dry.DryRun = true
	if h, err := New(dry); err != nil {
		t.Fatalf("a dry run beside a real agent: %v", err)
	} else {
		h.Wakeups.Close()
		h.Pods.Close()
	}
	sibling, err := New(hostOptions(t, other.Rel, &logs))
	if err != nil {
		t.Fatalf("an agent on another root: %v", err)
	}
	stopHost(sibling)
	stopHost(first)
	again, err := New(hostOptions(t, inner.Rel, &logs))
	if err != nil {
		t.Fatalf("after the first agent stopped: %v", err)
	}
	stopHost(again)
}

// The workload root removed while the agent runs: every synchronize fails,
// /healthz turns 503 after agent.DefaultUnhealthyAfter of them, the failure is
// counted and logged once. Created again, the root is watched again: a
// workload started in it afterwards is seen, and health recovers.
func TestRootRemovedAndRecreated(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	root, err := sb.Child("root")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	o := hostOptions(t, root.Rel, &logs)
	o.Metrics = agent.NewMetrics()
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stopHost(h)
	sync := func() agent.Record {
		return h.Sync(context.Background(), agent.Trigger{Reason: "timer", At: time.Now()})
	}
	sync()
	if err := h.Healthy(); err != nil {
		t.Fatalf("before: %v", err)
	}
	if err := cgroup.Rmdir(root.Memory); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < agent.DefaultUnhealthyAfter; i++ {
		sync()
	}
	if err := h.Healthy(); err == nil || !strings.Contains(err.Error(), "blind") {
		t.Fatalf("health with the root gone: %v", err)
	}
	if n := counterValue(o.Metrics.SyncErrors.WithLabelValues("pods")); n != agent.DefaultUnhealthyAfter {
		t.Errorf("pods errors counted %v, want %d", n, agent.DefaultUnhealthyAfter)
	}
	if n := strings.Count(logs.String(), "listing workloads failed"); n != 1 {
		t.Errorf("failure logged %d times, want 1:\n%s", n, logs.String())
	}
	if err := cgroup.Mkdir(root.Memory); err != nil {
		t.Fatal(err)
	}
	sync()
	if err := h.Healthy(); err != nil {
		t.Fatalf("after the root came back: %v", err)
	}
	// Two workloads started one after the other: the second is seen only
	// if the new root is watched (the first fills the cache).
	for i, name := range []string{"w1", "w2"} {
		c := sandbox.Cgroup{Name: name, Rel: root.Rel + "/" + name, Memory: root.Memory + "/" + name}
		if err := cgroup.Mkdir(c.Memory); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cgroup.RemoveAll([]string{c.Memory}, time.Second) })
		hg := sandboxtest.StartHog(t, "alloc 8Mi; hold", c)
		waitProcs(t, c.Memory, hg.Pid)
		rec := sync()
		ws, err := h.Pods.Workloads()
		if err != nil || len(ws) != i+1 || ws[i].Pod.Name != name {
			t.Fatalf("workloads in the recreated root: %v (%v), want %s too; decision error %q", names(ws), err, name, rec.Decision.Error)
		}
	}
}

func names(ws []workload.Workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Pod.Name)
	}
	return out
}

// waitProcs waits until pid is in the cgroup at dir.
func waitProcs(t *testing.T, dir string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids, _ := sandbox.Procs(dir)
		for _, p := range pids {
			if p == pid {
				return
			}
		}
	}
	t.Fatalf("pid %d never joined %s", pid, dir)
}

// cgroup v2 (VM tier): the notifiers on the workload root's own files
// (memory.events here) are set up again when the root is created anew, so
// memory.high being hit in the new root still wakes the loop. (On v1 the
// root's notifier is the memcg eventfd: TestMemcgThresholdSurvivesRecreatedCgroup.)
func TestRootRecreatedWakeupsV2(t *testing.T) {
	sandboxtest.NeedMode(t, sandbox.V2)
	sb := sandboxtest.New(t, 0)
	root, err := sb.Child("root")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	o := hostOptions(t, root.Rel, &logs)
	o.Wakeups.MemoryEvents = agent.On
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stopHost(h)
	want := "memory.events " + root.Memory + "/memory.events"
	if !slices.Contains(h.Wakeups.Active(), want) {
		t.Fatalf("notifiers %v lack %q", h.Wakeups.Active(), want)
	}
	if err := cgroup.Rmdir(root.Memory); err != nil {
		t.Fatal(err)
	}
	if err := cgroup.Mkdir(root.Memory); err != nil {
		t.Fatal(err)
	}
	h.Sync(context.Background(), agent.Trigger{Reason: "timer", At: time.Now()})
	for len(h.Wakeups.C()) > 0 {
		<-h.Wakeups.C()
	}
	if err := cgroupv2.WriteMemoryHigh(root.Memory, 16<<20); err != nil {
		t.Fatal(err)
	}
	sandboxtest.StartHog(t, "alloc 32Mi; hold", sandbox.Cgroup{Name: "root", Rel: root.Rel, Memory: root.Memory})
	timeout := time.After(20 * time.Second)
	for {
		select {
		case w := <-h.Wakeups.C():
			if w.Source == want {
				return
			}
		case <-timeout:
			t.Fatalf("no wake-up from %s in 20 s; notifiers %v; logs:\n%s", want, h.Wakeups.Active(), logs.String())
		}
	}
}
