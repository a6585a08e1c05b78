package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/safetext"
)

func init() {
	cli.Register(cli.Command{
		Name:    "qos",
		Summary: "show the memory.min/low/high and oom_score_adj the kubelet writes for each container",
		Run:     runQoS,
	})
}

const qosHelp = `
Shows, per pod and container, the cgroup v2 memory files the kubelet v1.37.2
writes with MemoryQoS — memory.min, memory.low, memory.high — and each
container's oom_score_adj, from a KubeletConfiguration and the pods.

What decides the values:
  featureGates.MemoryQoS     on by default in v1.37 (beta); off on cgroup v2
                             means memory.high is reset to "max"
  memoryReservationPolicy    None (default): memory.min and memory.low are
                             written as 0. TieredReservation: Guaranteed
                             containers get memory.min = request, Burstable
                             ones memory.low = request (the other file is
                             left alone)
  memoryThrottlingFactor     unset by default, and then NO memory.high is
                             written. When set: memory.high =
                             floor((request + factor × (limit − request)) /
                             pageSize) × pageSize, with node allocatable
                             memory in place of a missing limit; not written
                             for request == limit or when not above request
  oom_score_adj              -997 Guaranteed and system-node-critical, 1000
                             BestEffort, Burstable 1000 − 1000 × request /
                             memory capacity (clamped to 3..999; sidecars
                             never above the smallest regular container)

Node facts: --memory-capacity defaults to this machine's MemTotal; node
allocatable memory (used for memory.high of containers without a limit) is
--node-allocatable-memory, else capacity − systemReserved.memory −
kubeReserved.memory from the config (eviction thresholds are not
subtracted, as in the kubelet). The page size defaults to this machine's.

In the table "-" and in JSON null mean the kubelet does not write that file
at all (it keeps whatever value it had). JSON byte values are integers;
"max" is the string "max". The table also shows the pod-level cgroup and the
QoS-class cgroups; JSON has exactly
{"pods":[{"namespace","name","qosClass","containers":[{"name","memoryMin",
"memoryLow","memoryHigh","oomScoreAdj"}]}]}, init containers first.

With --live (host mode), it reads what is written now on each workload of
--workload-root — memory.min/low/high (cgroup v2), every process's
oom_score_adj — and on the root, and prints it next to what "evictd run"
keeps there from the same --config and --workloads; "!=" flags a
difference. Workloads without a process are left out, as evictd run leaves
them out.

Examples:
  evictd qos --config /var/lib/kubelet/config.yaml --pods pods.json
  evictd qos --live --config /etc/evictd/kubelet.yaml --workload-root /workloads --workloads /etc/evictd/workloads.yaml
  kubectl get pods -A -o json --field-selector spec.nodeName=node1 > pods.json
  evictd qos --config config.yaml --pods pods.json --memory-capacity 64Gi -o json
`

func runQoS(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("qos", "[--config FILE] --pods FILE [--node-allocatable-memory Q] [--memory-capacity Q] [-o table|json] | --live --workload-root PATH [--workloads FILE] [--config FILE]", qosHelp, stdout, stderr)
	cli.RegisterInputFlags(fs)
	configPath := fs.String("config", "", "KubeletConfiguration file (YAML or JSON), or a /configz dump; without it the kubelet's defaults apply")
	configDir := registerConfigDirFlag(fs)
	podsPath := fs.String("pods", "", "pods: PodList, list of Pods or a Pod (JSON or YAML), required")
	allocFlag := fs.String("node-allocatable-memory", "", "node allocatable memory, e.g. 30Gi (default: capacity − systemReserved − kubeReserved)")
	capFlag := fs.String("memory-capacity", "", "the node's memory capacity, e.g. 32Gi (default: MemTotal of this machine)")
	cgroupVersion := fs.Int("cgroup-version", 2, "the node's cgroup version: 2, or 1 (where MemoryQoS writes nothing)")
	pageSize := fs.Int64("page-size", int64(os.Getpagesize()), "the node's page size in bytes; memory.high is rounded down to it")
	out := fs.StringP("output", "o", "table", "output format: table or json")
	live := fs.Bool("live", false, "compare what is written now on this host's workloads (--workload-root, --workloads) with what evictd run keeps there")
	root := fs.String("workload-root", "", "with --live: the workload root, relative to the memory hierarchy root, as given to evictd run")
	workloadsPath := fs.String("workloads", "", "with --live: the workloads file, as given to evictd run")
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd qos: "+format+"\n", a...)
		return cli.ExitError
	}
	if *live {
		switch {
		case fs.NArg() > 0:
			return fail("unexpected argument %q", fs.Arg(0))
		case *podsPath != "":
			return fail("--live reads the workloads of this host; --pods does not apply")
		case *root == "":
			return fail("--live needs --workload-root (as given to evictd run)")
		case *out != "table" && *out != "json":
			return fail("-o %q: want table or json", *out)
		}
		return runQoSLive(kubeletconfig.Source{File: *configPath, DropInDir: *configDir}, *root, *workloadsPath, *out, stdout, stderr)
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0))
	case *root != "" || *workloadsPath != "":
		return fail("--workload-root and --workloads go with --live")
	case *podsPath == "":
		return fail("--pods is required (see --help)")
	case *out != "table" && *out != "json":
		return fail("-o %q: want table or json", *out)
	case *cgroupVersion != 1 && *cgroupVersion != 2:
		return fail("--cgroup-version %d: want 1 or 2", *cgroupVersion)
	case *pageSize <= 0:
		return fail("--page-size %d: must be positive", *pageSize)
	}

	c, err := kubeletconfig.Read(kubeletconfig.Source{File: *configPath, DropInDir: *configDir})
	if err != nil {
		return fail("%v", err)
	}
	warnKubeletConfig(stderr, "qos", c)
	kc := c.Kubelet
	s, err := memqos.FromKubelet(kc)
	if err != nil {
		return fail("%s: %v", c.Describe(), err)
	}
	s.CgroupV2 = *cgroupVersion == 2
	s.PageSize = *pageSize

	capSource := "--memory-capacity"
	if *capFlag != "" {
		if s.MemoryCapacity, err = positiveQuantity("--memory-capacity", *capFlag); err != nil {
			return fail("%v", err)
		}
	} else {
		mi, err := host.ReadMeminfo("/proc")
		if err != nil {
			return fail("reading this machine's MemTotal (set --memory-capacity): %v", err)
		}
		s.MemoryCapacity = int64(mi.MemTotal)
		capSource = "MemTotal of this machine"
	}
	allocSource := "--node-allocatable-memory"
	if *allocFlag != "" {
		if s.NodeAllocatableMemory, err = positiveQuantity("--node-allocatable-memory", *allocFlag); err != nil {
			return fail("%v", err)
		}
	} else {
		if s.NodeAllocatableMemory, err = memqos.NodeAllocatableMemory(s.MemoryCapacity, kc); err != nil {
			return fail("%s: %v", c.Describe(), err)
		}
		allocSource = "capacity − systemReserved − kubeReserved"
	}

	pods, err := load.PodsFile(*podsPath)
	if err != nil {
		return fail("%v", err)
	}
	res, qosCgroups, err := memqos.ForPods(pods, s)
	if err != nil {
		return fail("%v", err)
	}
	if *out == "json" {
		b, err := json.MarshalIndent(struct {
			Pods []memqos.Pod `json:"pods"`
		}{res}, "", "  ")
		if err != nil {
			return fail("%v", err)
		}
		stdout.Write(append(b, '\n'))
		return cli.ExitOK
	}
	writeQoSTable(stdout, s, res, qosCgroups, capSource, allocSource)
	return cli.ExitOK
}

func positiveQuantity(flagName, v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %v", flagName, v, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("%s %q: must be positive", flagName, v)
	}
	n, ok := q.AsInt64()
	if !ok {
		// q.Value() would wrap around to a negative number of bytes.
		return 0, fmt.Errorf("%s %q: too large (at most %d bytes, 8Ei)", flagName, v, int64(math.MaxInt64))
	}
	return n, nil
}

func writeQoSTable(w io.Writer, s memqos.Settings, pods []memqos.Pod, q memqos.QoSCgroups, capSource, allocSource string) {
	fmt.Fprintln(w, qosSettingsLine(s))
	fmt.Fprintf(w, "Memory capacity %s (%s); page size %d B\n", human(s.MemoryCapacity), capSource, s.PageSize)
	fmt.Fprintf(w, "Node allocatable memory %s (%s)\n", human(s.NodeAllocatableMemory), allocSource)
	fmt.Fprintln(w, `Values in bytes; "-" = the kubelet does not write the file.`)
	if len(pods) == 0 {
		fmt.Fprintln(w, "\nNo pods.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range pods {
		fmt.Fprintf(tw, "\n%s (%s)\n", clip(safetext.Escape(p.Namespace+"/"+p.Name), 80), p.QOSClass)
		fmt.Fprintln(tw, "  CONTAINER\tKIND\tMEMORY.MIN\tMEMORY.LOW\tMEMORY.HIGH\tOOM_SCORE_ADJ")
		for _, c := range p.Containers {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\n", clip(safetext.Escape(c.Name), 24), c.Kind, c.MemoryMin, c.MemoryLow, c.MemoryHigh, c.OOMScoreAdj)
		}
		if pc := p.Cgroup; pc.MemoryMin.Written || pc.MemoryLow.Written || pc.MemoryHigh.Written {
			fmt.Fprintf(tw, "  (pod cgroup)\t\t%s\t%s\t%s\n", pc.MemoryMin, pc.MemoryLow, pc.MemoryHigh)
		}
	}
	tw.Flush()
	if q.KubepodsMemoryMin.Written {
		when := "kept up to date"
		if !s.MemoryQoS || s.ReservationPolicy != memqos.ReservationTiered {
			when = "reset once at kubelet start"
		}
		fmt.Fprintf(w, "\nQoS cgroups (%s): kubepods memory.min %s memory.low %s;\n  kubepods/burstable memory.low %s\n",
			when, q.KubepodsMemoryMin, q.KubepodsMemoryLow, q.BurstableMemoryLow)
	}
}

// qosSettingsLine says which MemoryQoS settings are in force.
func qosSettingsLine(s memqos.Settings) string {
	state := "MemoryQoS on"
	switch {
	case !s.CgroupV2:
		state = "cgroup v1: MemoryQoS writes nothing"
	case !s.MemoryQoS:
		state = "MemoryQoS off: memory.high reset to max"
	}
	tf := "unset (no memory.high)"
	if s.ThrottlingFactor != nil {
		tf = fmt.Sprint(*s.ThrottlingFactor)
	}
	pol := string(s.ReservationPolicy)
	if pol == "" {
		pol = string(memqos.ReservationNone)
	}
	return fmt.Sprintf("%s; memoryReservationPolicy %s; memoryThrottlingFactor %s", state, pol, tf)
}

// human renders bytes for the header lines: exact when a whole number of
// Gi/Mi, else Gi with one decimal, followed by the exact byte count.
func human(b int64) string {
	const gi, mi = 1 << 30, 1 << 20
	switch {
	case b > 0 && b%gi == 0:
		return fmt.Sprintf("%dGi", b/gi)
	case b > 0 && b%mi == 0:
		return fmt.Sprintf("%dMi", b/mi)
	}
	return fmt.Sprintf("%.1fGi (%d B)", float64(b)/gi, b)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// hostQoSSettings are the memory QoS settings `evictd run` keeps and
// `evictd qos --live` compares with: the config's MemoryQoS gate,
// memoryReservationPolicy and memoryThrottlingFactor, and this machine's
// facts (MemTotal, allocatable = MemTotal − systemReserved − kubeReserved,
// page size). The cgroup version is the caller's.
func hostQoSSettings(c *kubeletconfig.Config) (memqos.Settings, error) {
	kc := c.Kubelet
	s, err := memqos.FromKubelet(kc)
	if err != nil {
		return s, fmt.Errorf("%s: %v", c.Describe(), err)
	}
	mi, err := host.ReadMeminfo("/proc")
	if err != nil {
		return s, fmt.Errorf("reading this machine's MemTotal: %w", err)
	}
	s.MemoryCapacity = int64(mi.MemTotal)
	if s.NodeAllocatableMemory, err = memqos.NodeAllocatableMemory(s.MemoryCapacity, kc); err != nil {
		return s, fmt.Errorf("%s: %v", c.Describe(), err)
	}
	s.PageSize = int64(os.Getpagesize())
	return s, nil
}
