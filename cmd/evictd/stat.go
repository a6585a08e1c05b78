package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/safetext"
)

const statHelp = `
Show the memory, CPU-throttling, OOM and pressure numbers of cgroups, read the
right way for this host's cgroup version — for people whose scripts broke
moving from cgroup v1 to v2:

  working set   v1: memory.usage_in_bytes - total_inactive_file
                v2: memory.current - inactive_file (floored at 0; the kubelet's number)
  throttled     v1: cpu.stat throttled_time is NANOseconds
                v2: cpu.stat throttled_usec is MICROseconds
  OOM kills     v2: read the POD's memory.events: a container's counters
                restart with its cgroup when it is OOM-killed and recreated
  PSI           v2 only (memory/cpu/io.pressure); v1 has no per-cgroup PSI

Targets: every pod under the kubelet's pods cgroup (default; detects
kubepods.slice or kubepods), one pod (--pod), any cgroup (--cgroup), or the
children of a plain workload root (--workload-root) on hosts without
Kubernetes. With --summary it prints this node's stats Summary instead, in
the kubelet's /stats/summary JSON shape (k8s.io/kubelet stats/v1alpha1).

Examples:
  evictd stat
  evictd stat --pod 6f3c1a2b-1111-4c2d-9e8f-0123456789ab -o json
  evictd stat --cgroup /system.slice/containerd.service
  evictd stat --workload-root /batch
  evictd stat --summary --pods-cgroup /kubepods.slice
`

func init() {
	cli.Register(cli.Command{
		Name:    "stat",
		Summary: "show working set, throttling, OOM counts and PSI of pods or cgroups (v1 and v2), or the node's stats Summary",
		Run:     runStat,
	})
}

func runStat(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("stat", "[--pod UID | --cgroup PATH | --workload-root PATH] [-o table|json] | --summary [--pods-cgroup PATH]", statHelp, stdout, stderr)
	pod := fs.String("pod", "", "show only the pod with this UID")
	cg := fs.String("cgroup", "", "show this cgroup: a path relative to the hierarchy root (e.g. /kubepods/burstable/pod<uid>) or under the memory controller's mount point")
	podsCgroup := fs.String("pods-cgroup", "", "the pods' parent cgroup relative to the hierarchy root (default: detect /kubepods.slice or /kubepods)")
	workloadRoot := fs.String("workload-root", "", "a cgroup (relative to the hierarchy root) whose children are the workloads, for hosts without Kubernetes")
	output := fs.StringP("output", "o", "table", "output format: table or json")
	summary := fs.Bool("summary", false, "print this node's stats Summary JSON (the kubelet's /stats/summary shape)")
	procRoot := fs.String("proc", "/proc", "where /proc is mounted (a host /proc seen from a container)")
	kubeletRoot := fs.String("kubelet-root", "/var/lib/kubelet", "the kubelet's root directory (node fs, emptyDir volumes); --summary only")
	podLogs := fs.String("pod-logs", "/var/log/pods", "the pods' log directory; --summary only")
	podsFile := fs.String("pods", "", "--summary on a Kubernetes node: name pods and containers from this pod list (kubectl get pods -o json) as the kubelet's Summary does")
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd stat: unexpected argument %q (see --help)\n", fs.Arg(0))
		return cli.ExitError
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "evictd stat: -o %q: want table or json\n", *output)
		return cli.ExitError
	}
	targets := 0
	for _, s := range []string{*pod, *cg, *workloadRoot} {
		if s != "" {
			targets++
		}
	}
	if *podsFile != "" && (!*summary || *workloadRoot != "") {
		fmt.Fprintln(stderr, "evictd stat: --pods goes with --summary on a Kubernetes node (not with --workload-root)")
		return cli.ExitError
	}
	if targets > 1 {
		fmt.Fprintln(stderr, "evictd stat: --pod, --cgroup and --workload-root are exclusive: pick one")
		return cli.ExitError
	}
	ccfg := collect.Config{ProcRoot: *procRoot, PodsCgroup: *podsCgroup, WorkloadRoot: *workloadRoot,
		KubeletRoot: *kubeletRoot, PodLogsRoot: *podLogs}
	if *podsFile != "" {
		pods, err := load.PodsFile(*podsFile)
		if err != nil {
			fmt.Fprintf(stderr, "evictd stat: %v\n", err)
			return cli.ExitError
		}
		kube.NameFromPods(&ccfg, pods)
	}
	c, err := collect.New(ccfg)
	if err != nil {
		fmt.Fprintf(stderr, "evictd stat: %v\n", err)
		return cli.ExitError
	}
	if *summary {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := c.Summary(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "evictd stat: %v\n", err)
			return cli.ExitError
		}
		return writeJSON(stdout, stderr, s)
	}
	var stats []collect.CgroupStat
	switch {
	case *cg != "":
		s, err := c.StatCgroup(*cg)
		if err != nil {
			fmt.Fprintf(stderr, "evictd stat: %v\n", err)
			return cli.ExitError
		}
		stats = []collect.CgroupStat{s}
	default:
		if c.PodsCgroup() == "" {
			fmt.Fprintf(stderr, "evictd stat: %v\n", collect.ErrNoPodsCgroup)
			return cli.ExitError
		}
		stats, err = c.StatWorkloads(*pod)
		if err != nil {
			fmt.Fprintf(stderr, "evictd stat: %v\n", err)
			return cli.ExitError
		}
	}
	if *output == "json" {
		if stats == nil {
			stats = []collect.CgroupStat{}
		}
		return writeJSON(stdout, stderr, stats)
	}
	root, v := c.MemoryRoot()
	fmt.Fprintf(stdout, "cgroup v%d memory hierarchy at %s (mode %s)\n", v, root, c.Hierarchy().Mode)
	if len(stats) == 0 {
		fmt.Fprintf(stdout, "no workloads under %s\n", c.PodsCgroup())
		return cli.ExitOK
	}
	writeStatTable(stdout, stats)
	return cli.ExitOK
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "evictd stat: %v\n", err)
		return cli.ExitError
	}
	return cli.ExitOK
}

func writeStatTable(w io.Writer, stats []collect.CgroupStat) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tWORKING SET\tUSAGE\tINACTIVE FILE\tLIMIT\tTHROTTLED\tPERIODS\tOOM\tOOM KILLS\tMEM PSI some avg10")
	var notes []string
	row := func(s collect.CgroupStat, indent string) {
		name := safetext.Escape(s.Cgroup) // a cgroup directory may be named with terminal escapes
		switch {
		case s.Kind == "container":
			name = indent + shortID(s.ContainerID)
		case s.PodUID != "":
			name = s.PodUID
		}
		limit := "-"
		if s.LimitBytes != nil {
			limit = bytesQ(*s.LimitBytes)
		}
		throttled, periods := "-", "-"
		if s.CPU != nil {
			throttled = fmt.Sprintf("%.3fs", s.CPU.ThrottledSeconds)
			periods = fmt.Sprintf("%d/%d", s.CPU.ThrottledPeriods, s.CPU.Periods)
		}
		oom, kills := "-", "-"
		if s.OOM != nil {
			if s.OOM.Events != nil {
				oom = fmt.Sprint(*s.OOM.Events)
			}
			kills = fmt.Sprint(s.OOM.Kills)
		}
		psi := "-"
		if s.PSI != nil && s.PSI.Memory != nil {
			psi = fmt.Sprintf("%.2f%%", s.PSI.Memory.Some.Avg10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Kind, name, bytesQ(s.WorkingSetBytes),
			bytesQ(s.UsageBytes), bytesQ(s.InactiveFileBytes), limit, throttled, periods, oom, kills, psi)
		for _, n := range s.Notes {
			if !contains(notes, n) {
				notes = append(notes, n)
			}
		}
	}
	for _, s := range stats {
		row(s, "")
		for _, c := range s.Containers {
			row(c, "  ")
		}
	}
	tw.Flush()
	if len(stats) > 0 {
		fmt.Fprintf(w, "\nworking set = %s\n", stats[0].WorkingSetFormula)
		if s := stats[0]; s.CPU != nil {
			fmt.Fprintf(w, "throttled from %s; PERIODS = throttled/total\n", s.CPU.Source)
		}
		if s := stats[0]; s.OOM != nil {
			fmt.Fprintf(w, "OOM counts from %s\n", s.OOM.Source)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// bytesQ prints bytes as a Kubernetes quantity (e.g. 1536Mi), the unit
// people compare with requests and limits.
func bytesQ(b uint64) string {
	if b > 1<<62 {
		return fmt.Sprint(b)
	}
	return resource.NewQuantity(int64(b), resource.BinarySI).String()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
