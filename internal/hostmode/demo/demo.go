// Package demo is "evictd demo": a sandbox cgroup with a memory limit stands
// for a node's pods, evictd's own binary re-executed as scripted memory hogs
// plays five workloads of different QoS classes and priorities, and the real
// agent — kernel wake-ups, the kubelet's decisions, the fork-proof kill —
// evicts them while the story is narrated. Everything it makes is removed at
// the end, also on Ctrl-C or when a hog dies by itself.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/hostmode/trial"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// The sandbox node: a 768 MiB limit on the workloads' parent, a soft
// threshold at 256 MiB available (grace 2 s) and a hard one at 128 MiB.
const (
	limitBytes = 768 << 20
	hardText   = "128Mi"
	softText   = "256Mi"
	softGrace  = "2s"
	maxGrace   = 3 // evictionMaxPodGracePeriod, seconds
	// deadline bounds the whole story (the 60 s, with room for cleanup).
	deadline = 45 * time.Second
	// quietEnd is how long the story waits, with no threshold met and no
	// pressure workload left, before it ends.
	quietEnd = 1500 * time.Millisecond
	// exitJudgeAfter is how long a workload's exit waits for the eviction
	// record that explains it (the longest kill is the 3 s soft grace).
	exitJudgeAfter = 5 * time.Second
)

// role is one workload of the story.
type role struct {
	name     string
	req, lim string // memory
	cpu      bool   // also cpu request = limit, so that req == lim is Guaranteed
	prio     int32
	grace    int64
	critical bool
	script   string
	pressure bool // the story is over once every pressure workload is gone
	story    string
}

var roles = []role{
	{name: "node-agent", req: "32Mi", prio: 0, grace: 5, critical: true, script: "alloc 24Mi; hold",
		story: "critical (a static pod): never evicted"},
	{name: "db", req: "192Mi", lim: "192Mi", cpu: true, prio: 1000, grace: 10, script: "alloc 128Mi; hold",
		story: "Guaranteed, high priority, well under its request"},
	{name: "web", req: "128Mi", prio: 500, grace: 5, script: "alloc 96Mi; hold",
		story: "Burstable, under its request"},
	{name: "batch", prio: 0, grace: 5, script: "alloc 96Mi; hold",
		story: "BestEffort, steady"},
	{name: "leaky", prio: 0, grace: 3, script: "ignore-term; sleep 2s; ramp 160Mi 80Mi; hold", pressure: true,
		story: "BestEffort, leaks 160Mi from t=2s and ignores SIGTERM"},
	{name: "cache", req: "64Mi", prio: 500, grace: 5, script: "alloc 64Mi; sleep 10s; ramp 416Mi 128Mi; hold", pressure: true,
		story: "Burstable, grows from its 64Mi request to 480Mi at 128Mi/s from t=10s"},
}

// Eviction is one line of the summary.
type Eviction struct {
	Workload           string  `json:"workload"`
	Signal             string  `json:"signal"`
	DetectionLatencyMs float64 `json:"detectionLatencyMs"`
	GracePeriodSeconds int64   `json:"gracePeriodSeconds"`
	// Trigger is what ran the deciding synchronize (not in the issue's
	// minimal shape, but it says which wake-up detected the crossing).
	Trigger string `json:"trigger"`
}

// Summary is the demo's result.
type Summary struct {
	Evictions      []Eviction `json:"evictions"`
	KernelOOMKills uint64     `json:"kernelOOMKills"`
	// Interrupted: the story was cut short (Ctrl-C, SIGTERM or the deadline).
	Interrupted bool `json:"interrupted,omitempty"`
}

// Options configure Run.
type Options struct {
	Out io.Writer // narration
	Exe string    // the binary to re-execute as hogs (os.Executable())
	// DecisionLog, when set, gets the agent's decision records, as
	// `evictd run --decision-log` writes them (for `evictd-tools report`).
	DecisionLog *agent.DecisionLog
}

type narrator struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (n *narrator) say(format string, a ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "[%5.1fs] "+format+"\n", append([]any{time.Since(n.start).Seconds()}, a...)...)
}

// narratorWriter writes through the narrator's lock, so that the agent's
// log lines and the narration never interleave mid-line.
type narratorWriter struct{ n *narrator }

func (w narratorWriter) Write(p []byte) (int, error) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	return w.n.w.Write(p)
}

func (n *narrator) raw(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	io.WriteString(n.w, s)
}

// Config is the demo's kubelet configuration.
func Config() *kubeletconfigv1beta1.KubeletConfiguration {
	mg := int32(maxGrace)
	return &kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{"memory.available": hardText},
		// The kubelet copies only hard memory.available thresholds to
		// allocatableMemory.available, so the soft one names it directly.
		EvictionSoft:                     map[string]string{"allocatableMemory.available": softText},
		EvictionSoftGracePeriod:          map[string]string{"allocatableMemory.available": softGrace},
		EvictionMaxPodGracePeriod:        mg,
		EvictionPressureTransitionPeriod: metav1.Duration{Duration: 5 * time.Second},
	}
}

// File is the demo's workloads file.
func File() *workload.File {
	f := &workload.File{}
	for _, r := range roles {
		s := workload.Spec{Name: r.name, Cgroup: r.name, Priority: r.prio, Critical: r.critical}
		g := r.grace
		s.TerminationGracePeriodSeconds = &g
		if r.req != "" {
			s.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(r.req)}
		}
		if r.lim != "" {
			s.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(r.lim)}
		}
		if r.cpu {
			s.Requests[v1.ResourceCPU] = resource.MustParse("100m")
			s.Limits[v1.ResourceCPU] = resource.MustParse("100m")
		}
		f.Workloads = append(f.Workloads, s)
	}
	return f
}

// Run plays the story. It returns the summary, or an error when the sandbox
// cannot be made. Cleanup happens before it returns, whatever happened.
func Run(ctx context.Context, o Options) (sum *Summary, err error) {
	n := &narrator{w: o.Out, start: time.Now()}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr, err := trial.New(ctx, trial.Options{Name: fmt.Sprintf("/evictd-demo-%d", os.Getpid()), Limit: limitBytes, Exe: o.Exe})
	if err != nil {
		return nil, err
	}
	cleanup := func() {
		if cerr := tr.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}
	defer func() {
		if p := recover(); p != nil {
			cleanup()
			panic(p)
		}
	}()
	defer cleanup()
	sb := tr.Sandbox

	kc := Config()
	cfg, err := policy.ConfigFromKubelet(kc)
	if err != nil {
		return nil, err
	}
	// A quiet logger: the narration tells the story; warnings still show.
	// Through the narrator's lock: the agent logs from its own goroutine.
	log := slog.New(slog.NewTextHandler(narratorWriter{n}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	a, err := tr.NewAgent(trial.AgentOptions{Options: hostmode.Options{
		Options: agent.Options{Policy: cfg, Log: log, DecisionLog: o.DecisionLog,
			Wakeups: agent.WakeupOptions{MemcgNotification: agent.Auto, PSI: agent.Off, MemoryEvents: agent.Auto, FastPoll: agent.Auto}},
		Workloads: File(), GoneTimeout: 5 * time.Second,
		BeforeEvict: func(trig agent.Trigger, d policy.Decision, act agent.Action) {
			narrateDecision(n, trig, d, act)
		},
	}, Records: 64})
	if err != nil {
		return nil, err
	}
	h, recs := a.Host, a.Records()
	mode := "v1 (memory controller on the v1 hierarchy)"
	if h.V2 {
		mode = "v2 (unified)"
	}
	n.raw(fmt.Sprintf("evictd demo — cgroup %s\n", mode))
	n.raw(fmt.Sprintf("A sandbox cgroup %s with a %s memory limit stands for the node's pods.\n", h.Root, q(limitBytes)))
	n.raw(fmt.Sprintf("Thresholds (the kubelet's, applied to the pods' parent as allocatableMemory.available):\n"+
		"  hard  available < %s           → evict at once with a 1s kill grace period\n"+
		"  soft  available < %s, for %s → evict with grace min(%ds, the pod's terminationGracePeriodSeconds)\n",
		hardText, softText, softGrace, maxGrace))
	n.raw("Workloads (evictd re-executed as scripted memory hogs):\n")
	tw := tabwriter.NewWriter(o.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tQOS\tPRIORITY\tREQUEST\tLIMIT\tGRACE\tSTORY")
	for _, w := range File().Workloads {
		p := workloadPod(w)
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%ds\t%s\n", w.Name, policy.PodQOS(p, policy.DefaultFeatureGates()), w.Priority,
			orDash(w.Requests.Memory()), orDash(w.Limits.Memory()), *w.TerminationGracePeriodSeconds, roleOf(w.Name).story)
	}
	tw.Flush()

	// Start the hogs, each in its cgroup.
	children := map[string]sandbox.Cgroup{}
	exited := make(chan string, len(roles))
	for _, r := range roles {
		c, err := tr.Child(r.name)
		if err != nil {
			return nil, err
		}
		children[r.name] = c
	}
	for _, r := range roles {
		hg, err := tr.StartHog(r.script, children[r.name])
		if err != nil {
			return nil, fmt.Errorf("start workload %s: %w", r.name, err)
		}
		// Never blocks: room for every hog, and Close waits for them all.
		go func(name string) { <-hg.Done(); exited <- name }(r.name)
	}
	// Wait until every hog has joined its cgroup, so the first synchronize
	// sees all of them.
	for t := time.Now(); time.Since(t) < 5*time.Second; time.Sleep(10 * time.Millisecond) {
		if ws, _ := h.Pods.Workloads(); len(ws) == len(roles) {
			break
		}
	}
	n.raw(fmt.Sprintf("Wake-ups: %s; the periodic timer runs every 10s as in the kubelet.\n\n", wakeupText(h)))

	a.Start()

	sum = &Summary{Evictions: []Eviction{}}
	evicted := map[string]bool{}
	killed := map[string]bool{}
	var lastMet string
	var lastOOM uint64
	pendingExit := map[string]time.Time{}
	quietSince := time.Time{}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	timeout := time.After(deadline)
	pressureLeft := func() bool {
		for _, r := range roles {
			if r.pressure && !evicted[r.name] && !killed[r.name] {
				return true
			}
		}
		return false
	}
loop:
	for {
		select {
		case <-ctx.Done():
			n.say("interrupted: cleaning up")
			sum.Interrupted = true
			break loop
		case <-timeout:
			n.say("the story took longer than %s: stopping", deadline)
			sum.Interrupted = true
			break loop
		case name := <-exited:
			// An evicted workload exits before the agent reports the
			// eviction (the record follows the kill): judge later.
			if !evicted[name] {
				pendingExit[name] = time.Now()
			}
		case <-ticker.C:
			for name, at := range pendingExit {
				if time.Since(at) < exitJudgeAfter {
					continue
				}
				delete(pendingExit, name)
				if evicted[name] {
					continue
				}
				killed[name] = true
				if k := oomKills(sb); k > lastOOM {
					n.say("%s was killed by the kernel OOM killer (evictd was too late)", name)
					lastOOM = k
				} else {
					n.say("%s exited by itself (a crash, not an eviction)", name)
				}
			}
			n.say("%s", status(h, sb))
			if !pressureLeft() && lastMet == "" {
				if quietSince.IsZero() {
					quietSince = time.Now()
				} else if time.Since(quietSince) >= quietEnd {
					break loop
				}
			}
		case r := <-recs:
			met := metText(r.Decision, false)
			trig := r.Trigger.Reason
			if r.Trigger.Source != "" {
				trig += " (" + r.Trigger.Source + ")"
			}
			if met != lastMet {
				if met == "" {
					n.say("recovered: no threshold met — %s", availText(r.Decision))
				} else {
					n.say("%s → %s", trig, metText(r.Decision, true))
				}
				lastMet = met
				quietSince = time.Time{}
			}
			for _, act := range r.Actions {
				if act.Kind != "evict" {
					continue
				}
				narrateKill(n, act)
				if act.Error == "" {
					evicted[act.Pod.Name] = true
					delete(pendingExit, act.Pod.Name)
					sum.Evictions = append(sum.Evictions, Eviction{Workload: act.Pod.Name, Signal: act.Signal,
						DetectionLatencyMs: float64(r.TriggerToDecision.Microseconds()) / 1000,
						GracePeriodSeconds: int64(act.Grace / time.Second), Trigger: trig})
				}
			}
		}
	}
	a.Stop()
	sum.KernelOOMKills = oomKills(sb)
	return sum, nil
}

func roleOf(name string) role {
	for _, r := range roles {
		if r.name == name {
			return r
		}
	}
	return role{}
}

func workloadPod(s workload.Spec) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main",
		Resources: v1.ResourceRequirements{Requests: s.Requests, Limits: s.Limits}}}}}
}

func orDash(q *resource.Quantity) string {
	if q == nil || q.IsZero() {
		return "-"
	}
	return q.String()
}

func q(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// mi formats bytes as MiB with no fraction, for the live lines.
func mi(b int64) string { return fmt.Sprintf("%dMi", b>>20) }

func wakeupText(h *hostmode.Host) string {
	if h.V2 {
		return "memory.events watch and an adaptive fast poll (10ms…1s) of the pods' parent (cgroup v2 has no memcg thresholds)"
	}
	return "memcg threshold eventfds (cgroup.event_control) at each threshold, registered at the first synchronize"
}

// status is the once-a-second line: available memory and each workload's usage.
func status(h *hostmode.Host, sb *sandbox.Sandbox) string {
	parent, err := h.Collector.ReadCgroupMemory(sb.Parent.Rel, true)
	if err != nil {
		return "cannot read the sandbox: " + err.Error()
	}
	avail := int64(limitBytes) - int64(parent.WorkingSet)
	var parts []string
	for _, c := range sb.Children() {
		m, err := h.Collector.ReadCgroupMemory(c.Rel, false)
		if err != nil || m.WorkingSet < 1<<20 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", c.Name, mi(int64(m.WorkingSet))))
	}
	return fmt.Sprintf("available %s of %s %s | %s", mi(avail), mi(limitBytes), bar(avail), strings.Join(parts, ", "))
}

func bar(avail int64) string {
	const width = 24
	n := int(avail * width / limitBytes)
	n = max(0, min(width, n))
	return "[" + strings.Repeat("#", width-n) + strings.Repeat(".", n) + "]"
}

// metText lists the memory thresholds met; with detail, the grace left and
// the available amount (which change every synchronize) too.
func metText(d policy.Decision, detail bool) string {
	var parts []string
	for _, m := range d.Met {
		if m.Threshold.Signal != policy.SignalAllocatableMemoryAvailable && m.Threshold.Signal != policy.SignalMemoryAvailable {
			continue
		}
		kind := "hard"
		if !m.Threshold.Hard() {
			kind = "soft"
			for _, g := range d.InGrace {
				if !detail {
					break
				}
				if g.Threshold.String() == m.Threshold.String() && g.GraceRemaining > 0 {
					kind += fmt.Sprintf(", %s of grace left", g.GraceRemaining.Round(100*time.Millisecond))
				}
			}
		}
		avail := ""
		if m.Available != nil && detail {
			avail = " (available " + mi(m.Available.Value()) + ")"
		}
		parts = append(parts, fmt.Sprintf("%s<%s met [%s]%s", m.Threshold.Signal, m.Threshold.Value.String(), kind, avail))
	}
	sort.Strings(parts)
	s := strings.Join(parts, "; ")
	if len(d.NodeConditions) > 0 && s != "" {
		s += "; node condition " + fmt.Sprint(d.NodeConditions)
	}
	return s
}

func availText(d policy.Decision) string {
	for _, o := range d.Observations {
		if o.Signal == policy.SignalAllocatableMemoryAvailable {
			return "available " + mi(o.Available.Value())
		}
	}
	return ""
}

// narrateDecision tells the decision as it is made, before the kill.
func narrateDecision(n *narrator, trig agent.Trigger, d policy.Decision, act agent.Action) {
	var b strings.Builder
	kind := "hard threshold"
	if d.Deciding != nil && !d.Deciding.Threshold.Hard() {
		kind = "soft threshold, grace period over:"
	}
	fmt.Fprintf(&b, "EVICT %s — %s %s, decided %.1fms after the %s\n", act.Pod.Name, kind,
		decidingText(d), float64(time.Since(trig.At).Microseconds())/1000, triggerText(trig))
	b.WriteString("         ranking (the kubelet's: usage above request?, then priority, then usage − request):\n")
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "           #\tWORKLOAD\tEXCEEDS REQUEST\tPRIORITY\tUSAGE\tREQUEST\t")
	for _, c := range d.Candidates {
		note := ""
		if c.Critical {
			note = "critical: never evicted"
		}
		fmt.Fprintf(tw, "           %d\t%s\t%v\t%d\t%s\t%s\t%s\n", c.Rank, c.Pod.Name, c.ExceedsRequest, c.Priority, qs(c.Usage), qs(c.Request), note)
	}
	tw.Flush()
	fmt.Fprintf(&b, "         message: %s\n", strings.TrimSpace(act.Message))
	fmt.Fprintf(&b, "         SIGTERM to every process of %s; what is left at the %s grace deadline is killed with no fork race (v1 freezer, v2 cgroup.kill)", act.Pod.Name, act.Grace)
	n.say("%s", b.String())
}

// narrateKill tells how the kill went, once it is over.
func narrateKill(n *narrator, act agent.Action) {
	switch {
	case act.Error != "":
		n.say("kill of %s FAILED: %s", act.Pod.Name, act.Error)
	case act.Result != nil:
		how := "it ended on SIGTERM"
		if strings.Contains(act.Result.Method, "SIGKILL") || strings.Contains(act.Result.Method, "cgroup.kill") {
			how = "it ignored SIGTERM: " + act.Result.Method + " at the grace deadline"
		}
		n.say("%s is gone after %s (%s)", act.Pod.Name, act.Result.Took.Round(time.Millisecond), how)
	}
}

func decidingText(d policy.Decision) string {
	if d.Deciding == nil {
		return "?"
	}
	s := string(d.Deciding.Threshold.Signal) + "<" + d.Deciding.Threshold.Value.String()
	if d.Deciding.Available != nil {
		s += " (available " + mi(d.Deciding.Available.Value()) + ")"
	}
	return s
}

func triggerText(t agent.Trigger) string {
	switch t.Reason {
	case "wake":
		return "wake-up from " + t.Source
	case "grace":
		return "grace period ran out"
	case "after-eviction":
		return "previous eviction finished"
	}
	return t.Reason
}

func qs(q *resource.Quantity) string {
	if q == nil || q.IsZero() {
		return "-"
	}
	return mi(q.Value())
}

// oomKills counts the kernel OOM kills in the sandbox.
func oomKills(sb *sandbox.Sandbox) uint64 {
	o, _ := sb.OOM()
	return o.Kills
}
