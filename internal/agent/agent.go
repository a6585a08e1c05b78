// Package agent is evictd's control loop: a periodic timer (the kubelet's
// 10 s) and kernel wake-ups make it observe the node, ask the policy engine
// for a Decision, carry the Decision out, and record it (decision log,
// metrics, one log line per action or state change, nothing per tick).
//
// The agent declares the small interfaces it consumes — the observer (one
// read of the pods and their stats per synchronize), evictor, reclaimer, waker, threshold updater, clock — so the loop
// is tested with fakes and a fake clock. A wiring implements them for one
// kind of node: internal/hostmode for a host whose workloads are cgroups
// under a workload root and internal/kube for a Kubernetes node, beside it
// on the same interfaces. This package
// also holds what every wiring shares: the kernel wake-ups (Wakeups), the
// decision log, the metrics and /healthz, the state file and the SIGHUP
// reloads.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
)

// DefaultInterval is the kubelet's evictionMonitoringPeriod.
const DefaultInterval = 10 * time.Second

// Cleanup wait after an eviction, as the kubelet's waitForPodsCleanup: poll
// every second, give up after 30 s.
const (
	cleanupPoll    = time.Second
	cleanupTimeout = 30 * time.Second
)

// Observer reads the node for the agent. The agent asks it one question per
// synchronize (timer, wake-up, grace, after an eviction alike): Observe,
// answered from one listing of the pod source, with the check for pods
// whose workload is gone already applied to that listing, and the Summary
// read for exactly those pods. The engine's pods and the Summary's pods are
// then the same read's, and no source of a wiring calls another behind the
// agent's back.
type Observer interface {
	Observe(ctx context.Context) Observation
	// Pods lists the active pods only (admitted, not terminal; the same
	// listing and check as Observe's), for the agent's waits between
	// synchronizes, where no stats are needed: the cleanup wait after an
	// eviction and the resume of an interrupted one.
	Pods(ctx context.Context) ([]*v1.Pod, error)
}

// Observation is one read of the node. Either half may fail alone, as the
// kubelet's eviction manager lists its active pods and gets the Summary
// separately: the agent records each failure under its own stage.
type Observation struct {
	// Pods are the active pods (admitted, not terminal); nil when PodsErr.
	Pods    []*v1.Pod
	PodsErr error
	// Summary is the node's stats Summary for Pods (the kubelet's Summary
	// API shape); nil when SummaryErr.
	Summary    *statsv1alpha1.Summary
	SummaryErr error
	// Restat reads the Summary again for the same pods: the engine's
	// second look after node-level reclaim (the kubelet gets the Summary
	// again then, and ranks the pods it listed before). Nil: not read
	// again, the second look sees no stats.
	Restat func(ctx context.Context) (*statsv1alpha1.Summary, error)
}

// Evictor kills a pod with a grace period and returns when it is done (or
// could not be done). In dry-run mode it only describes the kill.
type Evictor interface {
	Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, ev policy.Eviction) (EvictResult, error)
}

// EvictResult is what an Evictor did.
type EvictResult struct {
	Method string        `json:"method"` // e.g. "SIGTERM", "SIGTERM+freezer+SIGKILL", "dry-run"
	Pids   []int         `json:"pids,omitempty"`
	Gone   bool          `json:"gone"`
	DryRun bool          `json:"dryRun,omitempty"`
	Took   time.Duration `json:"tookNs"`
}

// Holder stops an eviction's victim from growing the moment the engine
// chooses it, before the eviction starts (before the API call, before
// SIGTERM): a limit the kernel enforces on the pod's cgroup at its current
// usage (actuate.Killer.Hold). The agent releases the hold when the
// eviction is abandoned (the evictor left the pod untouched, ErrUntouched),
// once the pod is gone, and when it stops.
type Holder interface {
	Hold(pod *v1.Pod, r actuate.Resource) (*actuate.Hold, error)
}

// ErrUntouched is wrapped by an Evictor's error when it did nothing to the
// pod (the API refused the eviction with a 4xx other than a PDB's, a
// workload could not be listed): the eviction is abandoned, and the
// victim's hold is released so that the pod runs on as it was.
var ErrUntouched = errors.New("the pod was left as it was")

// Reclaimer runs node-level reclaim for a signal (the kubelet's container
// and image GC; in host mode, configured hook commands).
type Reclaimer interface {
	Reclaim(ctx context.Context, signal policy.Signal, funcs []string)
}

// MemoryReclaimer asks the kernel to reclaim memory before an eviction on a
// memory signal (the profile's reclaim-first: memory.reclaim on cgroup v2).
type MemoryReclaimer interface {
	ReclaimMemory(ctx context.Context, req policy.MemoryReclaim) (string, error)
}

// HostMemorySource reads the node's /proc/meminfo figures (the profile's
// memavailable; explain and the decision log show them beside the
// kubelet's figure).
type HostMemorySource interface {
	HostMemory(ctx context.Context) (*policy.HostMemory, error)
}

// Waker delivers kernel wake-ups.
type Waker interface {
	C() <-chan notify.Wake
}

// Clock is the agent's time source.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// ThresholdUpdater is told about each Summary, with the engine's thresholds
// resolved against it (policy.Engine.Resolve), so that it can move kernel
// thresholds (v1 memcg eventfd, fast-poll headroom). It rate-limits itself.
type ThresholdUpdater interface {
	Update(now time.Time, s *statsv1alpha1.Summary, resolved []policy.ResolvedThreshold)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock returns the wall clock.
func RealClock() Clock { return realClock{} }

// Config wires an Agent.
type Config struct {
	Engine *policy.Engine
	// Observer reads the node: one Observe per synchronize.
	Observer Observer
	Evictor  Evictor
	// Holder stops a hard eviction's victim from growing at once (nil:
	// the victim grows on until the evictor's kill, as with the kubelet).
	Holder Holder
	// OOM reads the kernel OOM killer's counters (nil: kernel OOM kills go
	// unreported).
	OOM       OOMCounter
	Reclaimer Reclaimer // nil: no node-level reclaim (it frees nothing)
	// MemoryReclaimer carries out the profile's memory reclaim (nil: none,
	// so the eviction follows as in the kubelet).
	MemoryReclaimer MemoryReclaimer
	// Host reads /proc/meminfo for each synchronize (nil: not read).
	Host     HostMemorySource
	Waker    Waker            // nil: timer only
	Updater  ThresholdUpdater // nil: no kernel thresholds
	Clock    Clock            // nil: wall clock
	Interval time.Duration    // 0: DefaultInterval
	Log      *slog.Logger     // nil: slog.Default()
	// DecisionLog receives a record for every synchronize that changed
	// something or acted, and a heartbeat under steady pressure (logFilter),
	// through its queue: never written on the loop.
	DecisionLog *DecisionLog
	Metrics     *Metrics
	// StateFile persists the engine state (and an eviction in progress)
	// when it changed (not in a dry run), off the loop and atomically: a
	// temporary file, fsync, rename, fsync of the directory ("" = none).
	StateFile string
	DryRun    bool
	// StopTimeout is how long, after Run's context ends, an eviction in
	// progress may still run to finish its grace period (0:
	// DefaultStopTimeout; negative: none, the stop cuts the wait and the
	// next start finishes it).
	StopTimeout time.Duration
	// OnRecord, when set, sees every record (also the quiet ones): the
	// demo narrates from it.
	OnRecord func(Record)
	// BeforeEvict, when set, is called with the decision just before each
	// kill starts (a kill can take the whole grace period).
	BeforeEvict func(trig Trigger, d policy.Decision, act Action)
	// UnhealthyAfter is how many synchronizes in a row may fail to observe
	// the node before Healthy fails (0: DefaultUnhealthyAfter).
	UnhealthyAfter int
	// Observed, when set, is called once, on the loop, after the first
	// synchronize that observed the node (listed the workloads and read
	// the stats): start-up is over there.
	Observed func()
}

// Agent runs the loop.
type Agent struct {
	cfg       Config
	log       *slog.Logger
	lastConds []v1.NodeConditionType
	lastMet   []string
	lastErr   string // the Decision's error last logged
	syncs     uint64
	lastSync  atomic.Int64 // unix nanoseconds; read by /healthz
	observed  atomic.Bool  // a synchronize listed the workloads and read the stats; read by /readyz
	faults    faults
	holds     map[types.UID]*actuate.Hold // victims held, until gone or abandoned
	holdsFile *HoldsFile                  // nil without a state file or in a dry run
	oom       oomWatch
	earlyOn   bool       // the early growth stop is installed on the waker (earlystop.go)
	es        earlyState // shared with the waker's hook

	state     *stateWriter // nil without a state file or in a dry run
	logFilter logFilter
	// killCtx is what evictions run under while Run runs (killContext).
	killCtx   context.Context
	evMu      sync.Mutex
	pending   *PendingEviction // the eviction whose grace period runs now
	busyUntil atomic.Int64     // unix nanoseconds; /healthz counts the agent as working until then
	// resumePending is an eviction the last run left unfinished.
	resumePending *PendingEviction
	// soft is the soft eviction whose kill runs in the background while
	// the loop goes on (profile hard-preempts-soft); nil otherwise.
	soft *softKill
}

// softKill is a soft eviction's kill running in the background.
type softKill struct {
	pod    *v1.Pod
	act    Action
	trig   Trigger
	cancel context.CancelFunc
	done   chan softKillResult
	// escalated: a hard eviction of the same pod took over
	escalated bool
	// ended: the kill returned (through the API: the eviction was
	// accepted) and the pod is terminating; the soft eviction counts as in
	// progress until the pod source no longer lists it, or until.
	ended bool
	until time.Time
	// pending is its record for the state file; kctx its kill's context.
	pending *PendingEviction
	kctx    context.Context
}

type softKillResult struct {
	res EvictResult
	err error
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Engine == nil || cfg.Observer == nil || cfg.Evictor == nil {
		return nil, errors.New("agent: engine, observer and evictor are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Agent{cfg: cfg, log: cfg.Log}
	if cfg.Metrics != nil {
		cfg.Metrics.configure(cfg.Engine.Thresholds())
		cfg.Metrics.DryRun.Set(b2f(cfg.DryRun))
	}
	if cfg.StateFile != "" && !cfg.DryRun {
		// Before anything else: a growth stop a crashed run left in force.
		a.holdsFile = OpenHoldsFile(HoldsPath(cfg.StateFile), a.log)
	}
	if cfg.StateFile != "" {
		f, warn := loadStateFile(cfg.StateFile)
		switch {
		case warn != nil:
			a.log.Warn("engine state not restored; starting fresh", "file", cfg.StateFile, "err", warn)
		case f != nil:
			st := &f.State
			if err := cfg.Engine.Restore(*st); err != nil {
				a.log.Warn("engine state does not fit this configuration; starting fresh", "file", cfg.StateFile, "err", err)
			} else {
				a.lastConds = st.NodeConditions
				a.log.Info("engine state restored", "file", cfg.StateFile, "conditions", st.NodeConditions, "thresholds_met", len(st.FirstObserved))
			}
			if f.Evicting != nil && !cfg.DryRun {
				a.resumePending = f.Evicting
				a.pending = f.Evicting
				a.setBusy(f.Evicting.Deadline.Add(evictBusySlack))
			}
		}
		if !cfg.DryRun {
			a.state = newStateWriter(cfg.StateFile, func(err error) { a.noteOutput(stageStateFile, err) })
		}
	}
	if cfg.DecisionLog != nil {
		var dropped func()
		if cfg.Metrics != nil {
			dropped = cfg.Metrics.OutputDropped.WithLabelValues(OutputDecisionLog).Inc
		}
		cfg.DecisionLog.setHooks(func(err error) { a.noteOutput(stageDecisionLog, err) }, dropped)
	}
	return a, nil
}

// Trigger says why a synchronize ran.
type Trigger struct {
	Reason string    `json:"reason"`           // "start", "timer", "grace", "wake", "after-eviction", "resume"
	Source string    `json:"source,omitempty"` // the notifier, for wake-ups
	At     time.Time `json:"at"`               // when the trigger was seen
}

// Record is one synchronize: its trigger, the Decision (the same data
// `evictd explain -o json` prints), and what was done.
type Record struct {
	Time     time.Time       `json:"time"`
	Trigger  Trigger         `json:"trigger"`
	Decision policy.Decision `json:"decision"`
	Actions  []Action        `json:"actions,omitempty"`
	// TriggerToDecision is how long after the trigger the decision was made.
	TriggerToDecision time.Duration `json:"triggerToDecisionNs"`
	DryRun            bool          `json:"dryRun,omitempty"`
	// Omitted is how many synchronizes since the previous record of the
	// decision log were left out of it because nothing but the observed
	// amounts changed (logFilter).
	Omitted int `json:"omitted,omitempty"`
	// EarlyStopUndone is the growth stop the wake-up placed on a pod that
	// this synchronize did not evict, undone before any eviction started
	// (earlystop.go); a confirmed one is its eviction's Stop.
	EarlyStopUndone *GrowthStop `json:"earlyStopUndone,omitempty"`
	// EarlyStopMoved is that stop when this synchronize found its
	// threshold just short of met and raised its limit by the shortfall
	// instead (earlystop.go's moveEarly): Limit is the new one.
	EarlyStopMoved *GrowthStop `json:"earlyStopMoved,omitempty"`
}

// Action is one thing the agent did for a Decision.
type Action struct {
	Kind   string        `json:"kind"` // "evict", "reclaim"
	Pod    policy.PodRef `json:"pod,omitempty"`
	Signal string        `json:"signal,omitempty"`
	Grace  time.Duration `json:"graceNs,omitempty"`
	// Stop is how the victim's growth was stopped before the eviction
	// (hard memory and PID thresholds, with a Holder).
	Stop    *GrowthStop  `json:"growthStop,omitempty"`
	Result  *EvictResult `json:"result,omitempty"`
	Error   string       `json:"error,omitempty"`
	Reclaim []string     `json:"reclaim,omitempty"`
	// OOMKills: for a "kernel-oom-kill" action, the processes the kernel
	// OOM killer killed; for an eviction, those of the victim it killed
	// while evictd was evicting it (then the kernel, not evictd, ended it).
	OOMKills uint64           `json:"oomKills,omitempty"`
	Message  string           `json:"message,omitempty"`
	Evict    *policy.Eviction `json:"-"`
	pod      *v1.Pod          // the victim, found in the pod source
	// Profile hard-preempts-soft: Background is a soft eviction whose kill
	// runs while the loop goes on (its result is logged when it ends);
	// Escalated a hard eviction of the pod such a kill was waiting on;
	// Deferred says why a soft eviction waits for the one in progress.
	Background bool   `json:"background,omitempty"`
	Escalated  bool   `json:"escalated,omitempty"`
	Deferred   string `json:"deferred,omitempty"`
}

func (a *Agent) preemptsSoft() bool { return a.cfg.Engine.Config().Profile.HardPreemptsSoft }

// hostMemory reads /proc/meminfo's figures when a source is wired; a
// failed read is nil (the engine then uses the kubelet's figure and says so).
func (a *Agent) hostMemory(ctx context.Context) *policy.HostMemory {
	if a.cfg.Host == nil {
		return nil
	}
	h, err := a.cfg.Host.HostMemory(ctx)
	if err != nil {
		return nil
	}
	return h
}

// reclaimMemory runs the profile's memory reclaim; it returns what was done
// and the error text, for the record.
func (a *Agent) reclaimMemory(ctx context.Context, req policy.MemoryReclaim) (msg, errText string) {
	if a.cfg.MemoryReclaimer == nil {
		return "", "no memory reclaimer on this node (memory.reclaim is cgroup v2 only): evicting"
	}
	msg, err := a.cfg.MemoryReclaimer.ReclaimMemory(ctx, req)
	if err != nil {
		errText = err.Error()
	}
	a.log.Info("memory reclaim before eviction", "signal", req.Signal, "needed", req.Bytes, "file", req.FileBytes,
		"result", msg, "err", errText)
	return msg, errText
}

// GrowthStop is a victim's hold as the decision log records it.
type GrowthStop struct {
	Mechanism string `json:"mechanism,omitempty"` // actuate.MechMemoryHigh, MechMemoryLimit, MechPidsMax
	Cgroup    string `json:"cgroup,omitempty"`    // the cgroup the limit was written to
	Usage     uint64 `json:"usage,omitempty"`     // bytes or tasks when it was stopped
	Limit     uint64 `json:"limit,omitempty"`     // bytes or tasks written
	// At is when the limit was in force; AfterTrigger how long after the
	// synchronize's trigger (the kernel wake-up, for a crossing it saw);
	// Took how long the reads and writes took.
	At           time.Time     `json:"at"`
	AfterTrigger time.Duration `json:"afterTriggerNs"`
	Took         time.Duration `json:"tookNs"`
	DryRun       bool          `json:"dryRun,omitempty"`
	Error        string        `json:"error,omitempty"`
	// Early: placed on the kernel's wake-up, on the pod the previous
	// synchronize ranked first for a hard memory eviction, before this
	// synchronize read anything (earlystop.go); At and AfterTrigger are
	// when that stop took hold.
	Early bool `json:"early,omitempty"`
	// Pod is the pod held, for an early stop undone (Record.EarlyStopUndone).
	Pod *policy.PodRef `json:"pod,omitempty"`
	// Moved: an early stop that an earlier synchronize found just short
	// of its threshold and raised to it (Record.EarlyStopMoved); At is
	// when it first took hold, Limit the moved one.
	Moved bool `json:"moved,omitempty"`
	// Released says why the hold was undone within this synchronize.
	Released string `json:"released,omitempty"`
}

// Run loops until ctx is done: a synchronize at start, then on every timer
// tick, every wake-up and when a grace period runs out; after an eviction it waits (bounded) for the pod
// to be gone and synchronizes again at once, as the kubelet does.
func (a *Agent) Run(ctx context.Context) error {
	kctx, stopKills := a.killContext(ctx)
	a.killCtx = kctx
	defer stopKills()
	defer a.flushState()
	a.resume(ctx)
	clk := a.cfg.Clock
	var wake <-chan notify.Wake
	if a.cfg.Waker != nil {
		wake = a.cfg.Waker.C()
	}
	trig := Trigger{Reason: "start", At: clk.Now()}
	if hk, ok := a.cfg.Waker.(earlyHook); ok && a.cfg.Holder != nil && !a.cfg.DryRun {
		hk.OnWake(a.onWake)
		a.earlyOn = true
		defer hk.OnWake(nil)
	}
	// A hold is never left behind by an agent that has stopped: the
	// victim would stay at its limit with nothing to end it.
	defer func() {
		a.endEarly()
		a.releaseHolds(nil)
		if a.holdsFile != nil {
			a.holdsFile.Close()
		}
	}()
	defer a.stopSoftKill()
	observed := a.cfg.Observed
	for {
		rec := a.Sync(ctx, trig)
		if ctx.Err() != nil {
			return nil
		}
		if observed != nil && a.observed.Load() {
			observed()
			observed = nil
		}
		if evicted := evictedPods(rec); len(evicted) > 0 {
			a.setBusy(clk.Now().Add(cleanupTimeout + evictBusySlack))
			a.waitForCleanup(ctx, evicted)
			trig = Trigger{Reason: "after-eviction", At: clk.Now()}
			continue
		}
		var softDone <-chan softKillResult
		if a.soft != nil && !a.soft.ended {
			softDone = a.soft.done
		}
		// The timer runs at the interval, or sooner when a soft threshold's
		// grace period runs out before it: the decision is the one the
		// kubelet makes at its next tick, made without waiting for the tick.
		next, reason := a.cfg.Interval, "timer"
		for _, s := range rec.Decision.InGrace {
			if s.GraceRemaining > 0 && s.GraceRemaining < next {
				next, reason = s.GraceRemaining, "grace"
			}
		}
		timer := clk.After(next)
		select {
		case <-ctx.Done():
			return nil
		case now := <-timer:
			trig = Trigger{Reason: reason, At: now}
		case w := <-wake:
			trig = Trigger{Reason: "wake", Source: w.Source, At: w.At}
			if a.cfg.Metrics != nil {
				a.cfg.Metrics.woken(w.Source)
			}
		case r := <-softDone:
			// The background kill is over: synchronize at once, as after
			// any eviction. The loop does not wait for the pod's cleanup
			// here (Kubernetes mode's kill returns when the API accepted
			// it, and the pod terminates for its grace period): the soft
			// eviction stays in progress until the pod is gone.
			a.softKillDone(r)
			trig = Trigger{Reason: "after-eviction", At: clk.Now()}
		}
	}
}

// startSoftKill runs a soft eviction's kill in the background (profile
// hard-preempts-soft): the loop goes on synchronizing meanwhile, so that a
// hard threshold is acted on at once instead of after the soft eviction's
// grace period (kubernetes#123872). The eviction in progress is recorded as
// any is (state file, /healthz), here on the loop's goroutine; only the
// evictor's call runs on the other, under the kill context (a stop lets it
// finish its grace period, as any eviction).
func (a *Agent) startSoftKill(ctx context.Context, trig Trigger, act Action, ev policy.Eviction) {
	now := a.cfg.Clock.Now()
	p := &PendingEviction{Pod: act.Pod, Eviction: ev, Grace: act.Grace, Started: now, Deadline: now.Add(act.Grace)}
	a.setPending(p)
	if act.Grace > 0 {
		a.log.Info("eviction started; waiting for the workload to exit within its grace period",
			"pod", act.Pod.Namespace+"/"+act.Pod.Name, "signal", act.Signal, "grace", act.Grace, "deadline", p.Deadline.UTC())
	}
	base := a.killCtx
	if base == nil {
		base = ctx
	}
	kctx, cancel := context.WithCancel(base)
	sk := &softKill{pod: act.pod, act: act, trig: trig, cancel: cancel, done: make(chan softKillResult, 1), pending: p, kctx: kctx}
	a.soft = sk
	go func() {
		res, err := a.cfg.Evictor.Evict(kctx, sk.pod, act.Grace, ev)
		sk.done <- softKillResult{res, err}
	}()
}

// softKillDone records the end of the background kill: the one log line of
// its end and its metric. The soft eviction stays in progress (later soft
// decisions wait) until the pod source no longer lists the pod
// (softGone), unless the kill failed or a hard eviction took over.
func (a *Agent) softKillDone(r softKillResult) {
	sk := a.soft
	cut := r.err != nil && sk.kctx.Err() != nil && !sk.escalated
	sk.cancel()
	if a.currentEviction() == sk.pending && !cut {
		a.setPending(nil)
	}
	act := sk.act
	if sk.escalated {
		a.soft = nil
		a.log.Info("background soft eviction ended: a hard eviction of the pod took over", "pod", act.Pod.Namespace+"/"+act.Pod.Name)
		return
	}
	act.Result = &r.res
	if r.err != nil {
		act.Error = r.err.Error()
	}
	a.log.Info("background soft eviction ended", "pod", act.Pod.Namespace+"/"+act.Pod.Name, "method", r.res.Method,
		"gone", r.res.Gone, "took", r.res.Took, "err", act.Error)
	if act.Error != "" {
		a.soft = nil
		return
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.evicted(act.Signal)
	}
	sk.ended, sk.until = true, a.cfg.Clock.Now().Add(act.Grace+cleanupTimeout)
}

// softGone ends a soft eviction whose kill has returned once its pod is no
// longer listed (or after its grace period and the kubelet's cleanup wait).
func (a *Agent) softGone(active []*v1.Pod) {
	sk := a.soft
	if sk == nil || !sk.ended {
		return
	}
	if anyListed(active, []policy.PodRef{sk.act.Pod}) {
		if a.cfg.Clock.Now().Before(sk.until) {
			return
		}
		a.log.Warn("softly evicted workload still present after its grace period and the cleanup wait", "pod", sk.act.Pod.Namespace+"/"+sk.act.Pod.Name)
	}
	a.soft = nil
}

// stopSoftKill waits, when the loop ends, for a background kill still
// running: like any eviction in progress at a stop it may finish its grace
// period within the stop timeout (the kill context); cut by the timeout, it
// stays in the state file for the next start to finish.
func (a *Agent) stopSoftKill() {
	sk := a.soft
	if sk == nil || sk.ended {
		return
	}
	r := <-sk.done
	if r.err != nil && sk.kctx.Err() != nil {
		a.log.Warn("the stop's timeout ended the wait for the grace period; the next start finishes this eviction at its deadline",
			"pod", sk.act.Pod.Namespace+"/"+sk.act.Pod.Name, "deadline", sk.pending.Deadline.UTC())
		a.flushState()
	} else {
		a.softKillDone(r)
	}
	a.soft = nil
}

func evictedPods(r Record) []policy.PodRef {
	var out []policy.PodRef
	for _, act := range r.Actions {
		if act.Background || act.Deferred != "" {
			continue // not done yet: the loop goes on (profile hard-preempts-soft)
		}
		if act.Kind == "evict" && act.Error == "" && (act.Result == nil || !act.Result.DryRun) {
			out = append(out, act.Pod)
		}
	}
	return out
}

// waitForCleanup polls the pod source until none of pods is listed, every
// second for at most 30 s (the kubelet's waitForPodsCleanup).
func (a *Agent) waitForCleanup(ctx context.Context, pods []policy.PodRef) {
	deadline := a.cfg.Clock.Now().Add(cleanupTimeout)
	for {
		active, err := a.cfg.Observer.Pods(ctx)
		if err == nil && !anyListed(active, pods) {
			return
		}
		if !a.cfg.Clock.Now().Before(deadline) {
			a.log.Warn("evicted workload still present after the cleanup wait", "pods", pods, "waited", cleanupTimeout)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(cleanupPoll):
		}
	}
}

func anyListed(active []*v1.Pod, pods []policy.PodRef) bool {
	for _, p := range active {
		for _, r := range pods {
			if string(p.UID) == r.UID && p.Name == r.Name && p.Namespace == r.Namespace {
				return true
			}
		}
	}
	return false
}

// LastSync returns when the last synchronize finished (zero before the first).
func (a *Agent) LastSync() time.Time {
	ns := a.lastSync.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Sync runs one synchronize now: observe, Step, node-level reclaim and the
// second look when asked, evict, record.
func (a *Agent) Sync(ctx context.Context, trig Trigger) Record {
	clk := a.cfg.Clock
	eng := a.cfg.Engine
	start := clk.Now()
	obs := a.cfg.Observer.Observe(ctx)
	pods, perr := obs.Pods, obs.PodsErr
	summary, serr := obs.Summary, obs.SummaryErr
	if serr != nil {
		summary = nil // the engine records "failed to get summary stats", as the kubelet logs and returns
	}
	if perr != nil {
		pods = nil
	} else {
		a.releaseHolds(pods)
		a.softGone(pods)
	}
	host := a.hostMemory(ctx)
	now := clk.Now()
	d := eng.StepHost(now, policy.Input{Summary: summary, Pods: pods}, host)
	rec := Record{Time: now, Trigger: trig, DryRun: a.cfg.DryRun}
	if d.ReclaimPending {
		act := Action{Kind: "reclaim", Signal: string(d.Signal), Reclaim: d.Reclaim}
		if d.MemoryReclaim != nil {
			act.Message, act.Error = a.reclaimMemory(ctx, *d.MemoryReclaim)
		} else if a.cfg.Reclaimer != nil {
			a.cfg.Reclaimer.Reclaim(ctx, d.Signal, d.Reclaim)
		}
		rec.Actions = append(rec.Actions, act)
		var fresh *statsv1alpha1.Summary
		if obs.Restat != nil {
			var err error
			if fresh, err = obs.Restat(ctx); err != nil {
				fresh = nil
			}
		}
		d = eng.ReclaimedHost(clk.Now(), fresh, a.hostMemory(ctx))
		if d.ReclaimSufficient {
			a.log.Info("node-level reclaim was enough; no eviction", "signal", d.Signal, "reclaim", d.Reclaim)
		}
	}
	rec.TriggerToDecision = clk.Now().Sub(trig.At)
	// Every victim is found and its growth stopped first, before anything
	// else is done for the decision: a fast allocator crosses the
	// remaining headroom in tens of milliseconds.
	acts := make([]Action, len(d.Evictions))
	for i, ev := range d.Evictions {
		act := Action{Kind: "evict", Pod: ev.Pod, Signal: ev.Signal, Grace: time.Duration(ev.GracePeriodSeconds) * time.Second, Message: ev.Message, Evict: &d.Evictions[i]}
		act.pod = findPod(pods, ev.Pod)
		switch {
		case act.pod == nil:
			act.Error = "pod not in the pod source any more"
		case policy.IsCriticalPod(act.pod):
			// The engine never picks one; this guard keeps a future bug
			// from killing evictd itself or a critical workload.
			act.Error = "refused: critical workload"
		case ctx.Err() != nil:
			// Stopping: an eviction begun now could not finish before the
			// exit; the next start decides again.
			act.Error = "not started: evictd is stopping"
		default:
			act.Stop = a.hold(trig, act.pod, ev)
		}
		acts[i] = act
	}
	var resolved []policy.ResolvedThreshold
	if summary != nil {
		resolved = eng.Resolve(summary)
	}
	if gs, moved := a.undoEarly(start, trig, len(d.Evictions) > 0, resolved); moved {
		rec.EarlyStopMoved = gs
	} else {
		rec.EarlyStopUndone = gs
	}
	a.logStateChanges(d) // before the kills, so the log reads in order
	for i := range acts {
		act := &acts[i]
		ev := d.Evictions[i]
		if act.Error == "" && ctx.Err() != nil {
			// The stop came during an earlier eviction of this decision.
			act.Error = "not started: evictd is stopping"
			a.release(act.pod.UID, act.Stop, "evictd is stopping")
		}
		if act.Error == "" && a.soft != nil && !ev.Immediate {
			// Profile hard-preempts-soft: soft evictions still go one at a
			// time; this one waits for the one in progress.
			act.Deferred = "the soft eviction of " + a.soft.act.Pod.Namespace + "/" + a.soft.act.Pod.Name +
				" is still in progress"
			rec.Actions = append(rec.Actions, *act)
			continue
		}
		if act.Error == "" {
			if a.cfg.BeforeEvict != nil {
				a.cfg.BeforeEvict(trig, d, *act)
			}
			if a.preemptsSoft() && !ev.Immediate && !a.cfg.DryRun {
				act.Background = true
				a.startSoftKill(ctx, trig, *act, ev)
				a.logEviction(trig, *act, d)
				rec.Actions = append(rec.Actions, *act)
				continue
			}
			if a.soft != nil && a.soft.act.Pod == ev.Pod {
				// A hard threshold picked the pod whose soft eviction is
				// still in progress: its kill is escalated to the hard grace.
				act.Escalated = true
			}
			res, err := a.evict(ctx, act.pod, *act, ev)
			act.Result = &res
			a.watchOOM(&rec, act)
			if err != nil {
				act.Error = err.Error()
				if errors.Is(err, ErrUntouched) {
					a.release(act.pod.UID, act.Stop, "the eviction was abandoned")
				}
			}
			if act.Escalated && err == nil {
				if a.soft.ended {
					a.soft = nil // nothing waits any more: the hard eviction took over
				} else {
					a.soft.escalated = true
					a.soft.cancel() // its wait is over; the pod is gone
				}
			}
		}
		a.logEviction(trig, *act, d)
		if a.cfg.Metrics != nil && !a.cfg.DryRun {
			switch {
			case act.Error != "":
				a.cfg.Metrics.EvictionErrors.WithLabelValues(ev.Signal).Inc()
			case act.OOMKills == 0: // the kernel's kill is not evictd's eviction
				a.cfg.Metrics.evicted(ev.Signal)
			}
		}
		rec.Actions = append(rec.Actions, *act)
	}
	// The kernel thresholds are moved after the evictions, not before them
	// as the kubelet does: registering a memcg v1 threshold waits for an RCU
	// grace period in the kernel (synchronize_rcu in
	// mem_cgroup_usage_register_event), about 20 ms each
	// (notify's BenchmarkMemcgThresholdRegister), two
	// per rebuild with allocatableMemory.available. Before, a crossing that
	// came more than the refresh interval after the last rebuild paid that
	// between decision and eviction. Wakeups.Update only hands the moves to
	// a goroutine of its own, so the synchronize does not wait for the
	// registrations either (on the real node they were most of its wall
	// time). Decisions are the same; a crossing meanwhile is not lost (each
	// registration reads usage again once it is in place).
	if summary != nil && a.cfg.Updater != nil {
		a.cfg.Updater.Update(now, summary, resolved)
	}
	a.watchOOM(&rec, nil)
	rec.Decision = d
	a.arm(summary, pods)
	a.syncs++
	a.lastSync.Store(clk.Now().UnixNano())
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.observe(rec, clk.Now().Sub(start))
	}
	a.saveState()
	if out, ok := a.logFilter.pass(rec); ok {
		a.writeRecord(out)
	}
	if a.cfg.OnRecord != nil {
		a.cfg.OnRecord(rec)
	}
	a.noteObserve(now, perr, serr)
	return rec
}

// saveState hands the engine state and the eviction in progress to the
// state writer (written off the loop, and only when it changed).
func (a *Agent) saveState() {
	if a.state == nil {
		return
	}
	a.state.save(stateFile{Version: stateVersion, State: a.cfg.Engine.State(), Evicting: a.currentEviction()})
}

// flushState waits (bounded) for the state handed over to be on disk: at a
// stop, and when an eviction is left for the next start.
func (a *Agent) flushState() {
	if a.state != nil && !a.state.flush(DefaultFlushTimeout) {
		a.log.Warn("the state file was not written within the stop's flush timeout", "file", a.cfg.StateFile, "timeout", DefaultFlushTimeout)
	}
}

// writeRecord queues a record for the decision log.
func (a *Agent) writeRecord(r Record) {
	if a.cfg.DecisionLog != nil {
		a.cfg.DecisionLog.Log(r)
	}
}

// GrowthStopResource is what an eviction's growth stop holds: memory and
// PIDs, for the evictions the kubelet makes at once (a hard threshold's). A
// soft threshold's victim keeps the grace period the kubelet gives it, and
// disk has no limit that would not fail the workload's writes.
func GrowthStopResource(ev policy.Eviction) (actuate.Resource, bool) {
	if !ev.Immediate || ev.Limit {
		return 0, false
	}
	switch policy.Signal(ev.Signal) {
	case policy.SignalMemoryAvailable, policy.SignalAllocatableMemoryAvailable:
		return actuate.Memory, true
	case policy.SignalPIDAvailable:
		return actuate.PIDs, true
	}
	return 0, false
}

// hold stops the victim's growth, or says why it could not; nil when the
// eviction has nothing to hold. A victim still held from an earlier
// attempt keeps its hold.
func (a *Agent) hold(trig Trigger, pod *v1.Pod, ev policy.Eviction) *GrowthStop {
	r, ok := GrowthStopResource(ev)
	if !ok || a.cfg.Holder == nil {
		return nil
	}
	if e := a.takeEarly(pod.UID); e != nil {
		return a.confirmEarly(e)
	}
	if h := a.holds[pod.UID]; h != nil {
		return growthStop(h, a.cfg.Clock.Now(), trig)
	}
	h, err := a.cfg.Holder.Hold(pod, r)
	now := a.cfg.Clock.Now()
	if err != nil {
		gs := &GrowthStop{At: now, AfterTrigger: now.Sub(trig.At), Error: err.Error()}
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.growthStop("", "failed", 0)
		}
		return gs
	}
	gs := growthStop(h, now, trig)
	if !h.DryRun {
		if a.holds == nil {
			a.holds = map[types.UID]*actuate.Hold{}
		}
		a.holds[pod.UID] = h
		a.saveHolds()
	}
	if a.cfg.Metrics != nil {
		outcome := "stopped"
		if h.DryRun {
			outcome = "dry-run"
		}
		a.cfg.Metrics.growthStop(h.Mechanism, outcome, gs.AfterTrigger)
	}
	return gs
}

func growthStop(h *actuate.Hold, now time.Time, trig Trigger) *GrowthStop {
	return &GrowthStop{Mechanism: h.Mechanism, Cgroup: h.Dir, Usage: h.Usage, Limit: h.Limit,
		At: now, AfterTrigger: now.Sub(trig.At), Took: h.Took, DryRun: h.DryRun}
}

// release undoes the hold on uid, noting why in gs.
func (a *Agent) release(uid types.UID, gs *GrowthStop, why string) {
	h := a.holds[uid]
	if h == nil {
		return
	}
	delete(a.holds, uid)
	if err := h.Release(); err != nil {
		a.log.Warn("cannot undo a growth stop", "workload", h.Target.Name, "err", err)
	}
	a.saveHolds()
	if gs != nil {
		gs.Released = why
	}
}

// releaseHolds undoes the holds of the victims that active (the pods just
// listed) no longer holds: they are gone, so a workload cgroup that stays
// (host mode) gets its limits back for whatever runs in it next. With
// active nil it releases every hold (the agent is stopping).
func (a *Agent) releaseHolds(active []*v1.Pod) {
	released := false
	for uid, h := range a.holds {
		if active != nil && slices.ContainsFunc(active, func(p *v1.Pod) bool { return p.UID == uid }) {
			continue
		}
		delete(a.holds, uid)
		if err := h.Release(); err != nil {
			a.log.Warn("cannot undo a growth stop", "workload", h.Target.Name, "err", err)
		}
		released = true
	}
	if released {
		a.saveHolds()
	}
}

func findPod(pods []*v1.Pod, ref policy.PodRef) *v1.Pod {
	for _, p := range pods {
		if p.Name == ref.Name && p.Namespace == ref.Namespace && (ref.UID == "" || string(p.UID) == ref.UID) {
			return p
		}
	}
	return nil
}

func (a *Agent) logEviction(trig Trigger, act Action, d policy.Decision) {
	attrs := []any{"pod", act.Pod.Namespace + "/" + act.Pod.Name, "signal", act.Signal, "grace", act.Grace,
		"trigger", trig.Reason}
	if trig.Source != "" {
		attrs = append(attrs, "wake_source", trig.Source)
	}
	if d.Deciding != nil && d.Deciding.Quantity != nil && d.Deciding.Available != nil {
		attrs = append(attrs, "threshold", d.Deciding.Threshold.String(), "available", d.Deciding.Available.String())
	}
	if gs := act.Stop; gs != nil {
		if gs.Error != "" {
			attrs = append(attrs, "growth_stop_failed", gs.Error)
		} else {
			attrs = append(attrs, "growth_stopped", gs.Mechanism, "stop_limit", gs.Limit, "stop_after_trigger", gs.AfterTrigger)
			if gs.Early {
				attrs = append(attrs, "stop_early", true) // placed on the wake-up, before this synchronize
			}
		}
		if gs.Released != "" {
			attrs = append(attrs, "stop_released", gs.Released)
		}
	}
	if act.Result != nil {
		attrs = append(attrs, "method", act.Result.Method, "gone", act.Result.Gone, "took", act.Result.Took)
	}
	attrs = append(attrs, "message", strings.TrimSpace(act.Message))
	switch {
	case act.Background:
		a.log.Info("evicting: the soft eviction's kill runs in the background, hard thresholds are acted on meanwhile (profile hard-preempts-soft)", attrs...)
	case act.Error != "":
		a.log.Error("eviction failed", append(attrs, "err", act.Error)...)
	case act.OOMKills > 0:
		a.log.Warn("the kernel OOM killer killed processes of the workload while evictd was evicting it",
			append(attrs, "kernel_oom_kills", act.OOMKills)...)
	case a.cfg.DryRun:
		a.log.Info("dry run: would evict", attrs...)
	case act.Escalated:
		a.log.Info("evicted: a hard threshold escalated the soft eviction still in progress (profile hard-preempts-soft)", attrs...)
	default:
		a.log.Info("evicted", attrs...)
	}
}

// logStateChanges logs node conditions and met thresholds when they change.
func (a *Agent) logStateChanges(d policy.Decision) {
	if d.Error != a.lastErr {
		if d.Error != "" {
			a.log.Warn("synchronize stopped early", "err", d.Error)
		}
		a.lastErr = d.Error
	}
	conds := slices.Clone(d.NodeConditions)
	if !slices.Equal(conds, a.lastConds) {
		a.log.Info("node conditions changed", "from", fmt.Sprint(a.lastConds), "to", fmt.Sprint(conds))
		a.lastConds = conds
	}
	var met []string
	for _, m := range d.Met {
		// The threshold only, not the available amount: that moves every
		// tick and would make this a per-tick line.
		met = append(met, m.Threshold.String())
	}
	if !slices.Equal(met, a.lastMet) {
		if len(met) == 0 {
			a.log.Info("no eviction threshold met any more")
		} else {
			a.log.Info("eviction thresholds met", "thresholds", strings.Join(met, ", "))
		}
		a.lastMet = met
	}
}

// Engine returns the policy engine the agent drives.
func (a *Agent) Engine() *policy.Engine { return a.cfg.Engine }
