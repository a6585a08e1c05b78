package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/safetext"
	"github.com/evictd/evictd/internal/scenario"
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
	now := scenario.Start
	d := eng.StepHost(now, policy.Input{Summary: summary, Pods: pods}, host)
	reclaim := d.Reclaim
	if d.ReclaimPending {
		d = eng.ReclaimedHost(now, summary, host)
		d.Notes = append(d.Notes, "node-level reclaim ("+strings.Join(reclaim, ", ")+") assumed to free nothing")
	}
	rep := explainReport{Config: kc.Describe(), Profile: cfg.Profile.String(), Filesystems: eng.Filesystems(), Thresholds: thresholdRows(eng, &d), Decision: d,
		GrowthStops: growthStopPlans(d, live.cgroupVersion())}
	if *out == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // messages and thresholds hold '<' and quotes
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "evictd: writing JSON:", err)
			return cli.ExitError
		}
		return cli.ExitOK
	}
	writeExplainTable(stdout, &rep)
	return cli.ExitOK
}

// explainReport is explain's JSON output.
type explainReport struct {
	Config string `json:"config"`
	// Profile is the policy profile ("kubelet": the kubelet's decisions).
	Profile     string             `json:"profile"`
	Filesystems policy.Filesystems `json:"filesystems"`
	// Thresholds: every effective threshold with its state on this synchronize.
	Thresholds []thresholdRow  `json:"thresholds"`
	Decision   policy.Decision `json:"decision"`
	// GrowthStops: what evictd run does to each victim before evicting it
	// (the kubelet does nothing of the kind).
	GrowthStops []growthStopPlan `json:"growthStops,omitempty"`
}

// growthStopPlan is the growth stop evictd puts on an eviction's victim the
// moment it decides (agent.Holder): the mechanism per cgroup version, or
// this node's when explain reads the live node.
type growthStopPlan struct {
	Pod       policy.PodRef `json:"pod"`
	Resource  string        `json:"resource"`
	Mechanism string        `json:"mechanism,omitempty"` // this node's (--live)
	CgroupV1  string        `json:"cgroupV1,omitempty"`
	CgroupV2  string        `json:"cgroupV2,omitempty"`
}

func growthStopPlans(d policy.Decision, version int) []growthStopPlan {
	var out []growthStopPlan
	for _, ev := range d.Evictions {
		r, ok := agent.GrowthStopResource(ev)
		if !ok {
			continue
		}
		p := growthStopPlan{Pod: ev.Pod, Resource: r.String()}
		switch version {
		case 1:
			p.Mechanism = actuate.Mechanism(actuate.V1, r)
		case 2:
			p.Mechanism = actuate.Mechanism(actuate.V2, r)
		default:
			p.CgroupV1, p.CgroupV2 = actuate.Mechanism(actuate.V1, r), actuate.Mechanism(actuate.V2, r)
		}
		out = append(out, p)
	}
	return out
}

type thresholdRow struct {
	Threshold string `json:"threshold"`
	Signal    string `json:"signal"`
	Quantity  string `json:"quantity,omitempty"`
	Available string `json:"available,omitempty"`
	// State: met, met (min-reclaim), in-grace, stale, not-met, no-observation,
	// "from 2nd sync" (a derived containerfs threshold the kubelet does not
	// evaluate on its first synchronize), "never (no source)".
	State          string `json:"state"`
	GraceRemaining string `json:"graceRemaining,omitempty"`

	t policy.Threshold
}

func thresholdRows(eng *policy.Engine, d *policy.Decision) []thresholdRow {
	obs := map[policy.Signal]policy.Observation{}
	for _, o := range d.Observations {
		obs[o.Signal] = o
	}
	find := func(list []policy.ThresholdStatus, t policy.Threshold) *policy.ThresholdStatus {
		for i := range list {
			if list[i].Threshold.String() == t.String() {
				return &list[i]
			}
		}
		return nil
	}
	var rows []thresholdRow
	for _, t := range eng.Thresholds() {
		r := thresholdRow{Threshold: t.String(), Signal: string(t.Signal), State: "not-met", t: t}
		o, ok := obs[t.Signal]
		if !ok {
			r.State = "no-observation"
		} else {
			r.Quantity = policy.ThresholdQuantity(t.Value, &o.Capacity).String()
			r.Available = o.Available.String()
		}
		unevaluated := false
		for _, u := range d.Unevaluated {
			if u.String() == t.String() {
				unevaluated = true
			}
		}
		switch {
		case t.Operator == "":
			r.State = "never (no source)"
		case unevaluated:
			r.State = "from 2nd sync"
		case find(d.InGrace, t) != nil:
			r.State = "in-grace"
			r.GraceRemaining = find(d.InGrace, t).GraceRemaining.String()
		case find(d.Stale, t) != nil:
			r.State = "stale"
		case find(d.Met, t) != nil:
			r.State = "met"
			if find(d.Met, t).MinReclaimActive {
				r.State = "met (min-reclaim)"
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func writeExplainTable(w io.Writer, rep *explainReport) {
	d := &rep.Decision
	layout := "single filesystem"
	switch {
	case rep.Filesystems.SplitContainerFs:
		layout = "split (nodefs + imagefs + containerfs)"
	case rep.Filesystems.DedicatedImageFs:
		layout = "dedicated imagefs"
	}
	fmt.Fprintf(w, "Config: %s; layout: %s\n", rep.Config, layout)
	if rep.Profile != "" && rep.Profile != policy.ProfileKubelet {
		fmt.Fprintf(w, "Profile: %s (beyond the kubelet: docs/profile.md)\n", rep.Profile)
	}
	if d.Error != "" {
		fmt.Fprintf(w, "Error: %s\n", d.Error)
	}
	writeNodeMemory(w, d.NodeMemory)

	fmt.Fprintln(w, "\nObservations")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SIGNAL\tAVAILABLE\tCAPACITY\tSTATS TIME")
	for _, o := range d.Observations {
		at := "-"
		if !o.Time.IsZero() {
			at = o.Time.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Signal, o.Available.String(), o.Capacity.String(), at)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nThresholds (met when available < quantity)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SIGNAL\tVALUE\tGRACE\tMIN-RECLAIM\tQUANTITY\tAVAILABLE\tSTATE")
	never := 0
	for _, r := range rep.Thresholds {
		if r.State == "never (no source)" {
			never++
			continue
		}
		state := r.State
		if r.GraceRemaining != "" {
			state = "in grace, " + r.GraceRemaining + " left"
		}
		grace := "hard"
		if r.t.GracePeriod > 0 {
			grace = r.t.GracePeriod.String()
		}
		minReclaim := "-"
		if r.t.MinReclaim != nil {
			minReclaim = r.t.MinReclaim.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Signal, r.t.Value.String(), grace, minReclaim,
			dash(r.Quantity), dash(r.Available), state)
	}
	tw.Flush()
	if never > 0 {
		fmt.Fprintf(w, "  (%d containerfs threshold(s) copied from a missing source never fire)\n", never)
	}

	conds := cli.JoinConditions(d.NodeConditions, ", ", "none")
	fmt.Fprintf(w, "\nNode conditions: %s\n", conds)
	switch {
	case len(d.NodeConditions) == 0:
	case len(d.NodeConditions) == 1 && d.NodeConditions[0] == "MemoryPressure":
		fmt.Fprintln(w, "Admission: new BestEffort pods are rejected unless they tolerate node.kubernetes.io/memory-pressure")
	default:
		fmt.Fprintln(w, "Admission: every new pod is rejected, except critical pods")
	}
	if d.Deciding != nil {
		fmt.Fprintf(w, "Deciding threshold: %s\nResource to reclaim: %s\n", d.Deciding.Threshold.String(), d.Resource)
	}
	if len(d.Reclaim) > 0 {
		fmt.Fprintf(w, "Node-level reclaim first: %s\n", strings.Join(d.Reclaim, ", "))
	}

	if len(d.Candidates) > 0 {
		fmt.Fprintf(w, "\nCandidates for %s (evicted first at the top)\n", d.Signal)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if d.Signal == policy.SignalPIDAvailable {
			fmt.Fprintln(tw, "  #\tPOD\tPRIORITY\tPROCESSES\tSTATS")
		} else {
			fmt.Fprintln(tw, "  #\tPOD\tEXCEEDS\tPRIORITY\tUSAGE\tREQUEST\tUSAGE-REQUEST")
		}
		for _, c := range d.Candidates {
			name := safetext.Escape(c.Pod.Namespace + "/" + c.Pod.Name) // names come from files: no terminal escapes
			if len(name) > 40 {
				name = name[:39] + "…"
			}
			if c.Critical {
				name += " (critical)"
			}
			if d.Signal == policy.SignalPIDAvailable {
				stats := "yes"
				if !c.HasStats {
					stats = "none"
				}
				fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\t%s\n", c.Rank, name, c.Priority, c.ProcessCount, stats)
				continue
			}
			exceeds := "no"
			if !c.HasStats {
				exceeds = "no stats"
			} else if c.ExceedsRequest {
				exceeds = "yes"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\t%s\t%s\n", c.Rank, name, exceeds, c.Priority,
				qstr(c.Usage), qstr(c.Request), qstr(c.UsageMinusRequest))
		}
		tw.Flush()
	}

	fmt.Fprintln(w)
	if len(d.Evictions) == 0 {
		if d.ReclaimSufficient {
			fmt.Fprintln(w, "Evicted: none (node-level reclaim was enough)")
		} else {
			fmt.Fprintln(w, "Evicted: none")
		}
	}
	for _, ev := range d.Evictions {
		kind := "threshold " + ev.Signal
		if ev.Limit {
			kind = "limit " + ev.Signal
		}
		fmt.Fprintf(w, "Evicted: %s, grace period %ds (%s)\n", safetext.Escape(ev.Pod.Namespace+"/"+ev.Pod.Name), ev.GracePeriodSeconds, kind)
		fmt.Fprintf(w, "  message: %s\n", cli.Wrap(safetext.Escape(strings.TrimSpace(ev.Message)), 88, "           "))
		if ev.Condition != nil {
			fmt.Fprintf(w, "  condition: %s=%s reason %s\n", ev.Condition.Type, ev.Condition.Status, ev.Condition.Reason)
		}
		for _, g := range rep.GrowthStops {
			if g.Pod != ev.Pod {
				continue
			}
			how := g.Mechanism
			if how == "" {
				how = g.CgroupV2 + " on cgroup v2,\n" + strings.Repeat(" ", 13) + g.CgroupV1 + " on v1"
			}
			fmt.Fprintf(w, "  evictd run: first stops its %s growth (before SIGTERM and any API call),\n", g.Resource)
			fmt.Fprintf(w, "             with %s\n", how)
		}
	}
	for _, p := range d.SkippedCritical {
		fmt.Fprintf(w, "Not evicted (critical pod): %s\n", safetext.Escape(p.Namespace+"/"+p.Name))
	}
	for _, n := range d.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func qstr(q *resource.Quantity) string {
	if q == nil {
		return "-"
	}
	return q.String()
}
