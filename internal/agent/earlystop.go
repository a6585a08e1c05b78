package agent

import (
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
)

// The early growth stop. A synchronize costs 0.5 ms of cgroup reads on a
// quiet host and several milliseconds beside the allocator it races (the
// reads compete with it for the CPUs and the kernel's memcg statistics),
// and the loop may be inside one when the crossing comes; the victim's
// growth used to stop only after the synchronize that the crossing woke.
// So each synchronize also ranks the pods as a hard memory threshold's
// eviction would rank them now and keeps the first one ready ("armed"). A
// wake-up that reports a hard memory threshold crossed (Wake.Crossed: a v1
// memcg threshold whose usage read says it is above, the fast poll's count
// of met thresholds going up) stops that pod's growth at once, on the
// notifier's own goroutine (notify.Waker.OnWake): a read and a write,
// before any synchronize. The synchronize then decides as ever, on fresh
// stats. Its victim keeps the stop, recorded as early (GrowthStop.Early,
// with the time it took hold); any other pod's early stop is undone by that
// synchronize before any eviction starts, and the record and a log line
// say so. Decisions do not change; only when the victim's growth stops.
// The v1 arming threshold (WakeupConfig.Arm) wakes a synchronize ahead of
// the crossing, so that a workload that appeared since the last one is
// ranked too.

// earlyState is what the loop and the wake-up hook share.
type earlyState struct {
	mu      sync.Mutex
	armed   *armedStop
	early   *earlyStop
	stopped bool // the loop has ended: nothing may be held any more
	// loopRecs are the loop's holds as last saved (saveHolds): the hook
	// writes them with its own to the holds file.
	loopRecs []actuate.HoldRecord
}

// armedStop is the pod a hard memory threshold's eviction would take, as
// the last synchronize ranked the pods.
type armedStop struct {
	pod  *v1.Pod
	keys map[string]bool // the hard memory thresholds (Threshold.String) it stands ready for
}

// earlyStop is a hold placed on a wake-up, until a synchronize confirms or
// undoes it.
type earlyStop struct {
	h      *actuate.Hold
	uid    types.UID
	pod    policy.PodRef
	wakeAt time.Time // the wake-up's
	at     time.Time // when the limit was in force
	key    string    // the hard threshold the wake-up reported crossed (Wake.Crossed)
	moved  bool      // a synchronize moved it up to its threshold (moveEarly)
}

// earlyMoveMax is the largest shortfall across which a synchronize moves
// an early stop instead of undoing it. A v1 wake-up's usage level is the
// threshold less the inactive file cache of the last synchronize, which
// has changed since: on the real node the stop held pods 32 KiB to 0.8 MiB
// short of the threshold as the Summary then saw it (bench/node.sh, 64 MiB
// of headroom, 5 of 60 trials). Undone, the stop let the allocator cross
// with nothing in force, and growth stopped only 4–8 ms after the
// crossing, at the next wake-up's synchronize. A larger shortfall is not
// the level's error but a wake-up far from the threshold: the stop is
// undone.
const earlyMoveMax = 4 << 20 // bytes

// earlyMoveSlack is how far past the threshold a moved stop lets the
// workload grow: the threshold is met only below it (available <
// quantity, strictly). Every byte of it is growth after the crossing: 1
// MiB let allocators paced at 200–350 MiB/s grow 3–12 ms past it on the
// real node (3 moves in 60 trials); 128 KiB is 0.6 ms at 200 MiB/s.
const earlyMoveSlack = 128 << 10 // bytes

// hardMemoryKeys names the engine's hard memory thresholds (nil: none).
func hardMemoryKeys(ts []policy.Threshold) map[string]bool {
	var keys map[string]bool
	for _, t := range ts {
		if !t.Hard() || (t.Signal != policy.SignalMemoryAvailable && t.Signal != policy.SignalAllocatableMemoryAvailable) {
			continue
		}
		if keys == nil {
			keys = map[string]bool{}
		}
		keys[t.String()] = true
	}
	return keys
}

// earlyHook is what the agent installs on its waker: a Waker that has no
// such hook gets no early stop (its wake-ups still run synchronizes).
type earlyHook interface {
	OnWake(func(notify.Wake))
}

// arm ranks pods for a hard memory threshold's eviction on summary and
// keeps the first that the eviction would take and that holds no stop
// yet. Nothing is armed without a holder or a hard memory threshold, or in
// a dry run.
func (a *Agent) arm(summary *statsv1alpha1.Summary, pods []*v1.Pod) {
	var ar *armedStop
	if keys := hardMemoryKeys(a.cfg.Engine.Thresholds()); a.earlyOn && keys != nil && summary != nil {
		// memory.available and allocatableMemory.available rank alike
		// (the kubelet's rankMemoryPressure).
		for _, c := range a.cfg.Engine.Rank(policy.SignalMemoryAvailable, policy.Input{Summary: summary, Pods: pods}) {
			p := findPod(pods, c.Pod)
			if p == nil || policy.IsCriticalPod(p) {
				continue // the kubelet's evictPod refuses it and takes the next
			}
			if a.holds[p.UID] == nil {
				ar = &armedStop{pod: p, keys: keys}
			}
			break
		}
	}
	a.es.mu.Lock()
	a.es.armed = ar
	a.es.mu.Unlock()
}

// onWake stops the armed pod's growth when w reports a hard memory
// threshold crossed. It runs on the notifier's goroutine. A failure is
// left to the synchronize, which holds its victim as it always has.
func (a *Agent) onWake(w notify.Wake) {
	if w.Crossed == "" {
		return
	}
	es := &a.es
	es.mu.Lock()
	defer es.mu.Unlock()
	ar := es.armed
	if es.stopped || ar == nil || es.early != nil || !ar.keys[w.Crossed] {
		return
	}
	es.armed = nil // one stop per arming
	h, err := a.cfg.Holder.Hold(ar.pod, actuate.Memory)
	if err != nil || h.DryRun {
		return
	}
	es.early = &earlyStop{h: h, uid: ar.pod.UID, pod: policy.PodRef{Namespace: ar.pod.Namespace, Name: ar.pod.Name, UID: string(ar.pod.UID)},
		wakeAt: w.At, at: a.cfg.Clock.Now(), key: w.Crossed}
	if a.holdsFile != nil {
		a.holdsFile.Set(append(append([]actuate.HoldRecord(nil), es.loopRecs...), h.Record()))
	}
}

// takeEarly hands the loop the early stop on uid, the synchronize's
// victim, if there is one, and disarms uid so that no wake-up holds it
// beside the loop's own hold.
func (a *Agent) takeEarly(uid types.UID) *earlyStop {
	es := &a.es
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.armed != nil && es.armed.pod.UID == uid {
		es.armed = nil
	}
	e := es.early
	if e == nil || e.uid != uid {
		return nil
	}
	es.early = nil
	return e
}

// confirmEarly records e, the early stop on the synchronize's victim, as
// the victim's hold.
func (a *Agent) confirmEarly(e *earlyStop) *GrowthStop {
	if a.holds == nil {
		a.holds = map[types.UID]*actuate.Hold{}
	}
	a.holds[e.uid] = e.h
	a.saveHolds()
	gs := growthStop(e.h, e.at, Trigger{At: e.wakeAt})
	gs.Early, gs.Moved = true, e.moved
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.growthStop(e.h.Mechanism, "stopped", gs.AfterTrigger)
	}
	return gs
}

// undoEarly releases an early stop placed before this synchronize began
// (at start) that it did not confirm: its pod is not the victim (another
// pod is, or there is no eviction). A stop placed during the synchronize
// waits for the next, which its wake-up runs: this one's stats may predate
// the crossing. A stop found just short of its threshold with no eviction
// at all (evicting false; resolved is this synchronize's thresholds) is
// moved instead (moveEarly). It returns the stop as the record keeps it
// and whether it was moved rather than undone; nil when none was touched.
func (a *Agent) undoEarly(start time.Time, trig Trigger, evicting bool, resolved []policy.ResolvedThreshold) (*GrowthStop, bool) {
	es := &a.es
	es.mu.Lock()
	e := es.early
	if e == nil || !e.at.Before(start) {
		es.mu.Unlock()
		return nil, false
	}
	if !evicting && !e.moved {
		if gs := a.moveEarly(e, resolved); gs != nil {
			es.mu.Unlock()
			a.saveHolds()
			return gs, true
		}
	}
	es.early = nil
	es.mu.Unlock()
	gs := growthStop(e.h, e.at, Trigger{At: e.wakeAt})
	gs.Early, gs.Pod = true, &e.pod
	gs.Released = "not the victim: the synchronize after the wake-up did not evict it"
	if err := e.h.Release(); err != nil {
		a.log.Warn("cannot undo a growth stop", "workload", e.h.Target.Name, "err", err)
	}
	a.saveHolds()
	a.log.Info("early growth stop undone: the synchronize did not choose the pod", "pod", e.pod.Namespace+"/"+e.pod.Name,
		"trigger", trig.Reason, "wake_source", trig.Source, "held", a.cfg.Clock.Now().Sub(e.at))
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.growthStop(e.h.Mechanism, "undone", 0)
	}
	return gs, false
}

// moveEarly moves e's limit to its threshold's shortfall (how much the
// threshold's signal is still above it) above the pod's usage, and
// earlyMoveSlack more, when the shortfall is at most earlyMoveMax: the
// workload may then grow until the threshold is met, and hardly further,
// and the next crossing's wake-up runs the synchronize that
// confirms or undoes the stop as it would have this one. A stop is moved
// once: the next synchronize that does not confirm it undoes it. It returns
// the stop as moved, nil when it was not (the caller undoes it). Called
// with es.mu held (the hook places stops under it).
func (a *Agent) moveEarly(e *earlyStop, resolved []policy.ResolvedThreshold) *GrowthStop {
	var short int64 = -1
	for _, r := range resolved {
		if r.Threshold.String() == e.key {
			short = r.Observation.Available.Value() - r.Quantity.Value()
			break
		}
	}
	if short <= 0 || short > earlyMoveMax {
		return nil
	}
	if err := e.h.Raise(uint64(short + earlyMoveSlack)); err != nil {
		if !errors.Is(err, actuate.ErrNotRaisable) {
			a.log.Warn("cannot move an early growth stop; undoing it", "workload", e.h.Target.Name, "err", err)
		}
		return nil
	}
	e.moved = true
	gs := growthStop(e.h, e.at, Trigger{At: e.wakeAt})
	gs.Early, gs.Pod = true, &e.pod
	a.log.Info("early growth stop moved to its threshold: the synchronize after the wake-up found it not met yet", "pod", e.pod.Namespace+"/"+e.pod.Name,
		"threshold", e.key, "short_bytes", short, "limit", e.h.Limit)
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.growthStop(e.h.Mechanism, "moved", 0)
	}
	return gs
}

// endEarly disarms for good and undoes an early stop not yet taken: the
// loop is ending.
func (a *Agent) endEarly() {
	es := &a.es
	es.mu.Lock()
	es.stopped, es.armed = true, nil
	e := es.early
	es.early = nil
	es.mu.Unlock()
	if e != nil {
		if err := e.h.Release(); err != nil {
			a.log.Warn("cannot undo a growth stop", "workload", e.h.Target.Name, "err", err)
		}
	}
}

// saveHolds hands the stops in force, the loop's and an early one not
// yet taken, to the holds file's writer; under the lock that the hook
// writes under, so that the file's last write is the newest.
func (a *Agent) saveHolds() {
	if a.holdsFile == nil {
		return
	}
	recs := make([]actuate.HoldRecord, 0, len(a.holds)+1)
	for _, h := range a.holds {
		if r := h.Record(); len(r.Writes) > 0 {
			recs = append(recs, r)
		}
	}
	es := &a.es
	es.mu.Lock()
	defer es.mu.Unlock()
	es.loopRecs = recs
	if es.early != nil {
		recs = append(recs[:len(recs):len(recs)], es.early.h.Record())
	}
	a.holdsFile.Set(recs)
}
