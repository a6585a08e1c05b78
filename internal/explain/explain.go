// Package explain is "evictd explain"'s decision and report: what the
// kubelet's eviction manager decides on its first synchronize with the
// given inputs, every threshold's state, the growth stop evictd run puts on
// each victim, as a table or as JSON. The command reads the inputs and
// chooses the format (cmd/evictd/explain.go).
package explain

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
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/safetext"
	"github.com/evictd/evictd/internal/scenario"
)

// Input is what explain decides on.
type Input struct {
	// Config describes where the kubelet configuration came from
	// (kubeletconfig.Config.Describe).
	Config  string
	Summary *statsv1alpha1.Summary
	Pods    []*v1.Pod
	// Host is the node's /proc/meminfo figures, or nil when not read.
	Host *policy.HostMemory
	// CgroupVersion is the live node's (1 or 2), or 0: the growth stops
	// are then shown for both versions.
	CgroupVersion int
}

// Explain decides as the kubelet's first synchronize does at the scenario's
// start. When node-level reclaim would run first, it is assumed to free
// nothing, and the eviction that follows is shown.
func Explain(eng *policy.Engine, in Input) Report {
	now := scenario.Start
	d := eng.StepHost(now, policy.Input{Summary: in.Summary, Pods: in.Pods}, in.Host)
	reclaim := d.Reclaim
	if d.ReclaimPending {
		d = eng.ReclaimedHost(now, in.Summary, in.Host)
		d.Notes = append(d.Notes, "node-level reclaim ("+strings.Join(reclaim, ", ")+") assumed to free nothing")
	}
	return Report{Config: in.Config, Profile: eng.Config().Profile.String(), Filesystems: eng.Filesystems(), Thresholds: thresholdRows(eng, &d), Decision: d,
		GrowthStops: growthStopPlans(d, in.CgroupVersion)}
}

// WriteJSON writes the report as one indented JSON object.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages and thresholds hold '<' and quotes
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// Report is what explain shows, its JSON output as it is (-o json).
type Report struct {
	Config string `json:"config"`
	// Profile is the policy profile ("kubelet": the kubelet's decisions).
	Profile     string             `json:"profile"`
	Filesystems policy.Filesystems `json:"filesystems"`
	// Thresholds: every effective threshold with its state on this synchronize.
	Thresholds []ThresholdRow  `json:"thresholds"`
	Decision   policy.Decision `json:"decision"`
	// GrowthStops: what evictd run does to each victim before evicting it
	// (the kubelet does nothing of the kind).
	GrowthStops []GrowthStopPlan `json:"growthStops,omitempty"`
}

// GrowthStopPlan is the growth stop evictd puts on an eviction's victim the
// moment it decides (agent.Holder): the mechanism per cgroup version, or
// this node's when explain reads the live node.
type GrowthStopPlan struct {
	Pod       policy.PodRef `json:"pod"`
	Resource  string        `json:"resource"`
	Mechanism string        `json:"mechanism,omitempty"` // this node's (--live)
	CgroupV1  string        `json:"cgroupV1,omitempty"`
	CgroupV2  string        `json:"cgroupV2,omitempty"`
}

func growthStopPlans(d policy.Decision, version int) []GrowthStopPlan {
	var out []GrowthStopPlan
	for _, ev := range d.Evictions {
		r, ok := agent.GrowthStopResource(ev)
		if !ok {
			continue
		}
		p := GrowthStopPlan{Pod: ev.Pod, Resource: r.String()}
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

// ThresholdRow is one effective threshold and its state on this synchronize.
type ThresholdRow struct {
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

func thresholdRows(eng *policy.Engine, d *policy.Decision) []ThresholdRow {
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
	var rows []ThresholdRow
	for _, t := range eng.Thresholds() {
		r := ThresholdRow{Threshold: t.String(), Signal: string(t.Signal), State: "not-met", t: t}
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

// WriteTable writes the report as explain's table: the observations, the
// thresholds and their states, the node conditions and admission, the
// ranked candidates and the evictions with their messages.
func (rep *Report) WriteTable(w io.Writer) {
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
			cli.Dash(r.Quantity), cli.Dash(r.Available), state)
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

func qstr(q *resource.Quantity) string {
	if q == nil {
		return "-"
	}
	return q.String()
}

// writeNodeMemory prints the node memory figures side by side, marking the
// one the decision used.
func writeNodeMemory(w io.Writer, nm *policy.NodeMemory) {
	if nm == nil {
		return
	}
	fig := func(q *resource.Quantity, none string) string {
		if q == nil {
			return none
		}
		return q.String()
	}
	base := "working set"
	if strings.HasPrefix(nm.Used, "MemAvailable") {
		base = "MemAvailable"
	}
	mark := func(name string) string {
		if name == base {
			return "\t<- decides"
		}
		return ""
	}
	fmt.Fprintln(w, "\nNode memory available")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  kubelet: capacity − working set\t%s%s\n", fig(nm.WorkingSetAvailable, "-"), mark("working set"))
	fmt.Fprintf(tw, "  kernel: MemAvailable (/proc/meminfo)\t%s%s\n", fig(nm.MemAvailable, "not read (--live or --meminfo FILE)"), mark("MemAvailable"))
	if nm.SwapAvailable != nil {
		plus := ""
		if strings.HasSuffix(nm.Used, "free swap") {
			plus = "\t<- added (swap-aware)"
		}
		fmt.Fprintf(tw, "  free swap\t%s%s\n", nm.SwapAvailable.String(), plus)
	}
	tw.Flush()
}
