package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload"
)

// HostPods lists host-mode workloads: the cgroups under the workload root,
// described by the workloads file. Only cgroups holding at least one process
// are active: an emptied cgroup is a terminated pod, so a workload evicted
// once is not picked again while its directory lingers.
type HostPods struct {
	File       *workload.File
	Root       string // absolute workload root directory
	SelfCgroup string // evictd's own memory cgroup (absolute), never evicted
}

// Pods implements PodSource.
func (h *HostPods) Pods(ctx context.Context) ([]*v1.Pod, error) {
	ws, err := h.Workloads()
	if err != nil {
		return nil, err
	}
	return workload.Pods(ws), nil
}

// Workloads lists the active workloads.
func (h *HostPods) Workloads() ([]workload.Workload, error) {
	ws, err := workload.Discover(h.File, h.Root, h.SelfCgroup)
	if err != nil {
		return nil, err
	}
	out := ws[:0]
	for _, w := range ws {
		if populated(w.Cgroup) {
			out = append(out, w)
		}
	}
	return out, nil
}

// populated reports whether a cgroup subtree holds a process, as cheaply as
// the kernel allows: one read of cgroup.procs when the cgroup itself holds
// one; else v2's cgroup.events "populated" line; else (v1) the descendants.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return true
	}
	if ev, err := os.ReadFile(filepath.Join(dir, "cgroup.events")); err == nil {
		return bytes.Contains(ev, []byte("populated 1"))
	}
	// v1: kernfs counts a directory's subdirectories in its link count, so
	// a cgroup with 2 links has no children and, with no process of its
	// own, is empty — one stat instead of a walk.
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err == nil && st.Nlink == 2 {
		return false
	}
	pids, err := actuate.ProcsRecursive(dir)
	return err == nil && len(pids) > 0
}

// HostEvictor kills a host-mode workload's cgroup.
type HostEvictor struct {
	Killer *actuate.Killer
}

// Evict implements Evictor: SIGTERM, then the fork-proof kill at the grace
// deadline, waiting (bounded) until the cgroup is empty.
func (h *HostEvictor) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, _ policy.Eviction) (EvictResult, error) {
	dir := pod.Annotations[workload.CgroupAnnotation]
	if dir == "" {
		return EvictResult{}, fmt.Errorf("pod %s/%s has no %s annotation", pod.Namespace, pod.Name, workload.CgroupAnnotation)
	}
	res, err := h.Killer.Kill(ctx, actuate.Target{Name: pod.Name, Cgroup: dir}, grace)
	out := EvictResult{Pids: res.Terminated, Gone: res.Gone, DryRun: res.DryRun, Took: res.Elapsed}
	switch {
	case res.DryRun:
		out.Method = "dry-run (would SIGTERM, then " + res.HardKill + ")"
	case res.HardKill == "":
		out.Method = "SIGTERM"
	case len(res.Terminated) > 0:
		out.Method = "SIGTERM, then " + res.HardKill
	default:
		out.Method = res.HardKill
	}
	return out, err
}

// HookReclaimer runs the configured reclaim hooks for a signal.
type HookReclaimer struct {
	Hooks *actuate.Hooks
}

// Reclaim implements Reclaimer.
func (h *HookReclaimer) Reclaim(ctx context.Context, signal policy.Signal, _ []string) {
	h.Hooks.Run(ctx, string(signal))
}
