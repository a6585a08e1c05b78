package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/hostmode/demo"
	"github.com/evictd/evictd/internal/workload/hog"
)

func init() {
	// The demo's workloads are this binary re-executed as memory hogs: when
	// the hog environment is set, become the hog before anything else runs.
	hog.MaybeRun()
	cli.Register(cli.Command{
		Name:    "demo",
		Summary: "watch evictd evict scripted workloads in a sandbox cgroup (needs root; about 20 s)",
		Run:     runDemo,
	})
}

const demoHelp = `
Plays a short, real story on this host: a sandbox cgroup with a 768Mi memory
limit stands for a node's pods, six workloads (evictd itself re-executed as
scripted memory hogs) of different QoS classes and priorities run in it, and
the real agent — kernel wake-ups, the kubelet v1.37.2 eviction decisions, the
fork-proof kill — keeps the sandbox out of the kernel OOM killer's reach,
narrating signals against thresholds, which wake-up fired, the ranking, each
eviction and why, and the recovery. It ends with a summary: the detection
latency of each eviction and whether the kernel OOM killer fired.

It needs root (it creates cgroups) and works on cgroup v1 and v2. It takes
about 20 seconds (60 at most) and removes every cgroup and process it made,
also on Ctrl-C or when a workload dies by itself.

--decision-log FILE keeps the agent's decision records, as 'evictd run
--decision-log' writes them (appended); 'evictd-tools report FILE' turns them into
one HTML page. Without root there is no agent and so no log.

Example (as root):
  evictd demo
  evictd demo -o json | jq .evictions
  evictd demo --decision-log demo.jsonl && evictd-tools report demo.jsonl -o demo.html
`

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("demo", "[-o text|json] [--decision-log FILE]", demoHelp, stdout, stderr)
	out := fs.StringP("output", "o", "text", "output: text (the narrated story and a summary table) or json (the story on stderr, the summary as one JSON object on stdout)")
	logPath := fs.String("decision-log", "", "append the agent's decision records (JSON lines) to this file, for evictd-tools report")
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "evictd demo: unexpected argument %q\n", fs.Arg(0))
		return cli.ExitError
	}
	if *out != "text" && *out != "json" {
		fmt.Fprintf(stderr, "evictd demo: -o %q: want text or json\n", *out)
		return cli.ExitError
	}
	narration := stdout
	if *out == "json" {
		narration = stderr
	}
	if os.Geteuid() != 0 {
		if *logPath != "" {
			fmt.Fprintln(stderr, "evictd demo: --decision-log: without root the story is simulated and no agent runs, so there is no decision log")
			return cli.ExitError
		}
		fmt.Fprintln(stderr, "evictd demo: needs root to create cgroups (run it as root for the real thing); telling the same story through the policy engine instead (as evictd simulate does):")
		sum, err := demo.Simulate(narration)
		if err != nil {
			fmt.Fprintf(stderr, "evictd demo: %v\n", err)
			return cli.ExitError
		}
		return printDemoSummary(sum, *out, stdout)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "evictd demo: cannot find its own binary to run the workloads: %v\n", err)
		return cli.ExitError
	}
	opts := demo.Options{Out: narration, Exe: exe}
	if *logPath != "" {
		dl, err := agent.OpenDecisionLog(*logPath, agent.DecisionLogOptions{})
		if err != nil {
			fmt.Fprintf(stderr, "evictd demo: --decision-log: %v\n", err)
			return cli.ExitError
		}
		defer dl.Close()
		opts.DecisionLog = dl
	}
	ctx, stop := cleanupContext()
	defer stop()
	sum, err := demo.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "evictd demo: %v\n", err)
		if sum == nil {
			return cli.ExitError
		}
	}
	code := printDemoSummary(sum, *out, stdout)
	if err != nil {
		return cli.ExitError
	}
	return code
}

func printDemoSummary(sum *demo.Summary, out string, stdout io.Writer) int {
	if out == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(sum); err != nil || sum.Interrupted {
			return cli.ExitError
		}
		return cli.ExitOK
	}
	fmt.Fprintln(stdout, "\nSummary")
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKLOAD\tSIGNAL\tDETECTED AFTER\tGRACE\tTRIGGER")
	for _, e := range sum.Evictions {
		det := fmt.Sprintf("%.1fms", e.DetectionLatencyMs)
		if strings.HasPrefix(e.Trigger, "simulated") {
			det = "n/a (simulated)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%ds\t%s\n", e.Workload, e.Signal, det, e.GracePeriodSeconds, e.Trigger)
	}
	tw.Flush()
	switch {
	case sum.KernelOOMKills > 0:
		fmt.Fprintf(stdout, "  The kernel OOM killer fired %d time(s).\n", sum.KernelOOMKills)
	case sum.Interrupted:
		fmt.Fprintln(stdout, "  The story was cut short; the kernel OOM killer had not fired.")
	default:
		fmt.Fprintln(stdout, "  The kernel OOM killer did not fire: evictd acted first.")
	}
	if sum.Interrupted {
		return cli.ExitError
	}
	return cli.ExitOK
}
