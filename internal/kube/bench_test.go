package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/policy"
)

// BenchmarkKubeSynchronize is what one synchronize costs in Kubernetes mode
// on a node with 110 pods (the kubelet's default maxPods), each a real v1
// pod cgroup with an app container holding a sleeping process and a sandbox
// container: the Summary evictd builds (discovery, memory and process
// counts, naming from the pods) and the engine's Step on it. The pods come
// from a list, as from the informer's cache; no disk source. Needs root and
// the cgroup v1 memory controller.
//
// EVICTD_BENCH_GAP=10s (a duration) sleeps that long, untimed, before each
// synchronize, as an idle agent does between its 10 s ticks: CPU caches and
// the kernel's dentry and inode caches then start cold, which a tight loop
// hides (run it with -benchtime 20x).
func BenchmarkKubeSynchronize(b *testing.B) {
	cgrouptest.RequireV1Memory(b)
	const n = 110
	pods := cgrouptest.UniqueName(b) + "/kubepods"
	cgrouptest.Mkdirs(b, cgrouptest.V1Memory, pods)
	var list []*v1.Pod
	for i := range n {
		uid := fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		app, sandbox := fmt.Sprintf("%064d", 2*i), fmt.Sprintf("%064d", 2*i+1)
		for _, c := range []string{app, sandbox} {
			dir := cgrouptest.Mkdirs(b, cgrouptest.V1Memory, fmt.Sprintf("%s/besteffort/pod%s/%s", pods, uid, c))
			cmd := exec.Command("sleep", "100000")
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if err := cgroup.WriteCgroupProcs(dir, cmd.Process.Pid); err != nil {
				b.Fatal(err)
			}
		}
		p := runningPod("ns", fmt.Sprintf("pod-%03d", i), uid, map[string]string{"app": app})
		p.UID = types.UID(uid)
		list = append(list, p)
	}
	s := &Stats{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := s.NewCollector(collect.Config{PodsCgroup: "/" + pods}); err != nil {
		b.Fatal(err)
	}
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	gap := benchGap(b)
	b.ReportAllocs()
	for b.Loop() {
		if gap > 0 {
			b.StopTimer()
			time.Sleep(gap)
			b.StartTimer()
		}
		sum, err := s.SummaryOf(ctx, list)
		if err != nil {
			b.Fatal(err)
		}
		if len(sum.Pods) != n {
			b.Fatalf("%d pods in the Summary, want %d", len(sum.Pods), n)
		}
		now = now.Add(time.Second)
		eng.Step(now, policy.Input{Summary: sum, Pods: list})
	}
}

// benchGap is EVICTD_BENCH_GAP, 0 when unset.
func benchGap(b *testing.B) time.Duration {
	v := os.Getenv("EVICTD_BENCH_GAP")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("EVICTD_BENCH_GAP=%q: %v", v, err)
	}
	return d
}
