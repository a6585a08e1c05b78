package main

import (
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/explain"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

func init() {
	cli.Register(cli.Command{
		Name:    "explain",
		Summary: "show what the kubelet's eviction manager decides for a config, stats and pods",
		Run:     runExplain,
	})
}

const explainHelp = `
Explains what the kubelet v1.37.2 eviction manager decides on its first
synchronize with these inputs: the signals it observes, each threshold (met,
still in its grace period and for how long, or not met), the node conditions,
the node-level reclaim it runs first, the pods ranked for the deciding signal
with the keys that ranked them, and the pod it evicts with grace period and
message — the same text the pod's status and event get.

Inputs are the formats you already have: the kubelet's configuration — a
KubeletConfiguration file (YAML or JSON) with the drop-ins of its
--config-dir, merged as the kubelet merges them, or the node's /configz dump
(kubectl get --raw /api/v1/nodes/NODE/proxy/configz), which is all of it —
and/or the kubelet's eviction flags (flags win over the file, as in the
kubelet; docs/kubelet-config.md); the node's /stats/summary JSON (kubectl get --raw
/api/v1/nodes/NODE/proxy/stats/summary); the pods as kubectl get pods -o json
(a PodList, a list of Pods or one Pod; JSON or YAML).

When node-level reclaim (container/image GC) would run first, explain assumes
it frees nothing and shows the eviction that follows; use "evictd simulate"
with afterReclaim to model what GC frees.

With --cluster, every node of the cluster (or those -l selects) is explained
through the API server in one table: its nearest threshold, trend, first pod
to go and evictd agent ("evictd explain --cluster --help"; also "kubectl
evictd").

The node's memory is shown two ways side by side: the kubelet's
memory.available (capacity − the root cgroup's working set, which counts
active page cache) and the kernel's MemAvailable from /proc/meminfo (--live
reads it; --meminfo FILE gives a saved copy), with the free swap. --profile
(default kubelet) explains the decision of a profile beyond the kubelet
(docs/profile.md): memavailable decides on MemAvailable, swap-aware counts free
swap and swap use, and so on.

With --live, the stats are this node's, read now the way "evictd stat
--summary" reads them; the pods still come from --pods (kubectl get pods
--field-selector spec.nodeName=NODE -o json) or, on a host without
Kubernetes, from --workload-root and its --workloads file, as "evictd run"
sees them.

Example:
  evictd explain --config /var/lib/kubelet/config.yaml --summary summary.json --pods pods.json
  evictd explain --config configz.json --summary summary.json --pods pods.json
  evictd explain --config /etc/kubernetes/kubelet/config.json --config-dir /etc/kubernetes/kubelet/config.json.d --summary s.json --pods p.json
  evictd explain --cluster -l node-role.kubernetes.io/worker=
  evictd explain --live --config /var/lib/kubelet/config.yaml --pods pods.json
  evictd explain --live --eviction-hard 'memory.available<1Gi' --workload-root /workloads --workloads workloads.yaml
  evictd explain --eviction-hard 'memory.available<500Mi' --summary s.json --pods p.json -o json
  evictd explain --summary s.json --pods p.json --meminfo meminfo.txt --profile memavailable
`

func runExplain(args []string, stdout, stderr io.Writer) int {
	if clusterArg(args) {
		return runExplainCluster("evictd explain", args, stdout, stderr) // explain_cluster.go
	}
	fs := cli.NewFlagSet("explain", "[--config FILE [--config-dir DIR]] [eviction flags] (--summary FILE | --live) (--pods FILE | --workload-root CG) [-o table|json]\n       evictd explain --cluster [flags] [NODE...]", explainHelp, stdout, stderr)
	fs.Bool("cluster", false, "explain every node of the cluster through the API server (see evictd explain --cluster --help)")
	cli.RegisterInputFlags(fs)
	configPath := fs.String("config", "", "KubeletConfiguration file (YAML or JSON), or the node's /configz dump (kubectl get --raw /api/v1/nodes/NODE/proxy/configz: the kubelet's configuration after its drop-ins and flags); without it, a config file that sets no eviction field (docs/kubelet-parity.md: a kubelet with no config file at all has no default hard thresholds)")
	configDir := registerConfigDirFlag(fs)
	summaryPath := fs.String("summary", "", "the node's /stats/summary document (JSON or YAML), required")
	podsPath := fs.String("pods", "", "the node's active pods: PodList, list of Pods or a Pod (JSON or YAML), required")
	imageFs := fs.Bool("dedicated-imagefs", false, "the container runtime's image filesystem is separate from the node filesystem")
	splitFs := fs.Bool("split-containerfs", false, "container writable layers are on a filesystem separate from images (implies --dedicated-imagefs)")
	out := fs.StringP("output", "o", "table", "output format: table or json")
	evFlags := load.RegisterEvictionFlags(fs)
	live := registerLiveFlags(fs)
	profile := cli.RegisterProfileFlag(fs)
	meminfoPath := fs.String("meminfo", "", "a copy of the node's /proc/meminfo (cat /proc/meminfo > file): its MemAvailable is shown beside the kubelet's memory.available and used by --profile memavailable (--live reads this node's)")
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd explain: "+format+"\n", a...)
		return cli.ExitError
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if err := live.check(*summaryPath, *podsPath); err != nil {
		return fail("%v", err)
	}
	if *out != "table" && *out != "json" {
		return fail("-o %q: want table or json", *out)
	}
	if *splitFs && !*imageFs {
		*imageFs = true
	}
	cfg, kc, err := policyConfig(kubeletconfig.Source{File: *configPath, DropInDir: *configDir}, evFlags)
	if err != nil {
		return fail("%v", err)
	}
	cfg.Profile = profile.Profile()
	warnKubeletConfig(stderr, "explain", kc)

	var summary *statsv1alpha1.Summary
	var pods []*v1.Pod
	if *podsPath != "" {
		if pods, err = load.PodsFile(*podsPath); err != nil {
			return fail("%v", err)
		}
	}
	if *live.live {
		var hostPods []*v1.Pod
		if summary, hostPods, err = live.read(pods); err != nil {
			return fail("reading this node: %v", err)
		}
		if hostPods != nil {
			pods = hostPods
		}
	} else if summary, err = load.SummaryFile(*summaryPath); err != nil {
		return fail("%v", err)
	}
	host, err := explainMeminfo(*meminfoPath, *live.live, *live.procRoot)
	if err != nil {
		return fail("%v", err)
	}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{DedicatedImageFs: *imageFs, SplitContainerFs: *splitFs})
	if err != nil {
		return fail("%v", err)
	}
	rep := explain.Explain(eng, explain.Input{Config: kc.Describe(), Summary: summary, Pods: pods, Host: host, CgroupVersion: live.cgroupVersion()})
	if *out == "json" {
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "evictd: writing JSON:", err)
			return cli.ExitError
		}
		return cli.ExitOK
	}
	rep.WriteTable(stdout)
	return cli.ExitOK
}
