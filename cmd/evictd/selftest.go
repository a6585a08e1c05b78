package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/hostmode/selftest"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
)

func init() {
	cli.Register(cli.Command{
		Name:    "selftest",
		Summary: "prove on this host that evictd evicts before the kernel OOM killer (needs root; under a minute)",
		Run:     runSelftest,
	})
}

const selftestHelp = `
Proves on this host, with this node's own eviction thresholds, that evictd
evicts a workload whose memory grows fast before the kernel OOM killer strikes.

The sandbox: a cgroup whose memory limit stands for the node's memory, sized
from the memory free now: 10% of MemAvailable, at most 1Gi (at least 32Mi, or
the test refuses). The node's hard memory.available threshold (from --config
and the kubelet's eviction flags, as for 'evictd run'; without them the
kubelet's default 100Mi) is scaled to the sandbox by sandbox ÷ MemTotal, and
so is every ramp rate, so that the time from the threshold crossing to the
limit is the node's: 100Mi at 2Gi/s is 50ms on the node and in the sandbox.

Each trial starts the real agent (the kernel wake-ups 'evictd run' uses:
memcg threshold eventfd on cgroup v1; fast poll, memory.events and PSI on v2)
on a fresh sandbox and one workload — evictd re-executed as a memory hog —
that ramps at the scaled rate through the threshold and past the limit. It
reports per trial the latency from the crossing (read every 250µs) to the
decision and to the workload gone, and whether the kernel OOM killer struck
(memory.events oom_kill on v2; memory.oom_control oom_kill and under_oom on
v1). Exit 0 only if evictd won every trial; 1 if the OOM killer won one (or a
trial failed); 2 on an error, a refusal, or an interruption.

It refuses to run when the host is under memory pressure: the node's
memory.available (MemTotal − the root cgroup's working set, as the kubelet
computes it) below a memory.available threshold of the configuration, hard
or soft, or the memory PSI "some avg10" above --max-psi.

It needs root (with CAP_DAC_OVERRIDE, which root has unless a container drops
it: the hierarchy's root directory is read-only even for root) and works on
cgroup v1 and v2. Every cgroup and process it makes
is removed before it exits, also on Ctrl-C or SIGTERM (it then exits 2). On a
Kubernetes node, run it in a pod: --kubernetes, below.

Example (as root):
  evictd selftest
  evictd selftest --config /var/lib/kubelet/config.yaml --json | jq .won
  evictd selftest --eviction-hard 'memory.available<500Mi' --rates 1Gi,4Gi --trials 5
`

func runSelftest(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("selftest", "[flags]", selftestHelp+selftestKubeHelp, stdout, stderr)
	configPath := fs.String("config", "", "the node's KubeletConfiguration file (YAML or JSON); without it the kubelet's defaults apply (with --kubernetes: its path on the node, default "+kube.DefaultKubeletConfig+")")
	rates := fs.String("rates", "100Mi,500Mi,2Gi", "comma-separated memory growth rates per second on the node's scale (each is scaled to the sandbox)")
	trials := fs.Int("trials", 3, "trials per rate")
	maxPSI := fs.Float64("max-psi", selftest.DefaultMaxPSISomeAvg10, "refuse to run when the host's memory PSI some avg10 is above this (percent)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object on stdout (the progress goes to stderr)")
	evFlags := load.RegisterEvictionFlags(fs)
	kf := registerSelftestKubeFlags(fs)
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd selftest: "+format+"\n", a...)
		return cli.ExitError
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	rs, err := parseRates(*rates)
	if err != nil {
		return fail("%v", err)
	}
	if *trials < 1 {
		return fail("--trials %d: want at least 1", *trials)
	}
	if *maxPSI <= 0 || *maxPSI > 100 {
		return fail("--max-psi %g: want a percentage above 0, at most 100", *maxPSI)
	}
	if err := kf.check(fs); err != nil {
		return fail("%v", err)
	}
	if *kf.on {
		// --config names a file on the node, read in the pod; the
		// eviction flags are checked here, on the kubelet's defaults.
		if _, _, err := policyConfig(kubeletconfig.Source{}, evFlags); err != nil {
			return fail("%v", err)
		}
		return runSelftestKube(kf, *configPath, podArgs(fs), *asJSON, stdout, stderr)
	}
	cfg, kc, err := policyConfig(kubeletconfig.Source{File: *configPath}, evFlags)
	if err != nil {
		return fail("%v", err)
	}
	source := kc.Describe()
	if os.Geteuid() != 0 {
		return fail("needs root to create cgroups")
	}
	exe, err := os.Executable()
	if err != nil {
		return fail("cannot find its own binary to run the workload: %v", err)
	}
	progress := stdout
	if *asJSON {
		progress = stderr
	}
	ctx, stop := cleanupContext()
	defer stop()
	o := selftest.Options{Policy: cfg, Source: source, Rates: rs, Trials: *trials, Exe: exe, MaxPSISomeAvg10: *maxPSI}
	p, err := selftest.Prepare(ctx, o)
	if err != nil {
		return fail("%v", err)
	}
	printPlan(progress, p, rs)
	o.Progress = progress
	rep, err := selftest.Run(ctx, o, p)
	if err != nil {
		fail("%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printSelftest(stdout, rep, err)
	}
	switch {
	case rep.Interrupted || err != nil:
		return cli.ExitError
	case !rep.Won:
		return cli.ExitFindings
	}
	return cli.ExitOK
}

func parseRates(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		q, err := resource.ParseQuantity(strings.TrimSpace(f))
		if err != nil || q.Value() <= 0 {
			return nil, fmt.Errorf("--rates: %q is not a positive quantity per second (e.g. 500Mi)", strings.TrimSpace(f))
		}
		out = append(out, q.Value())
	}
	return out, nil
}

func printPlan(w io.Writer, p selftest.Plan, rates []int64) {
	fmt.Fprintf(w, "evictd selftest — cgroup %s\n", p.Cgroup)
	psi := "no PSI on this kernel"
	if p.PSISomeAvg10 != nil {
		psi = fmt.Sprintf("memory PSI some avg10 %.2f%%", *p.PSISomeAvg10)
	}
	fmt.Fprintf(w, "Node: memory.available %s of %s, MemAvailable %s, %s.\n", selftest.BytesText(p.NodeAvailable), selftest.BytesText(p.NodeCapacity), selftest.BytesText(p.MemAvailable), psi)
	fmt.Fprintf(w, "Threshold (%s): memory.available<%s (%s).\n", p.Source, p.NodeThreshold, selftest.BytesText(p.NodeThresholdBytes))
	fmt.Fprintf(w, "Sandbox: %s (10%% of MemAvailable, at most 1Gi) = ×%.4f of the node; threshold there %s.\n", selftest.BytesText(p.SandboxBytes), p.Scale, selftest.BytesText(p.SandboxThresholdBytes))
	var rs []string
	for _, r := range rates {
		rs = append(rs, fmt.Sprintf("%s/s → %s/s", selftest.BytesText(r), selftest.BytesText(int64(float64(r)*p.Scale))))
	}
	fmt.Fprintf(w, "Rates (node → sandbox): %s; %d trial(s) each.\n\n", strings.Join(rs, ", "), p.Trials)
}

func printSelftest(w io.Writer, rep *selftest.Report, runErr error) {
	fmt.Fprintln(w, "\nResults (latencies from the threshold crossing):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RATE\tHERE\tBUDGET\tDECISION\tGONE\tOOM KILLER\tWOKEN BY\tRESULT")
	for _, t := range rep.Trials {
		oom := "no"
		if t.OOM.Struck() {
			oom = fmt.Sprintf("yes (%d kill(s))", t.OOM.Kills)
		}
		res := "evictd won"
		switch {
		case t.Error != "":
			res = "FAILED: " + t.Error
		case !t.Won:
			res = "evictd lost"
		}
		fmt.Fprintf(tw, "  %s/s\t%s/s\t%.0fms\t%s\t%s\t%s\t%s\t%s\n", selftest.BytesText(t.NodeRate), selftest.BytesText(t.SandboxRate), t.BudgetMs,
			selftest.MsText(t.DecisionMs), selftest.MsText(t.GoneMs), oom, cli.Dash(t.Trigger), res)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nPer rate (median / max over the trials with an eviction):")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  RATE\tHERE\tBUDGET\tWON\tOOM KILLER STRUCK\tDECISION\tGONE")
	won := 0
	for _, r := range rep.Rates {
		won += r.Won
		fmt.Fprintf(tw, "  %s/s\t%s/s\t%.0fms\t%d/%d\t%d/%d\t%s / %s\t%s / %s\n", selftest.BytesText(r.NodeRate), selftest.BytesText(r.SandboxRate), r.BudgetMs,
			r.Won, r.Trials, r.OOMFirst, r.Trials, selftest.MsText(r.DecisionMedianMs), selftest.MsText(r.DecisionMaxMs), selftest.MsText(r.GoneMedianMs), selftest.MsText(r.GoneMaxMs))
	}
	tw.Flush()
	switch {
	case runErr != nil:
		fmt.Fprintf(w, "Stopped after %d trial(s): %v\n", len(rep.Trials), runErr)
	case rep.Interrupted:
		fmt.Fprintf(w, "Interrupted after %d trial(s); everything it made is removed.\n", len(rep.Trials))
	case rep.Won:
		fmt.Fprintf(w, "evictd won all %d trials: it evicted before the kernel OOM killer struck.\n", len(rep.Trials))
	default:
		fmt.Fprintf(w, "evictd won %d of %d trials.\n", won, len(rep.Trials))
	}
}
