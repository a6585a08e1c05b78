package main

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/internal/workload"
)

// liveSummaryTimeout bounds one Summary of the live node; a healthy node
// takes milliseconds, so this only catches a hung filesystem.
const liveSummaryTimeout = 30 * time.Second

// liveFlags are explain's flags for reading this node instead of files.
type liveFlags struct {
	live                   *bool
	podsCgroup, root, file *string
	kubeletRoot, podLogs   *string
	procRoot               *string
	version                int // the cgroup version read (0: not live)
}

// cgroupVersion is the memory controller's cgroup version of the node read
// with --live, 0 without it.
func (l *liveFlags) cgroupVersion() int { return l.version }

func registerLiveFlags(fs *pflag.FlagSet) *liveFlags {
	return &liveFlags{
		live:        fs.Bool("live", false, "read this node's stats now (as 'evictd stat --summary' does) instead of --summary"),
		podsCgroup:  fs.String("pods-cgroup", "", "--live: the pods' parent cgroup relative to the hierarchy root (default: detect /kubepods.slice or /kubepods)"),
		root:        fs.String("workload-root", "", "--live on a host without Kubernetes: the cgroup whose children are the workloads; the pods then come from it (and --workloads), not --pods"),
		file:        fs.String("workloads", "", "--live with --workload-root: the workloads file giving requests, limits and priorities (as for 'evictd run')"),
		kubeletRoot: fs.String("kubelet-root", "/var/lib/kubelet", "--live: the kubelet's root directory (node fs, emptyDir volumes)"),
		podLogs:     fs.String("pod-logs", "/var/log/pods", "--live: the pods' log directory"),
		procRoot:    fs.String("proc", "/proc", "--live: where /proc is mounted"),
	}
}

// check reports flag combinations that cannot work, before anything is read.
func (l *liveFlags) check(summaryPath, podsPath string) error {
	switch {
	case *l.live && summaryPath != "":
		return fmt.Errorf("--live and --summary are exclusive: --live reads this node's stats")
	case !*l.live && summaryPath == "":
		return fmt.Errorf("--summary FILE (or --live) is required (see --help)")
	case !*l.live && (*l.root != "" || *l.file != "" || *l.podsCgroup != ""):
		return fmt.Errorf("--pods-cgroup, --workload-root and --workloads go with --live")
	case *l.file != "" && *l.root == "":
		return fmt.Errorf("--workloads needs --workload-root")
	case *l.root != "" && podsPath != "":
		return fmt.Errorf("--workload-root gives the pods itself: drop --pods")
	case *l.root == "" && podsPath == "":
		return fmt.Errorf("--pods FILE is required (with --live on a host without Kubernetes, --workload-root instead)")
	}
	return nil
}

// read takes one Summary of this node and, in host mode, the workloads as
// pods. pods is nil when they come from --pods; given (the --pods list) names
// the pods and containers of a Kubernetes node as the kubelet's Summary does.
func (l *liveFlags) read(given []*v1.Pod) (*statsapi.Summary, []*v1.Pod, error) {
	cfg := collect.Config{ProcRoot: *l.procRoot, PodsCgroup: *l.podsCgroup,
		KubeletRoot: *l.kubeletRoot, PodLogsRoot: *l.podLogs}
	if given != nil {
		kube.NameFromPods(&cfg, given)
	}
	rootRel := ""
	if *l.root != "" {
		rootRel = "/" + strings.Trim(*l.root, "/")
		cfg.WorkloadRoot = rootRel
		cfg.PodRef = func(w collect.Workload) statsapi.PodReference {
			return workload.PodRef(rootRel, w.Cgroup, w.Name)
		}
	}
	c, err := collect.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	_, l.version = c.MemoryRoot()
	ctx, cancel := context.WithTimeout(context.Background(), liveSummaryTimeout)
	defer cancel()
	s, err := c.Summary(ctx)
	if err != nil {
		return nil, nil, err
	}
	if rootRel == "" {
		return s, nil, nil
	}
	var f *workload.File
	if *l.file != "" {
		if f, err = workload.ReadFile(*l.file); err != nil {
			return nil, nil, err
		}
	}
	memRoot, _ := c.MemoryRoot()
	ws, err := workload.Discover(f, filepath.Join(memRoot, path.Clean(rootRel)), "")
	if err != nil {
		return nil, nil, err
	}
	return s, workload.Pods(ws), nil
}
