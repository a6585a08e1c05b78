package hostmode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func setLimit(t *testing.T, s *sandbox.Sandbox, c sandbox.Cgroup, bytes int64) {
	t.Helper()
	if err := s.SetLimit(c, bytes); err != nil {
		t.Fatal(err)
	}
}

func usage(s *sandbox.Sandbox, dir string) uint64 {
	if s.Mode == sandbox.V2 {
		u, _ := cgroupv2.ReadMemoryCurrent(dir)
		return u
	}
	u, _ := cgroupv1.ReadMemoryUsageInBytes(dir)
	return u
}

func oomKillsOf(m *agent.Metrics, ns, pod, qos string) float64 {
	c, err := m.KernelOOMKills.GetMetricWith(prometheus.Labels{"namespace": ns, "pod": pod, "qos_class": qos})
	if err != nil {
		return -1
	}
	return counterValue(c)
}

// A workload the kernel OOM-kills (here at its own limit) is reported by
// the next synchronize: an action in the decision log naming it, a log
// line and evictd_kernel_oom_kills_total — though it started, was killed
// and emptied its cgroup between two synchronizes.
func TestHostReportsKernelOOMKill(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	c, _ := sb.Child("small")
	setLimit(t, sb, c, 32<<20)
	cfg := memoryOnly(t)
	var logs syncbuf.Buffer
	m := agent.NewMetrics()
	h, err := New(Options{Options: agent.Options{Policy: cfg, Log: logTo(&logs), Metrics: m, Wakeups: agent.NoWakeups}, WorkloadRoot: sb.Parent.Rel})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Wakeups.Close()
	ctx := context.Background()
	h.Sync(ctx, agent.Trigger{Reason: "test"}) // counts before the kill are history
	hg := sandboxtest.StartHog(t, "alloc 64Mi; hold", c)
	select {
	case <-hg.Done:
	case <-time.After(60 * time.Second):
		t.Fatal("the hog was not OOM-killed")
	}
	rec := h.Sync(ctx, agent.Trigger{Reason: "test"})
	var got *agent.Action
	for i, a := range rec.Actions {
		if a.Kind == "kernel-oom-kill" && a.Pod.Name == "small" {
			got = &rec.Actions[i]
		}
	}
	if got == nil || got.OOMKills == 0 {
		t.Fatalf("no kernel-oom-kill action for the workload: %+v; logs:\n%s", rec.Actions, logs.String())
	}
	if n := oomKillsOf(m, got.Pod.Namespace, "small", "BestEffort"); n < 1 {
		t.Fatalf("evictd_kernel_oom_kills_total for the workload = %v", n)
	}
	if !strings.Contains(logs.String(), "the kernel OOM killer killed processes of a workload") {
		t.Fatalf("no log line for the kill:\n%s", logs.String())
	}
}

// An eviction whose victim the kernel OOM killer ends during its grace
// period is recorded as the kernel's, never as evicted by evictd: here the
// victim ignores SIGTERM and runs into its own limit within the grace
// period (the growth stop off, as the kubelet lets it grow). Before, the
// log said "evicted … method=SIGTERM gone=true".
func TestHostEvictionOOMKilledByKernel(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 256<<20)
	c, _ := sb.Child("victim")
	setLimit(t, sb, c, 32<<20)
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "250Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	m := agent.NewMetrics()
	h, err := New(Options{Options: agent.Options{Policy: cfg, Log: logTo(&logs), Metrics: m, NoGrowthStop: true, Wakeups: agent.NoWakeups}, WorkloadRoot: sb.Parent.Rel})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Wakeups.Close()
	ctx := context.Background()
	h.Sync(ctx, agent.Trigger{Reason: "test"})
	sandboxtest.StartHog(t, "ignore-term; alloc 8Mi; sleep 300ms; alloc 64Mi; hold", c)
	for deadline := time.Now().Add(60 * time.Second); usage(sb, c.Memory) < 8<<20; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hog never used 8 MiB")
		}
	}
	rec := h.Sync(ctx, agent.Trigger{Reason: "test"})
	var ev *agent.Action
	for i, a := range rec.Actions {
		if a.Kind == "evict" {
			ev = &rec.Actions[i]
		}
	}
	if ev == nil {
		t.Fatalf("no eviction: %+v", rec.Decision)
	}
	if ev.OOMKills == 0 {
		t.Fatalf("the kernel OOM-killed the victim during its grace period, but the eviction says %+v %+v; logs:\n%s", ev, ev.Result, logs.String())
	}
	if !strings.Contains(logs.String(), "the kernel OOM killer killed processes of the workload while evictd was evicting it") || strings.Contains(logs.String(), `msg=evicted`) {
		t.Fatalf("the log does not say the kernel ended it:\n%s", logs.String())
	}
	if n := counterValue(m.Evictions.WithLabelValues(ev.Signal)); n != 0 {
		t.Fatalf("evictd_evictions_total counts the kernel's kill: %v", n)
	}
	if n := oomKillsOf(m, ev.Pod.Namespace, "victim", "BestEffort"); n < 1 {
		t.Fatalf("evictd_kernel_oom_kills_total for the victim = %v", n)
	}
}
