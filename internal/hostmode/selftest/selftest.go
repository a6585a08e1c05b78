// Package selftest is "evictd selftest": it proves on the live host that
// evictd, with the node's own eviction thresholds, evicts a workload whose
// memory grows fast before the kernel OOM killer strikes.
//
// Each trial (internal/hostmode/trial) is a throwaway sandbox cgroup whose
// memory limit stands for the node's memory, the real agent (hostmode.New,
// the wake-ups evictd run uses by default) with the node's hard
// memory.available threshold scaled to the sandbox, and one workload — the
// evictd binary re-executed as a memory hog (internal/workload/hog), as in
// evictd demo — that ramps through the threshold and past the limit. A
// watcher reads the sandbox's working set to time the crossing; the agent's record
// times the decision and the kill; the sandbox's OOM counters say whether the
// kernel OOM killer struck. Everything a trial makes is removed before the
// next one starts, also when the context is cancelled (Ctrl-C).
//
// On a Kubernetes node the same test runs in a pod (evictd selftest
// --kubernetes): StartPod, PodRun.Wait and PodRun.Delete in pod.go.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/hostmode/trial"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// Sizing of the sandbox: a small share of the memory free now, so that the
// test cannot push the node itself towards its thresholds.
const (
	// SandboxShare is the share of MemAvailable the sandbox may take.
	SandboxShare = 0.10
	// MaxSandboxBytes caps the sandbox: a bigger one only makes the
	// trials longer (the ramps are scaled to it).
	MaxSandboxBytes = 1 << 30
	// MinSandboxBytes is the smallest sandbox worth a trial: below it the
	// hog's own runtime is a large part of the limit.
	MinSandboxBytes = 32 << 20
	// DefaultMaxPSISomeAvg10 is the host's memory PSI "some avg10" (percent
	// of the last 10 s in which some task stalled on memory) above which the
	// host counts as under memory pressure and the self-test refuses to run.
	DefaultMaxPSISomeAvg10 = 10.0
	// PSISettle is how long Prepare waits for the memory PSI to fall back
	// under the bound before it refuses. PSI is a moving average: evictd's
	// own growth stop throttles a victim (cgroup v2 memory.high), which
	// counts as a memory stall, so right after a self-test (or any eviction
	// of a throttled workload) "some avg10" reads high for about ten
	// seconds while the host is fine; a host under real pressure stays high.
	PSISettle = 30 * time.Second
)

// The trial's timing, in the sandbox's own scale.
const (
	// settle lets the agent's first synchronize register the kernel
	// wake-ups before the hog allocates.
	settle = 300 * time.Millisecond
	// leadTime is how long the ramp runs before it crosses the threshold,
	// so the crossing is made at the ramp's steady rate.
	leadTime = 500 * time.Millisecond
	// minLead keeps the ramp's start clear of the threshold at slow rates,
	// for the hog runtime's own few pages charged after it joins.
	minLead = 2 << 20
	// trialTimeout bounds one trial: the slowest ramp takes a few seconds.
	trialTimeout = 60 * time.Second
	// recordWait is how long a hog's exit waits for the eviction record
	// that explains it (the record follows the kill's check that the
	// cgroup is empty): trial.Trial.Wait's.
	recordWait = 15 * time.Second
	// DefaultWatchEvery is how often the crossing watcher reads the
	// sandbox's usage: the precision of the crossing's time.
	DefaultWatchEvery = 250 * time.Microsecond
)

// DefaultRates are the node-level ramp rates tried, in bytes per second.
var DefaultRates = []int64{100 << 20, 500 << 20, 2 << 30}

// Options configure Run.
type Options struct {
	// Policy is the node's configuration (the user's kubelet config and
	// eviction flags, or the kubelet's defaults), unscaled.
	Policy policy.Config
	// Source says where Policy came from, for the report.
	Source string
	// Rates are node-level ramp rates in bytes per second (DefaultRates).
	Rates []int64
	// Trials per rate (default 3).
	Trials int
	// Exe is the binary re-executed as the hog (os.Executable()); it must
	// call hog.MaybeRun first thing.
	Exe string
	// Progress gets one line per trial as it ends (nil: none).
	Progress io.Writer
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
	// MaxPSISomeAvg10 is the pressure bound (DefaultMaxPSISomeAvg10), and
	// PSISettle how long it may take to fall under it (PSISettle; negative:
	// no wait).
	MaxPSISomeAvg10 float64
	PSISettle       time.Duration
	// WatchEvery is the crossing watcher's period (DefaultWatchEvery).
	WatchEvery time.Duration
	// TimerOnly runs the trials' agent with no kernel wake-up, its 10 s
	// timer alone, as the kubelet polls: a trial it cannot win.
	TimerOnly bool
}

// Plan is what the self-test measured on the host and derived from it.
type Plan struct {
	Cgroup string `json:"cgroup"` // "v1" or "v2"
	// Source is where the node's thresholds came from.
	Source string `json:"source"`
	// NodeCapacity is what the node's memory.available percentages resolve
	// against (MemTotal, as the kubelet's); NodeAvailable the node's
	// memory.available now; MemAvailable /proc/meminfo's.
	NodeCapacity  int64    `json:"nodeCapacityBytes"`
	NodeAvailable int64    `json:"nodeAvailableBytes"`
	MemAvailable  int64    `json:"memAvailableBytes"`
	PSISomeAvg10  *float64 `json:"psiSomeAvg10,omitempty"` // nil: no PSI on this kernel
	// NodeThreshold is the node's hard memory.available threshold as
	// configured ("100Mi", "5%") and NodeThresholdBytes resolved.
	NodeThreshold      string `json:"nodeThreshold"`
	NodeThresholdBytes int64  `json:"nodeThresholdBytes"`
	// SandboxBytes is the sandbox's memory limit; Scale = SandboxBytes /
	// NodeCapacity, applied to the threshold and to every rate, so that
	// the time from the crossing to the limit is the node's.
	SandboxBytes          int64   `json:"sandboxBytes"`
	Scale                 float64 `json:"scale"`
	SandboxThresholdBytes int64   `json:"sandboxThresholdBytes"`
	Trials                int     `json:"trialsPerRate"`
	WatchEvery            string  `json:"watchEvery"`
}

// Trial is one ramp.
type Trial struct {
	NodeRate    int64 `json:"nodeRateBytesPerSecond"`
	SandboxRate int64 `json:"sandboxRateBytesPerSecond"`
	// Budget is the time the ramp takes from the crossing to the limit:
	// what evictd has before the kernel must act.
	BudgetMs float64 `json:"budgetMs"`
	// Latencies from the crossing (as the watcher saw it): to the decision
	// and to the workload gone. nil when there was no eviction.
	DecisionMs *float64 `json:"decisionMs,omitempty"`
	GoneMs     *float64 `json:"goneMs,omitempty"`
	// Trigger is what ran the deciding synchronize ("wake (memcg ...)").
	Trigger string      `json:"trigger,omitempty"`
	OOM     sandbox.OOM `json:"oom"`
	Evicted bool        `json:"evicted"`
	Won     bool        `json:"won"` // evicted, and the OOM killer did not strike
	Error   string      `json:"error,omitempty"`
}

// RateSummary sums up the trials of one rate.
type RateSummary struct {
	NodeRate    int64   `json:"nodeRateBytesPerSecond"`
	SandboxRate int64   `json:"sandboxRateBytesPerSecond"`
	BudgetMs    float64 `json:"budgetMs"`
	Trials      int     `json:"trials"`
	Won         int     `json:"won"`
	OOMFirst    int     `json:"oomKillerStruck"` // trials in which the kernel OOM killer struck
	Failed      int     `json:"failed"`
	// Median and maximum latencies from the crossing, over the trials
	// with an eviction (nil without one).
	DecisionMedianMs *float64 `json:"decisionMedianMs,omitempty"`
	DecisionMaxMs    *float64 `json:"decisionMaxMs,omitempty"`
	GoneMedianMs     *float64 `json:"goneMedianMs,omitempty"`
	GoneMaxMs        *float64 `json:"goneMaxMs,omitempty"`
}

// Report is the self-test's result.
type Report struct {
	Plan   Plan          `json:"plan"`
	Rates  []RateSummary `json:"rates"`
	Trials []Trial       `json:"trials"`
	// Won: evictd won every trial.
	Won         bool `json:"won"`
	Interrupted bool `json:"interrupted,omitempty"`
}

// PressureError is the refusal to run on a host under memory pressure.
type PressureError struct{ Reason string }

func (e *PressureError) Error() string {
	return "the host is under memory pressure, refusing to add to it: " + e.Reason
}

// Prepare measures the host, refuses when it is under memory pressure, and
// sizes the sandbox and the scaled threshold. It changes nothing.
//
// The host is under memory pressure when the node's memory.available (as
// the kubelet computes it: capacity − the root cgroup's working set) is
// below one of the configuration's memory.available thresholds, hard or
// soft (where the kubelet reports MemoryPressure), or when the memory PSI
// "some avg10" is above maxPSI.
func Prepare(ctx context.Context, o Options) (Plan, error) {
	o = o.withDefaults()
	mode, err := sandbox.DetectMode()
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Cgroup: mode.String(), Source: o.Source, Trials: o.Trials, WatchEvery: o.WatchEvery.String()}
	mi, err := host.ReadMeminfo(o.ProcRoot)
	if err != nil {
		return Plan{}, err
	}
	p.MemAvailable = int64(mi.MemAvailable)
	col, err := collect.New(collect.Config{ProcRoot: o.ProcRoot, EvictionOnly: true})
	if err != nil {
		return Plan{}, err
	}
	sum, err := col.Summary(ctx)
	if err != nil {
		return Plan{}, fmt.Errorf("read the node's stats: %w", err)
	}
	eng, err := policy.NewEngine(o.Policy, policy.Filesystems{})
	if err != nil {
		return Plan{}, err
	}
	var hard *policy.ResolvedThreshold
	for _, rt := range eng.Resolve(sum) {
		if rt.Threshold.Signal != policy.SignalMemoryAvailable {
			continue
		}
		p.NodeCapacity = rt.Observation.Capacity.Value()
		p.NodeAvailable = rt.Observation.Available.Value()
		if rt.Observation.Available.Cmp(rt.Quantity) < 0 {
			return p, &PressureError{fmt.Sprintf("memory.available is %s, below the threshold %s (%s)",
				BytesText(p.NodeAvailable), rt.Threshold, BytesText(rt.Quantity.Value()))}
		}
		if rt.Threshold.Hard() && (hard == nil || rt.Quantity.Cmp(hard.Quantity) > 0) {
			hard = &rt
		}
	}
	if hard == nil {
		return p, fmt.Errorf("%s has no hard memory.available threshold: evictd would not evict on memory before the kernel OOM killer, so there is nothing to test", o.Source)
	}
	if err := settlePSI(ctx, o, &p); err != nil {
		return p, err
	}
	if p.NodeCapacity <= 0 {
		return p, fmt.Errorf("the node's memory capacity reads as %d", p.NodeCapacity)
	}
	p.NodeThreshold = hard.Threshold.Value.String()
	p.NodeThresholdBytes = hard.Quantity.Value()
	p.SandboxBytes = SandboxBytes(p.MemAvailable)
	if p.SandboxBytes < MinSandboxBytes {
		return p, fmt.Errorf("MemAvailable is %s: the sandbox (%.0f%% of it) would be %s, below the %s a trial needs",
			BytesText(p.MemAvailable), SandboxShare*100, BytesText(p.SandboxBytes), BytesText(MinSandboxBytes))
	}
	p.Scale = float64(p.SandboxBytes) / float64(p.NodeCapacity)
	p.SandboxThresholdBytes = pageRound(float64(p.NodeThresholdBytes) * p.Scale)
	if p.SandboxThresholdBytes >= p.SandboxBytes/2 {
		return p, fmt.Errorf("the threshold %s is %.0f%% of the node's memory: scaled to the %s sandbox it leaves no room for a workload",
			p.NodeThreshold, 100*float64(p.NodeThresholdBytes)/float64(p.NodeCapacity), BytesText(p.SandboxBytes))
	}
	return p, nil
}

// settlePSI reads the host's memory PSI "some avg10" into p and refuses
// when it stays above the bound for PSISettle, polling every second (a
// high value falling under it is the tail of a stall that has ended).
func settlePSI(ctx context.Context, o Options, p *Plan) error {
	deadline := time.Now().Add(o.PSISettle)
	for {
		ps, err := host.ReadPressure(o.ProcRoot, "memory")
		if errors.Is(err, errors.ErrUnsupported) {
			return nil
		}
		if err != nil {
			return err
		}
		v := ps.Some.Avg10
		p.PSISomeAvg10 = &v
		if v <= o.MaxPSISomeAvg10 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return &PressureError{fmt.Sprintf("memory PSI some avg10 is %.2f%%, above %.2f%% (still after %s)", v, o.MaxPSISomeAvg10, o.PSISettle)}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// SandboxBytes is the sandbox's limit for a host with memAvailable bytes
// free: SandboxShare of it, at most MaxSandboxBytes, in whole MiB.
func SandboxBytes(memAvailable int64) int64 {
	return min(int64(float64(memAvailable)*SandboxShare), MaxSandboxBytes) &^ (1<<20 - 1)
}

func pageRound(b float64) int64 {
	const page = 4096
	return max(page, int64(math.Round(b/page))*page)
}

func (o Options) withDefaults() Options {
	if len(o.Rates) == 0 {
		o.Rates = DefaultRates
	}
	if o.Trials <= 0 {
		o.Trials = 3
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.MaxPSISomeAvg10 == 0 {
		o.MaxPSISomeAvg10 = DefaultMaxPSISomeAvg10
	}
	if o.PSISettle == 0 {
		o.PSISettle = PSISettle
	}
	if o.WatchEvery <= 0 {
		o.WatchEvery = DefaultWatchEvery
	}
	if o.Source == "" {
		o.Source = "kubelet defaults"
	}
	return o
}

// Run runs the trials of plan p (from Prepare with the same options), one
// at a time. A cancelled ctx ends the run with Interrupted set once the
// running trial has been cleaned up. An error ends the run too: the scaled
// configuration could not be built, or a trial could not make or remove its
// sandbox (that trial, if it was not interrupted, is in the report).
func Run(ctx context.Context, o Options, p Plan) (*Report, error) {
	o = o.withDefaults()
	r := &Report{Plan: p, Trials: []Trial{}}
	defer r.summarize()
	cfg, err := sandboxConfig(p)
	if err != nil {
		return r, err
	}
	n := 0
	for _, rate := range o.Rates {
		for range o.Trials {
			if ctx.Err() != nil {
				r.Interrupted = true
				return r, nil
			}
			n++
			t, err := runTrial(ctx, o, p, cfg, rate, n)
			if ctx.Err() != nil {
				// Cut short: not a result.
				r.Interrupted = true
				return r, err
			}
			r.Trials = append(r.Trials, t)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "trial %d/%d: %s\n", n, len(o.Rates)*o.Trials, t.Line())
			}
			if err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// summarize fills r.Rates from r.Trials, in the order the rates ran, and
// r.Won: at least one trial, and evictd won them all.
func (r *Report) summarize() {
	r.Rates = []RateSummary{}
	r.Won = len(r.Trials) > 0
	idx := map[int64]int{}
	var dec, gone [][]float64
	for _, t := range r.Trials {
		i, ok := idx[t.NodeRate]
		if !ok {
			i = len(r.Rates)
			idx[t.NodeRate] = i
			r.Rates = append(r.Rates, RateSummary{NodeRate: t.NodeRate, SandboxRate: t.SandboxRate, BudgetMs: t.BudgetMs})
			dec, gone = append(dec, nil), append(gone, nil)
		}
		s := &r.Rates[i]
		s.Trials++
		r.Won = r.Won && t.Won
		switch {
		case t.Error != "":
			s.Failed++
		case t.Won:
			s.Won++
		}
		if t.OOM.Struck() {
			s.OOMFirst++
		}
		if t.DecisionMs != nil {
			dec[i] = append(dec[i], *t.DecisionMs)
		}
		if t.GoneMs != nil {
			gone[i] = append(gone[i], *t.GoneMs)
		}
	}
	for i := range r.Rates {
		r.Rates[i].DecisionMedianMs, r.Rates[i].DecisionMaxMs = medianMax(dec[i])
		r.Rates[i].GoneMedianMs, r.Rates[i].GoneMaxMs = medianMax(gone[i])
	}
}

// medianMax returns the median (the lower middle of an even count) and the
// maximum, or nils for no values.
func medianMax(v []float64) (med, mx *float64) {
	if len(v) == 0 {
		return nil, nil
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return &v[(len(v)-1)/2], &v[len(v)-1]
}

// sandboxConfig is the agent's configuration in the sandbox: the node's
// hard memory.available threshold scaled, and nothing else — the node's
// disk and pid thresholds are not the test's, and with an evictionHard map
// the kubelet does not add its defaults. enforceNodeAllocatable's default
// [pods] copies it to allocatableMemory.available, which the agent observes
// on the sandbox (its workload root).
func sandboxConfig(p Plan) (policy.Config, error) {
	return policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{
		EvictionHard: map[string]string{string(policy.SignalMemoryAvailable): strconv.FormatInt(p.SandboxThresholdBytes, 10)},
	})
}

// Line is the trial in one line of text.
func (t Trial) Line() string {
	s := fmt.Sprintf("%s/s on the node (%s/s here): ", BytesText(t.NodeRate), BytesText(t.SandboxRate))
	switch {
	case t.Error != "":
		s += "FAILED: " + t.Error
	case t.Won:
		s += fmt.Sprintf("evictd won — decision %s, gone %s after the crossing (budget %.0fms)", MsText(t.DecisionMs), MsText(t.GoneMs), t.BudgetMs)
	case t.OOM.Struck():
		s += fmt.Sprintf("the kernel OOM killer struck (%d kill(s)); evictd's decision %s after the crossing", t.OOM.Kills, MsText(t.DecisionMs))
	default:
		s += "no eviction"
	}
	return s
}

// runTrial runs one ramp at the node-level rate in a fresh sandbox
// (internal/hostmode/trial). The sandbox, the agent and the hog are gone
// when it returns. runErr (also in t.Error) says the sandbox could not be
// made or removed: no further trial should run.
func runTrial(ctx context.Context, o Options, p Plan, cfg policy.Config, rate int64, n int) (t Trial, runErr error) {
	sRate := max(4096, int64(float64(rate)*p.Scale))
	t = Trial{NodeRate: rate, SandboxRate: sRate, BudgetMs: float64(p.SandboxThresholdBytes) / float64(sRate) * 1000}
	fail := func(format string, a ...any) (Trial, error) {
		t.Error = fmt.Sprintf(format, a...)
		t.Won = false
		return t, nil
	}
	// The PID alone does not make the name unique: in a pod (selftest
	// --kubernetes) evictd is always PID 1, and one sandbox an interrupted
	// pod could not remove then blocked every later run with EEXIST.
	tr, err := trial.New(ctx, trial.Options{Name: fmt.Sprintf("/evictd-selftest-%d-%d-%s", os.Getpid(), n, strconv.FormatInt(time.Now().UnixNano(), 36)),
		Limit: p.SandboxBytes, Timeout: trialTimeout, Exe: o.Exe})
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			// The hierarchy's root is read-only (0555) even for root,
			// who writes there through CAP_DAC_OVERRIDE: a container
			// that drops every capability cannot make the sandbox.
			err = fmt.Errorf("%w (creating a cgroup at the hierarchy's root needs root with CAP_DAC_OVERRIDE)", err)
		}
		t, _ = fail("%v", err)
		return t, err
	}
	defer func() {
		if err := tr.Close(); err != nil {
			runErr = fmt.Errorf("cleanup: %w", err)
			t, _ = fail("%v", runErr)
		}
	}()
	c, err := tr.Child("workload")
	if err != nil {
		return fail("%v", err)
	}
	// The wake-ups evictd run has by default.
	wakeups := agent.WakeupOptions{MemcgNotification: agent.Auto, PSI: agent.Auto, MemoryEvents: agent.Auto, FastPoll: agent.Auto}
	if o.TimerOnly {
		wakeups = agent.WakeupOptions{}
	}
	a, err := tr.NewAgent(trial.AgentOptions{Options: hostmode.Options{
		Options:     agent.Options{Policy: cfg, Wakeups: wakeups},
		GoneTimeout: 5 * time.Second,
	}, Keep: trial.EvictionDecided})
	if err != nil {
		return fail("%v", err)
	}
	a.Start()

	// The hog allocates at once up to leadTime of ramp below the
	// crossing, then ramps at the scaled rate through it and past the
	// limit by the threshold again: without an eviction the kernel must
	// OOM-kill it.
	cross := p.SandboxBytes - p.SandboxThresholdBytes
	lead := max(minLead, int64(float64(sRate)*leadTime.Seconds()))
	start := max(0, cross-lead) &^ 4095
	peak := p.SandboxBytes + p.SandboxThresholdBytes
	script := fmt.Sprintf("sleep %s; ramp %d %d; hold", settle, peak-start, sRate)
	if start > 0 {
		script = fmt.Sprintf("sleep %s; alloc %d; ramp %d %d; hold", settle, start, peak-start, sRate)
	}
	h, err := tr.StartHog(script, c)
	if err != nil {
		return fail("start the workload: %v", err)
	}
	// The working set (what the agent's allocatableMemory.available is
	// made of), not the usage, which counts the hog's binary too.
	crossed := tr.Crossing(trial.Watch{Measure: trial.WorkingSet, Every: o.WatchEvery}, uint64(cross))
	out, err := tr.Wait(crossed, h, recordWait)
	if err != nil {
		return fail("%v", err)
	}
	t.OOM = out.OOM
	if out.Kind == trial.OOMKilled {
		return t, nil
	}
	rec := out.Record
	decided := rec.Trigger.At.Add(rec.TriggerToDecision)
	crossT := out.Crossed
	if out.Early {
		// evictd was quicker than the watcher (trial.Outcome.Early): the
		// crossing is taken to be the decision (0 ms, as a wake-up inside
		// the watcher's period counts below).
		crossT = decided
	}
	// A wake-up can come within the watcher's period before it sees the
	// crossing: counted as 0.
	d := ms(max(0, decided.Sub(crossT)))
	t.DecisionMs = &d
	t.Trigger = rec.Trigger.Reason
	if rec.Trigger.Source != "" {
		t.Trigger += " (" + rec.Trigger.Source + ")"
	}
	for _, a := range rec.Actions {
		if a.Kind == "evict" && a.Error == "" && a.Result != nil && a.Result.Gone {
			g := ms(max(0, decided.Add(a.Result.Took).Sub(crossT)))
			t.GoneMs = &g
			t.Evicted = true
		}
	}
	t.Won = t.Evicted && !t.OOM.Struck()
	if !t.Evicted {
		return fail("the eviction did not end the workload: %+v", rec.Actions)
	}
	return t, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// MsText formats milliseconds with one decimal, "-" when there are none.
func MsText(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fms", *v)
}

// BytesText formats bytes as a binary quantity when it is a whole number
// of KiB ("1Gi", "4404Ki"), else in MiB with one decimal.
func BytesText(b int64) string {
	if b%1024 != 0 {
		return fmt.Sprintf("%.1fMi", float64(b)/(1<<20))
	}
	return resource.NewQuantity(b, resource.BinarySI).String()
}
