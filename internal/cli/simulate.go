package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/safetext"
	"github.com/evictd/evictd/internal/scenario"
)

func init() {
	Register(Command{
		Name:    "simulate",
		Summary: "replay a timeline of stats and pods through the kubelet's eviction policy",
		Run:     runSimulate,
	})
}

const simulateHelp = `
Replays a scenario — a kubelet configuration and a timeline of /stats/summary
snapshots and pod lists — through evictd's policy engine, which decides as the
kubelet v1.37.2 eviction manager does, one synchronize per step. A pod evicted
in a step is gone from the later steps. Use it to tune thresholds before a
rollout, or to replay an incident.

Scenario file (YAML or JSON; objects may be given inline or as a path relative
to the scenario file):

  kubeletConfig: {...}   # a KubeletConfiguration, or a path
  filesystems: {dedicatedImageFs: false, splitContainerFs: false}   # optional
  steps:
  - at: 0s               # Go duration since the start (2026-01-01T00:00:00Z)
    summary: {...}       # a /stats/summary document, or a path
    pods: {...}          # PodList, list of Pods or a Pod, or a path;
                         # required in the first step, carried over when absent
    afterReclaim: {...}  # optional: the Summary seen after node-level reclaim
                         # (container/image GC) ran; absent = it freed nothing

Output: per step the node conditions, node-level reclaim run, and evicted pods
with grace period and message. -o json prints
{"steps":[{"at","nodeConditions","evicted":[{"namespace","name",
"gracePeriodSeconds","message"}],"nodeReclaim"}]}; -v adds every decision.

--plot FILE (evictd-tools simulate only: the agent binary evictd links no
plotting stack) also draws the timeline, SVG or PNG by the file's extension: one
panel per signal that has a threshold (the observed available amount as
steps, each value held until the next step, against each threshold's
quantity; the y axis named with its unit: bytes in Ki/Mi/Gi, counts, or % of
capacity when every threshold of the signal is a percentage; soft thresholds
dashed, their grace periods shaded; legends name thresholds as the config
writes them, e.g. pid.available<1000, nodefs.available<10% (soft, 90s)), the
node conditions as bands, and each eviction as a marker labelled with the
pod and its reason — or numbered, with the labels in the legend, where they
do not fit beside it. The x axis is the scenario's own steps; a one-step
scenario is drawn across the width (docs/plot.md).

Example:
  evictd simulate --scenario testdata/scenarios/memory-pressure-soft-then-hard.yaml
  evictd-tools simulate --scenario testdata/scenarios/memory-pressure-soft-then-hard.yaml --plot out.svg
  evictd simulate --scenario testdata/scenarios/profile-loop-breaker.yaml --profile extended
`

// Plotter draws simulate --plot's picture. Only evictd-tools sets it: the
// agent binary links no plotting stack (cmd/evictd's depaware test), and its
// simulate --plot names the tools command to run instead.
var Plotter interface {
	// CheckPath fails for a file name the plotter cannot draw to (its
	// extension), before the scenario runs.
	CheckPath(path string) error
	// Plot draws the scenario's timeline to path, whole or not at all.
	Plot(path string, s *scenario.Scenario, res *scenario.Result) error
}

func runSimulate(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("simulate", "--scenario FILE [-o table|json] [-v] [--plot FILE.svg|FILE.png]", simulateHelp, stdout, stderr)
	RegisterInputFlags(fs)
	path := fs.String("scenario", "", "scenario file (YAML or JSON), required")
	out := fs.StringP("output", "o", "table", "output format: table or json")
	verbose := fs.BoolP("verbose", "v", false, "include each step's full decision (json) or the deciding signal and notes (table)")
	plotPath := fs.String("plot", "", "also draw the timeline to this file (.svg or .png)")
	profile := RegisterProfileFlag(fs)
	if done, code := ParseFlags(fs, args, stdout); done {
		return code
	}
	if *path == "" {
		fmt.Fprintln(stderr, Name+" simulate: --scenario is required (see --help)")
		return ExitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s simulate: unexpected argument %q\n", Name, fs.Arg(0))
		return ExitError
	}
	if *out != "table" && *out != "json" {
		fmt.Fprintf(stderr, "%s simulate: -o %q: want table or json\n", Name, *out)
		return ExitError
	}
	if *plotPath != "" {
		if Plotter == nil {
			fmt.Fprintf(stderr, "%s simulate: --plot is drawn by the tools binary (make build puts it in bin/), which carries the plotting stack the agent leaves out: run 'evictd-tools simulate --scenario %s --plot %s'\n", Name, *path, *plotPath)
			return ExitError
		}
		if err := Plotter.CheckPath(*plotPath); err != nil {
			fmt.Fprintln(stderr, Name+" simulate: --plot", err)
			return ExitError
		}
	}
	s, err := scenario.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(stderr, Name+" simulate:", err)
		return ExitError
	}
	showDecisions := *verbose && *out == "json"
	res, err := scenario.Run(s, scenario.RunOptions{Verbose: showDecisions || *plotPath != "", Profile: profile.Profile()})
	if err != nil {
		fmt.Fprintf(stderr, "%s simulate: %s: %v\n", Name, *path, err)
		return ExitError
	}
	if *plotPath != "" {
		if err := Plotter.Plot(*plotPath, s, res); err != nil {
			fmt.Fprintf(stderr, "%s simulate: --plot %s: %v\n", Name, *plotPath, err)
			return ExitError
		}
		if !showDecisions {
			for i := range res.Steps {
				res.Steps[i].Decision = nil
			}
		}
	}
	if *out == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // messages and thresholds hold '<' and quotes
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, Name+": writing JSON:", err)
			return ExitError
		}
		return ExitOK
	}
	writeSimulateTable(stdout, res, *verbose)
	return ExitOK
}

// JoinConditions spells node conditions for a table or a line, none when
// there are none.
func JoinConditions(conds []v1.NodeConditionType, sep, none string) string {
	if len(conds) == 0 {
		return none
	}
	cs := make([]string, len(conds))
	for i, c := range conds {
		cs[i] = string(c)
	}
	return strings.Join(cs, sep)
}

func writeSimulateTable(w io.Writer, res *scenario.Result, verbose bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tCONDITIONS\tRECLAIM\tEVICTED\tGRACE")
	for _, st := range res.Steps {
		conds := JoinConditions(st.NodeConditions, ",", "-")
		reclaim := "-"
		if len(st.NodeReclaim) > 0 {
			reclaim = strings.Join(st.NodeReclaim, ",")
			if st.ReclaimSufficient {
				reclaim += " (enough)"
			}
		}
		if len(st.Evicted) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\n", st.At, conds, reclaim)
		}
		for i, ev := range st.Evicted {
			at, c, r := st.At, conds, reclaim
			if i > 0 {
				at, c, r = "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%ds\n", at, c, r, safetext.Escape(ev.Namespace+"/"+ev.Name), ev.GracePeriodSeconds)
		}
	}
	tw.Flush()
	for _, st := range res.Steps {
		if st.Error != "" {
			fmt.Fprintf(w, "\n%s: the kubelet's synchronize failed: %s\n", st.At, st.Error)
		}
	}
	// Messages are long; list them after the table so it stays narrow.
	first := true
	for _, st := range res.Steps {
		for _, ev := range st.Evicted {
			if first {
				fmt.Fprintln(w, "\nMessages:")
				first = false
			}
			fmt.Fprintf(w, "  %s %s: %s\n", st.At, safetext.Escape(ev.Namespace+"/"+ev.Name), safetext.Escape(strings.TrimSpace(ev.Message)))
		}
		if verbose && st.Signal != "" {
			fmt.Fprintf(w, "  %s deciding signal: %s\n", st.At, st.Signal)
		}
	}
}
