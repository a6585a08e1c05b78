package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
)

// Tri is an on/off/auto switch.
type Tri string

const (
	Auto Tri = "auto"
	On   Tri = "on"
	Off  Tri = "off"
)

// ParseTri parses auto|on|off.
func ParseTri(s string) (Tri, error) {
	switch Tri(s) {
	case Auto, On, Off:
		return Tri(s), nil
	}
	return "", fmt.Errorf("%q: want auto, on or off", s)
}

// enabled says whether the switch is on, auto meaning what "auto" resolves
// to here.
func (t Tri) enabled(auto bool) bool { return t == On || (t == Auto && auto) }

// WakeupOptions are the kernel wake-ups a run asks for, one type for both
// wirings (host mode and Kubernetes mode), filled once from evictd run's
// flags: --memcg-notification, --psi, --memory-events and --fast-poll, each
// on, off or auto (the zero value is off), and their tunables --psi-stall,
// --psi-window, --fast-poll-min, --fast-poll-max and --notifier-refresh (0
// takes notify's default). Every wiring resolves them the same way, with
// Apply.
type WakeupOptions struct {
	MemcgNotification, PSI, MemoryEvents, FastPoll Tri
	// Realtime runs the threads that see a crossing and place the growth
	// stop (the epoll poller, the fast poll and the v1 close watch) at SCHED_FIFO
	// notify.RealtimePriority (--realtime-wakeups): auto where the kernel
	// allows it, on (the start fails where it does not), off.
	Realtime                 Tri
	PSIStall, PSIWindow      time.Duration
	FastPollMin, FastPollMax time.Duration
	NotifierRefresh          time.Duration
}

// NoWakeups asks for the timer alone: every kernel wake-up off (tests and
// benchmarks that measure the loop without them).
var NoWakeups = WakeupOptions{MemcgNotification: Off, PSI: Off, MemoryEvents: Off, FastPoll: Off}

// Apply sets cfg's switches and tunables for a node on cgroup v2 or v1
// (cfg.V2) whose engine has the given thresholds. Auto means memcg
// thresholds on v1, PSI, memory.events and the fast poll on v2. Whatever
// was asked, memcg thresholds need v1 (cgroup v2 has no
// cgroup.event_control), memory.events needs v2, and memcg thresholds and
// the fast poll need a memory threshold to watch.
func (o WakeupOptions) Apply(cfg *WakeupConfig, thresholds []policy.Threshold) {
	v2 := cfg.V2
	hasMem := false
	for _, t := range thresholds {
		hasMem = hasMem || t.Signal == policy.SignalMemoryAvailable || t.Signal == policy.SignalAllocatableMemoryAvailable
	}
	cfg.MemcgThresholds = o.MemcgNotification.enabled(!v2) && hasMem && !v2
	cfg.PSI = o.PSI.enabled(v2)
	cfg.MemoryEvents = o.MemoryEvents.enabled(v2) && v2
	cfg.FastPoll = o.FastPoll.enabled(v2) && hasMem
	cfg.PSIStall, cfg.PSIWind = o.PSIStall, o.PSIWindow
	cfg.FastMin, cfg.FastMax = o.FastPollMin, o.FastPollMax
	cfg.RefreshInterval = o.NotifierRefresh
	cfg.Realtime = o.Realtime
}

// WakeupConfig says which kernel wake-ups to set up.
type WakeupConfig struct {
	// MemoryRoot is the memory hierarchy root (node cgroup for
	// memory.available); PodsCgroup the pods' parent (allocatableMemory.available
	// and the fast poll). Both absolute directories.
	MemoryRoot, PodsCgroup string
	V2                     bool
	// MemcgThresholds: v1 memory.usage_in_bytes eventfd thresholds.
	MemcgThresholds bool
	RefreshInterval time.Duration // 0: notify.DefaultRefreshInterval
	// PSI triggers on the node's and the pods' memory.pressure (v2; on v1
	// only /proc/pressure/memory).
	PSI               bool
	PSIStall, PSIWind time.Duration
	// MemoryEvents watches memory.events of the pods' parent (v2).
	MemoryEvents bool
	// FastPoll polls the pods' parent memory with an interval that shrinks
	// with the headroom to the nearest memory threshold.
	FastPoll         bool
	FastMin, FastMax time.Duration
	// ReadPodsMemory reads the pods' parent working set cheaply (bytes).
	ReadPodsMemory func() (workingSet uint64, err error)
	// Arm wakes a synchronize also as a hard memory threshold comes near
	// (ArmAhead before it on v1, at each halving of the headroom in the
	// fast poll), so that the agent has its victim ranked and ready for
	// the early growth stop when the crossing's wake-up comes
	// (earlystop.go). Off without a growth stop or in a dry run.
	Arm bool
	// Realtime: WakeupOptions.Realtime (the zero value is off).
	Realtime Tri
	Log      *slog.Logger
}

// psiParams are the PSI trigger's stall and window, defaulted.
func (cfg WakeupConfig) psiParams() (stall, window time.Duration) {
	stall, window = cfg.PSIStall, cfg.PSIWind
	if stall == 0 {
		stall = notify.DefaultPSIStall
	}
	if window == 0 {
		window = notify.DefaultPSIWindow
	}
	return stall, window
}

// Wakeups owns the notifiers. It is the agent's Waker and ThresholdUpdater.
type Wakeups struct {
	cfg    WakeupConfig
	poller *notify.Poller
	waker  *notify.Waker
	log    *slog.Logger

	mu    sync.Mutex
	memcg map[string]*notify.MemcgThreshold // by threshold text
	// watches carry the hard memcg thresholds' last stretch (Arm, v1), by
	// threshold text.
	watches map[string]*notify.CloseWatch
	closer  []func() error
	failed  map[string]bool // notifiers that failed, logged once

	// fast-poll baseline from the last Summary
	headroomBase atomic.Pointer[headroomBase]
	fast         *notify.FastPoll // nil without the fast poll
	cancel       context.CancelFunc
	active       []string
	// prio is the SCHED_FIFO priority of the poller's, the fast poll's and
	// the close watches' threads (0: the ordinary priority).
	prio int

	// The memcg thresholds are moved by a goroutine of their own (moveMemcg):
	// registering one waits for an RCU grace period in the kernel
	// (synchronize_rcu in mem_cgroup_usage_register_event), about 20 ms each
	// on a busy host and two per rebuild with allocatableMemory.available,
	// and on an idle node nearly every synchronize rebuilds (the threshold
	// follows inactive_file, rate-limited to once per 10 s). In the
	// synchronize that wait was most of its wall time on the real node (the
	// DaemonSet's synchronize: 19.7 ms with one pod, 40.6 ms with 110, against
	// 4.3 ms for the Summary and the step). Update hands the moves over and
	// returns; only the latest Summary's moves matter, so a batch not yet
	// started is replaced by the next. A crossing meanwhile is not lost:
	// each registration reads the usage again once it is in place.
	moveMu    sync.Mutex
	moveCond  *sync.Cond
	moves     []memcgMove // the latest batch, not started yet
	movesGen  uint64      // batches handed over
	movesDone uint64      // batches carried out
	moveKick  chan struct{}
	moveStop  chan struct{}
	moveEnded chan struct{}
	stopMoves sync.Once

	// The notifiers on the pods cgroup's own files (v2 memory.pressure and
	// memory.events) die with the cgroup: when the workload root is
	// removed and created again they are set up again on the new one.
	rootIno    uint64
	rootClose  []func() error
	rootActive []string
}

// memcgMove is one memcg threshold's move, computed from a Summary.
type memcgMove struct {
	m        *notify.MemcgThreshold
	key, dir string
	now      time.Time
	usageThr int64
	usage    int64
}

type headroomBase struct {
	podsWS int64 // pods' working set when the summary was taken
	// headrooms are, for each memory threshold, available − threshold at
	// that time, in bytes.
	headrooms []int64
}

// NewWakeups sets up the notifiers that can be set up; each that cannot is
// logged once and costs latency only (the timer still runs).
func NewWakeups(cfg WakeupConfig) (*Wakeups, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	prio, err := realtimePriority(cfg.Realtime, cfg.Log)
	if err != nil {
		return nil, err
	}
	p, err := notify.NewPollerAt(prio)
	if err != nil {
		return nil, err
	}
	w := &Wakeups{cfg: cfg, poller: p, prio: prio, waker: notify.NewWaker(), log: cfg.Log, memcg: map[string]*notify.MemcgThreshold{}, watches: map[string]*notify.CloseWatch{}, failed: map[string]bool{},
		moveKick: make(chan struct{}, 1), moveStop: make(chan struct{}), moveEnded: make(chan struct{})}
	w.moveCond = sync.NewCond(&w.moveMu)
	go w.moveMemcg()
	if cfg.PSI {
		stall, win := cfg.psiParams()
		f := "/proc/pressure/memory"
		if t, err := notify.NewPSITrigger(p, w.waker, f, stall, win); err != nil {
			w.failOnce("psi "+f, err)
		} else {
			w.closer = append(w.closer, t.Close)
			w.active = append(w.active, "psi "+f)
		}
	}
	w.mu.Lock()
	w.watchRootLocked()
	w.mu.Unlock()
	if cfg.FastPoll && cfg.ReadPodsMemory != nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		fp := &notify.FastPoll{Headroom: w.headroom, Sink: w.waker, Min: cfg.FastMin, Max: cfg.FastMax, Arm: cfg.Arm, Priority: w.prio,
			OnError: func(err error) { w.log.Warn("fast poll cannot read the pods' memory", "err", err) }}
		w.fast = fp
		go fp.Run(ctx)
		w.active = append(w.active, "fast-poll "+cfg.PodsCgroup)
	}
	return w, nil
}

// realtimePriority resolves --realtime-wakeups: the SCHED_FIFO priority of
// the notifiers' threads, 0 for the ordinary one. auto logs once why the
// kernel refused it; on makes the refusal the start's error.
func realtimePriority(t Tri, log *slog.Logger) (int, error) {
	if !t.enabled(true) {
		return 0, nil
	}
	err := notify.ProbeRealtime(notify.RealtimePriority)
	switch {
	case err == nil:
		return notify.RealtimePriority, nil
	case t == On:
		return 0, fmt.Errorf("--realtime-wakeups=on: %w (give evictd CAP_SYS_NICE, or run it in a cpu cgroup with real-time runtime)", err)
	}
	// Info, not a warning: the DaemonSet as shipped runs here (its pod's cpu
	// cgroup has no real-time runtime on a kernel with real-time group
	// scheduling), and a warning at every start of the default teaches
	// operators to read past warnings.
	log.Info("wake-ups run at the ordinary priority: the kernel refused a real-time one, so the growth stop may wait for a CPU behind the allocator it stops (docs/agent.md, real-time wake-ups)", "err", err)
	return 0, nil
}

// watchRootLocked sets up the notifiers on the pods cgroup's files (v2).
func (w *Wakeups) watchRootLocked() {
	cfg := w.cfg
	if !cfg.V2 || cfg.PodsCgroup == "" {
		return
	}
	w.rootIno = cgroup.DirInode(cfg.PodsCgroup)
	if cfg.PSI {
		stall, win := cfg.psiParams()
		f := cfg.PodsCgroup + "/memory.pressure"
		if t, err := notify.NewPSITrigger(w.poller, w.waker, f, stall, win); err != nil {
			w.failOnce("psi "+f, err)
		} else {
			w.rootClose = append(w.rootClose, t.Close)
			w.rootActive = append(w.rootActive, "psi "+f)
		}
	}
	if cfg.MemoryEvents {
		f := cfg.PodsCgroup + "/memory.events"
		if ew, err := notify.NewEventsWatch(w.poller, w.waker, f); err != nil {
			w.failOnce("memory.events "+f, err)
		} else {
			w.rootClose = append(w.rootClose, ew.Close)
			w.rootActive = append(w.rootActive, "memory.events "+f)
		}
	}
}

// rewatchRoot sets the pods cgroup's notifiers up again when the cgroup was
// created anew since they were (another inode at its path).
func (w *Wakeups) rewatchRoot() {
	if !w.cfg.V2 || w.cfg.PodsCgroup == "" {
		return
	}
	ino := cgroup.DirInode(w.cfg.PodsCgroup)
	w.mu.Lock()
	defer w.mu.Unlock()
	if ino == 0 || ino == w.rootIno {
		return
	}
	for _, c := range w.rootClose {
		c()
	}
	w.rootClose, w.rootActive = nil, nil
	w.watchRootLocked()
	w.log.Info("workload root created anew; its notifiers are set up again", "cgroup", w.cfg.PodsCgroup, "notifiers", w.rootActive)
}

// Active lists the notifiers that are running (memcg thresholds appear once
// the first Update's registrations are done: it waits for them).
func (w *Wakeups) Active() []string {
	w.settle()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append(append([]string(nil), w.active...), w.rootActive...)
	if w.prio > 0 && w.poller.RealtimeErr() == nil {
		out = append(out, fmt.Sprintf("realtime SCHED_FIFO %d", w.prio))
	}
	for k, m := range w.memcg {
		if m.Threshold() > 0 {
			out = append(out, "memcg-threshold "+k)
		}
	}
	for k, c := range w.watches {
		if l, _ := c.Levels(); l > 0 {
			out = append(out, "memcg-watch "+k)
		}
	}
	if w.cfg.MemcgThresholds && !w.cfg.V2 && len(w.memcg) == 0 {
		out = append(out, "memcg-threshold (registered at the first synchronize)")
	}
	return out
}

func (w *Wakeups) failOnce(what string, err error) {
	if w.failed[what] {
		return
	}
	w.failed[what] = true
	w.log.Warn("wake-up unavailable; the periodic timer still runs", "notifier", what, "err", err)
}

// C delivers the wake-ups.
func (w *Wakeups) C() <-chan notify.Wake { return w.waker.C() }

// OnWake has f called with every wake-up on the notifier's goroutine
// (notify.Waker.OnWake).
func (w *Wakeups) OnWake(f func(notify.Wake)) { w.waker.OnWake(f) }

// Sink lets others (tests, the demo) inject wake-ups.
func (w *Wakeups) Sink() notify.Sink { return w.waker }

// Update moves the memcg thresholds (rate-limited) and the fast-poll
// baseline. The capacity, the available amount and the threshold in bytes
// are the engine's (resolved); the Summary gives what only the notifiers
// need: the usage (memcg counts page cache in it) and the pods' working set.
func (w *Wakeups) Update(now time.Time, s *statsv1alpha1.Summary, resolved []policy.ResolvedThreshold) {
	w.rewatchRoot()
	pods := podsMemory(s)
	var heads []int64
	var keys []string
	var moves, arming []memcgMove
	for _, r := range resolved {
		t := r.Threshold
		var ms *statsv1alpha1.MemoryStats
		dir := w.cfg.MemoryRoot
		switch t.Signal {
		case policy.SignalMemoryAvailable:
			ms = s.Node.Memory
		case policy.SignalAllocatableMemoryAvailable:
			ms, dir = pods, w.cfg.PodsCgroup
		default:
			continue
		}
		if ms == nil || ms.WorkingSetBytes == nil || ms.UsageBytes == nil {
			continue
		}
		capacity, thr := r.Observation.Capacity.Value(), r.Quantity.Value()
		heads = append(heads, r.Observation.Available.Value()-thr)
		key := t.String()
		if !t.Hard() {
			key = "" // the early stop is for hard thresholds only
		}
		keys = append(keys, key)
		if !w.cfg.MemcgThresholds || w.cfg.V2 || dir == "" {
			continue
		}
		inactive := int64(*ms.UsageBytes - *ms.WorkingSetBytes)
		usageThr := notify.UsageThreshold(capacity, thr, inactive)
		moves = append(moves, w.memcgMove(t.String(), string(t.Signal), key, dir, now, usageThr, int64(*ms.UsageBytes), nil))
		if w.cfg.Arm && t.Hard() && usageThr > ArmAhead {
			// The arming threshold's wake-up also starts the close watch
			// over the last ArmAhead (notify.CloseWatch: the kernel's own
			// check comes only with charges).
			cw := w.closeWatch(t.String(), string(t.Signal), key, dir)
			cw.Set(usageThr, usageThr-ArmAhead)
			arming = append(arming, w.memcgMove(t.String()+" (arming)", string(t.Signal)+" arming", "", dir, now, usageThr-ArmAhead, int64(*ms.UsageBytes), cw.Start))
			if u := int64(*ms.UsageBytes); u > usageThr-ArmAhead && u <= usageThr {
				// Already past the arming level, not yet met: the watch
				// runs now, whatever the eventfds do. Their signals are
				// edges, and one may be spent: on the real node a memcg
				// threshold fired about 0.7 MiB before the Summary's
				// crossing, the early stop held the pod there, the
				// synchronize found the threshold not met (available
				// 66000Ki against 64Mi) and undid the stop, and no
				// wake-up came while the hog took the last 64 MiB: the
				// kernel OOM killer ended it 230 ms later (bench/node.sh
				// at 64 MiB of headroom, 1 trial of 20; the arming
				// threshold had fired long before, so nothing restarted
				// the watch).
				cw.Start()
			}
		}
	}
	// After the thresholds' own: each registration waits for an RCU grace
	// period (moveMemcg), and the crossings matter more.
	moves = append(moves, arming...)
	if len(moves) > 0 {
		w.moveMu.Lock()
		w.moves = moves
		w.movesGen++
		w.moveMu.Unlock()
		select {
		case w.moveKick <- struct{}{}:
		default: // a kick is pending: the worker takes the latest batch
		}
	}
	if pods != nil && pods.WorkingSetBytes != nil && len(heads) > 0 {
		w.headroomBase.Store(&headroomBase{podsWS: int64(*pods.WorkingSetBytes), headrooms: heads})
		if w.fast != nil {
			w.fast.Rebase(heads, keys)
		}
	}
}

// ArmAhead is how far below a hard memory threshold's usage level the v1
// arming threshold sits (Arm): the synchronize it wakes should be over
// before the crossing. At 3 GiB/s, two threads touching memory at full
// speed in a pod on the real node, 64 MiB lasts 20 ms: several
// synchronizes of a quiet host (0.5–1 ms), a few beside the allocator on a
// node with few pods (5–10 ms there). 32 MiB (10 ms) once left the crossing
// with no pod armed, its stop then waiting for the synchronize the crossing
// woke (7 ms; bench/node.sh, 2026-12-06). Slower ramps are armed further
// ahead.
const ArmAhead = 64 << 20 // bytes

// closeWatch returns the close watch of the hard threshold named key
// (created on first use; label names its wake-ups, crossed is its Key).
func (w *Wakeups) closeWatch(key, label, crossed, dir string) *notify.CloseWatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.watches[key]
	if c == nil {
		c = notify.NewCloseWatch(w.waker, label, dir, crossed)
		c.Priority = w.prio
		w.watches[key] = c
	}
	return c
}

// memcgMove returns the move of the memcg notifier named key (created on
// first use; label names its wake-ups, crossed is its notify Key, onAbove
// its OnAbove) to usageThr.
func (w *Wakeups) memcgMove(key, label, crossed, dir string, now time.Time, usageThr, usage int64, onAbove func()) memcgMove {
	w.mu.Lock()
	m := w.memcg[key]
	if m == nil {
		m = notify.NewMemcgThreshold(w.poller, w.waker, label, dir)
		m.Key, m.OnAbove = crossed, onAbove
		if w.cfg.RefreshInterval > 0 {
			m.RefreshInterval = w.cfg.RefreshInterval
		}
		w.memcg[key] = m
	}
	w.mu.Unlock()
	return memcgMove{m: m, key: key, dir: dir, now: now, usageThr: usageThr, usage: usage}
}

// moveMemcg carries out the memcg threshold moves Update hands over, the
// latest batch each time, until Close.
func (w *Wakeups) moveMemcg() {
	defer close(w.moveEnded)
	for {
		select {
		case <-w.moveStop:
			return
		case <-w.moveKick:
		}
		w.moveMu.Lock()
		moves, gen := w.moves, w.movesGen
		w.moves = nil
		w.moveMu.Unlock()
		for _, mv := range moves {
			first := mv.m.Threshold() == 0
			rebuilt, err := mv.m.Update(mv.now, mv.usageThr, mv.usage)
			switch {
			case err != nil:
				w.mu.Lock()
				w.failOnce("memcg-threshold "+mv.key, err)
				w.mu.Unlock()
			case rebuilt && first:
				w.log.Info("memcg threshold notifier set", "threshold", mv.key, "cgroup", mv.dir, "usage_threshold_bytes", mv.usageThr)
			}
		}
		w.moveMu.Lock()
		w.movesDone = gen
		w.moveCond.Broadcast()
		w.moveMu.Unlock()
	}
}

// settle waits until the memcg moves handed over so far are carried out
// (or the worker stopped).
func (w *Wakeups) settle() {
	w.moveMu.Lock()
	defer w.moveMu.Unlock()
	gen := w.movesGen
	for w.movesDone < gen {
		select {
		case <-w.moveEnded:
			return
		default:
		}
		w.moveCond.Wait()
	}
}

// headroom is the fast poll's estimate: each threshold's headroom at the
// last Summary minus the growth of the pods' working set since.
func (w *Wakeups) headroom() ([]int64, error) {
	b := w.headroomBase.Load()
	if b == nil {
		return nil, nil // no Summary yet: nothing to cross, poll slowly
	}
	ws, err := w.cfg.ReadPodsMemory()
	if err != nil {
		return nil, err
	}
	growth := int64(ws) - b.podsWS
	out := make([]int64, len(b.headrooms))
	for i, h := range b.headrooms {
		out[i] = h - growth
	}
	return out, nil
}

func podsMemory(s *statsv1alpha1.Summary) *statsv1alpha1.MemoryStats {
	for i := range s.Node.SystemContainers {
		if s.Node.SystemContainers[i].Name == statsv1alpha1.SystemContainerPods {
			return s.Node.SystemContainers[i].Memory
		}
	}
	return nil
}

// Close stops every notifier and the poller.
func (w *Wakeups) Close() error {
	if w.cancel != nil {
		w.cancel()
	}
	w.stopMoves.Do(func() { close(w.moveStop) })
	<-w.moveEnded
	w.moveMu.Lock()
	w.moveCond.Broadcast() // a settle waiting for a batch that will not run
	w.moveMu.Unlock()
	w.mu.Lock()
	for _, m := range w.memcg {
		m.Close()
	}
	for _, c := range w.watches {
		c.Close()
	}
	for _, c := range append(w.closer, w.rootClose...) {
		c()
	}
	w.mu.Unlock()
	if err := w.poller.Close(); err != nil {
		return fmt.Errorf("close poller: %w", err)
	}
	return nil
}
