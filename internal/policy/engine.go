package policy

import (
	"errors"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Engine is the eviction manager as a deterministic state machine. It is not
// safe for concurrent use; the agent serialises Step, Reclaimed and Admit.
type Engine struct {
	cfg  Config
	fs   Filesystems
	base []Threshold // cfg.Thresholds as configured
	// thresholds is the effective list: base until the first synchronize,
	// then base with the containerfs rules applied (UpdateContainerFsThresholds).
	thresholds []Threshold

	synced      bool // the kubelet's dedicatedImageFs != nil
	splitBroken bool // split layout with KubeletSeparateDiskGC off: no rank/reclaim funcs

	// The kubelet's managerImpl state, keyed as it keys it: by threshold
	// value (signal, operator, value, grace period), not by position in the
	// configuration.
	//
	// firstObserved is thresholdsFirstObservedAt: the thresholds met in the
	// last synchronize and when each was first met, in the order they were
	// met (the order evictd takes for the kubelet's map; see
	// thresholdsMetGracePeriod).
	firstObserved []thresholdObservedAt
	condLast      map[v1.NodeConditionType]time.Time // nodeConditionsLastObservedAt
	conditions    []v1.NodeConditionType             // nodeConditions, sorted
	met           []Threshold                        // thresholdsMet: grace-satisfied in the last synchronize
	lastObs       *observations                      // lastObservations

	pending *pendingReclaim
	// loops is the loop breaker's memory (Profile.LoopBreaker; empty otherwise).
	loops loopBook
	facts factsCache
	// Buffers reused from one synchronize to the next (only the pending
	// reclaim holds on to them, and the next Step drops it first).
	statsBuf map[string]*statsv1alpha1.PodStats
	factsBuf []*podFacts
	rankBuf  ranked
}

// thresholdObservedAt is one entry of the kubelet's thresholdsObservedAt map.
type thresholdObservedAt struct {
	threshold Threshold
	at        time.Time
}

// pendingReclaim is the context of a synchronize waiting for Reclaimed.
type pendingReclaim struct {
	decision   Decision
	pods       []*v1.Pod
	facts      []*podFacts
	stats      map[string]*statsv1alpha1.PodStats
	thresholds []Threshold // actionable, deciding first
	obs        *observations
	deciding   Threshold
}

// NewEngine returns an engine for cfg on a node with filesystem layout fs.
// It checks the thresholds for values the kubelet could never have parsed.
func NewEngine(cfg Config, fs Filesystems) (*Engine, error) {
	for i, t := range cfg.Thresholds {
		if !ValidSignal(t.Signal) {
			return nil, fmt.Errorf("threshold %d: %w", i, unsupportedSignal(t.Signal))
		}
		if t.GracePeriod < 0 {
			return nil, fmt.Errorf("threshold %d (%s): negative grace period %v", i, t.Signal, t.GracePeriod)
		}
	}
	e := &Engine{
		cfg:      cfg,
		fs:       fs,
		base:     append([]Threshold(nil), cfg.Thresholds...),
		condLast: map[v1.NodeConditionType]time.Time{},
		loops:    loopBook{},
	}
	e.thresholds = e.base
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Filesystems returns the engine's filesystem layout.
func (e *Engine) Filesystems() Filesystems { return e.fs }

// Thresholds returns the effective thresholds: after the first Step they
// include the containerfs thresholds the kubelet derives for the layout.
func (e *Engine) Thresholds() []Threshold { return append([]Threshold(nil), e.thresholds...) }

// NodeConditions returns the node conditions of the last synchronize, sorted.
func (e *Engine) NodeConditions() []v1.NodeConditionType {
	return append([]v1.NodeConditionType(nil), e.conditions...)
}

func newDecision(now time.Time) Decision {
	return Decision{Now: now, Reclaim: []string{}, Candidates: []Candidate{}, Evictions: []Eviction{}, Events: []Event{},
		Met: []ThresholdStatus{}, InGrace: []ThresholdStatus{}, Actionable: []ThresholdStatus{}, NodeConditions: []v1.NodeConditionType{}}
}

// Step runs one kubelet synchronize at time now. It follows the kubelet's
// synchronize (eviction_manager.go) phase by phase, each phase named after
// the kubelet helper it reproduces: observe (makeSignalObservations),
// thresholds met (thresholdsMet, mergeThresholds), grace filter
// (thresholdsFirstObservedAt, thresholdsMetGracePeriod), conditions
// (nodeConditions, nodeConditionsLastObservedAt, nodeConditionsObservedSince),
// the stale-stats filter (thresholdsUpdatedStats), the reclaim decision
// (byEvictionPriority, getReclaimableThreshold, the node-level reclaim
// functions), rank and pick (evict).
func (e *Engine) Step(now time.Time, in Input) Decision {
	return e.StepHost(now, in, nil)
}

// StepHost is Step with the node's /proc/meminfo figures (nil: not read).
// The kubelet never reads them: they change a decision only with
// Profile.MemAvailable, and the Decision shows them beside the kubelet's
// figure (NodeMemory).
func (e *Engine) StepHost(now time.Time, in Input, host *HostMemory) (d Decision) {
	e.pending = nil
	d = newDecision(now)

	if len(e.thresholds) == 0 && !e.cfg.LocalStorageCapacityIsolation {
		d.Notes = append(d.Notes, "no thresholds and localStorageCapacityIsolation off: the eviction manager does nothing")
		d.NodeConditions = e.NodeConditions()
		return d
	}
	evaluate, ok := e.buildRankingFunctions(&d)
	if !ok {
		d.NodeConditions = e.NodeConditions()
		return d
	}
	if in.Summary == nil {
		d.Error = "failed to get summary stats"
		d.NodeConditions = e.NodeConditions()
		return d
	}

	// observe
	obs := e.observe(in.Summary, host, &d)
	d.Observations = obs.list()
	stats, facts := e.podInputs(in)

	// thresholds met, ignoring grace periods; then those met before whose
	// minimum reclaim is not yet satisfied (hysteresis)
	met := thresholdsMet(evaluate, obs, false)
	fresh := len(met)
	if len(e.met) > 0 {
		met = mergeThresholds(met, thresholdsMet(e.met, obs, true))
	}

	// grace filter and node conditions
	firstObserved := thresholdsFirstObservedAt(met, e.firstObserved, now)
	condLast := nodeConditionsLastObservedAt(nodeConditions(met), e.condLast, now)
	conditions := nodeConditionsObservedSince(condLast, e.cfg.PressureTransitionPeriod, now)
	graceMet := thresholdsMetGracePeriod(firstObserved, now)
	e.explainMet(&d, firstObserved, fresh, obs, now)
	if e.cfg.Profile.LoopBreaker {
		e.loops.expire(now, len(met) > 0, e.cfg.Profile.loopWindow())
		defer func() { d.Loops = e.loops.list() }()
	}

	// the kubelet's state update, then the stale-stats filter: act only on
	// thresholds whose stats are newer than the previous synchronize's
	e.conditions = conditions
	e.firstObserved = firstObserved
	e.condLast = condLast
	e.met = graceMet
	d.NodeConditions = e.NodeConditions()
	actionable, stale := thresholdsUpdatedStats(graceMet, obs, e.lastObs)
	for _, t := range stale {
		d.Stale = append(d.Stale, e.status(t, obs, firstObservedAt(firstObserved, t), now))
	}
	e.lastObs = obs

	if e.cfg.LocalStorageCapacityIsolation {
		if e.localStorageEviction(&d, in.Pods, facts, stats) {
			return d
		}
	}
	if len(actionable) == 0 {
		return d
	}

	// reclaim decision: the kubelet sorts the thresholds by eviction
	// priority and reclaims the resource of the first
	sort.Sort(byEvictionPriority(actionable))
	if e.cfg.Profile.HardPreemptsSoft {
		preferHard(actionable)
	}
	deciding, resource, ok := getReclaimableThreshold(actionable)
	if !ok { // never: every valid signal names a resource
		return d
	}
	e.explainDeciding(&d, actionable, deciding, resource, obs, firstObserved, now)
	if e.splitBroken {
		d.Notes = append(d.Notes, "no ranking function for signal "+string(deciding.Signal)+
			" (split filesystem with KubeletSeparateDiskGC off): nothing evicted")
		return d
	}
	funcs := reclaimFor(deciding.Signal, e.fs)
	if len(funcs) == 0 && e.cfg.Profile.ReclaimFirst {
		if mr := memoryReclaimFor(actionable, in.Summary, obs); mr != nil {
			d.MemoryReclaim = mr
			funcs = []string{ReclaimMemory}
		}
	}
	if len(funcs) > 0 {
		d.Reclaim = funcs
		d.ReclaimPending = true
		e.pending = &pendingReclaim{decision: d, pods: in.Pods, facts: facts, stats: stats, thresholds: actionable, obs: obs, deciding: deciding}
		return d
	}

	// rank and pick
	e.evict(&d, in.Pods, facts, stats, actionable, obs, deciding)
	return d
}

// explainMet records the met thresholds in d: each with its quantities and
// timing, the first fresh ones met now, the rest met only through their
// minimum reclaim; those still in their grace period also in d.InGrace.
func (e *Engine) explainMet(d *Decision, firstObserved []thresholdObservedAt, fresh int, obs *observations, now time.Time) {
	for k, fo := range firstObserved {
		st := e.status(fo.threshold, obs, fo.at, now)
		st.MinReclaimActive = k >= fresh
		d.Met = append(d.Met, st)
		if now.Sub(fo.at) < fo.threshold.GracePeriod {
			d.InGrace = append(d.InGrace, st)
		}
	}
}

// explainDeciding records the actionable thresholds (deciding first), the
// signal and resource to reclaim, and the kubelet's "Attempting to reclaim"
// node event.
func (e *Engine) explainDeciding(d *Decision, actionable []Threshold, deciding Threshold, resource v1.ResourceName, obs *observations, firstObserved []thresholdObservedAt, now time.Time) {
	for _, t := range actionable {
		d.Actionable = append(d.Actionable, e.status(t, obs, firstObservedAt(firstObserved, t), now))
	}
	dec := d.Actionable[0]
	d.Deciding = &dec
	d.Signal = deciding.Signal
	d.Resource = resource
	d.Events = append(d.Events, Event{Object: "Node", Type: v1.EventTypeWarning, Reason: "EvictionThresholdMet",
		Message: fmt.Sprintf("Attempting to reclaim %s", resource)})
}

// buildRankingFunctions is the block of the kubelet's synchronize that runs
// while the filesystem layout is not yet known (dedicatedImageFs == nil): on
// the first synchronize it records the layout and derives the containerfs
// thresholds (UpdateContainerFsThresholds), or fails for good on a split
// layout with KubeletSeparateDiskGC off. It returns the thresholds this
// synchronize evaluates: on the first one the kubelet still evaluates the
// list it had before the block (the containerfs thresholds it appends are
// seen from the second synchronize on; in-place overrides at once).
func (e *Engine) buildRankingFunctions(d *Decision) ([]Threshold, bool) {
	if e.synced {
		return e.thresholds, true
	}
	e.synced = true
	if e.fs.SplitContainerFs && !e.cfg.Features.KubeletSeparateDiskGC {
		e.splitBroken = true
		d.Error = ErrSplitFsWithoutGate.Error()
		return nil, false
	}
	e.thresholds, _ = updateContainerFsThresholds(e.base, e.fs.DedicatedImageFs, e.fs.SplitContainerFs)
	evaluate := e.thresholds[:len(e.base)]
	for _, t := range e.thresholds[len(e.base):] {
		if t.Operator != "" { // copies without a source never fire anyway
			d.Unevaluated = append(d.Unevaluated, t)
		}
	}
	return evaluate, true
}

// podInputs indexes the Summary's pod stats by UID and returns the pods'
// cached facts, in pod order (the kubelet's statsFunc and the parts of the
// pod specs ranking reads).
func (e *Engine) podInputs(in Input) (map[string]*statsv1alpha1.PodStats, []*podFacts) {
	e.statsBuf = podStatsIndexInto(e.statsBuf, in.Summary)
	e.facts.begin()
	if cap(e.factsBuf) < len(in.Pods) {
		e.factsBuf = make([]*podFacts, len(in.Pods))
	}
	facts := e.factsBuf[:len(in.Pods)]
	for i, p := range in.Pods {
		facts[i] = e.facts.get(p, e.cfg.Features)
	}
	e.facts.end(len(in.Pods))
	return e.statsBuf, facts
}

// thresholdsMet is the kubelet's thresholdsMet: the thresholds whose
// quantity (+ minimum reclaim when enforceMinReclaim) exceeds what is
// available, in input order.
func thresholdsMet(thresholds []Threshold, obs *observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for i := range thresholds {
		t := &thresholds[i]
		o, ok := obs.get(t.Signal)
		if !ok {
			continue
		}
		q := thresholdQuantity(t.Value, &o.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(*thresholdQuantity(*t.MinReclaim, &o.Capacity))
		}
		if t.Operator == OpLessThan && q.Cmp(o.Available) > 0 {
			out = append(out, *t)
		}
	}
	return out
}

// mergeThresholds is the kubelet's mergeThresholds: a, then the thresholds
// of b not in a (hasThreshold).
func mergeThresholds(a, b []Threshold) []Threshold {
	for _, t := range b {
		if !hasThreshold(a, t) {
			a = append(a, t)
		}
	}
	return a
}

// thresholdsFirstObservedAt is the kubelet's thresholdsFirstObservedAt:
// each met threshold with when it was first met — carried over from last,
// or now for a threshold not met last time.
func thresholdsFirstObservedAt(met []Threshold, last []thresholdObservedAt, now time.Time) []thresholdObservedAt {
	out := make([]thresholdObservedAt, 0, len(met))
	for _, t := range met {
		at := now
		for _, l := range last {
			if sameThreshold(l.threshold, t) {
				at = l.at
				break
			}
		}
		out = append(out, thresholdObservedAt{t, at})
	}
	return out
}

// thresholdsMetGracePeriod is the kubelet's thresholdsMetGracePeriod: the
// thresholds met for at least their grace period. The kubelet iterates a Go
// map, a random rotation of its insertion order; evictd takes the insertion
// order, the kubelet's most likely one (docs/kubelet-parity.md).
func thresholdsMetGracePeriod(observedAt []thresholdObservedAt, now time.Time) []Threshold {
	var out []Threshold
	for _, fo := range observedAt {
		if now.Sub(fo.at) >= fo.threshold.GracePeriod {
			out = append(out, fo.threshold)
		}
	}
	return out
}

// nodeConditions is the kubelet's nodeConditions: the conditions the met
// thresholds raise, each once, in order.
func nodeConditions(met []Threshold) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, t := range met {
		if c, ok := signalToCondition[t.Signal]; ok && !hasNodeCondition(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func hasNodeCondition(list []v1.NodeConditionType, c v1.NodeConditionType) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// nodeConditionsLastObservedAt is the kubelet's nodeConditionsLastObservedAt:
// the observed conditions at now, the others at when last seen.
func nodeConditionsLastObservedAt(observed []v1.NodeConditionType, last map[v1.NodeConditionType]time.Time, now time.Time) map[v1.NodeConditionType]time.Time {
	out := make(map[v1.NodeConditionType]time.Time, 3)
	for c, at := range last {
		out[c] = at
	}
	for _, c := range observed {
		out[c] = now
	}
	return out
}

// nodeConditionsObservedSince is the kubelet's nodeConditionsObservedSince:
// the conditions last observed less than period ago, sorted (the kubelet's
// order is a map's; the node status sorts nothing, evictd sorts for output).
func nodeConditionsObservedSince(observedAt map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for c, at := range observedAt {
		if now.Sub(at) < period {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// thresholdsUpdatedStats is the kubelet's thresholdsUpdatedStats: of the
// thresholds, those whose signal was observed more recently than in last (or
// whose stats carry no time) are updated, the others stale. A threshold
// without an observation is in neither, as the kubelet drops it.
func thresholdsUpdatedStats(thresholds []Threshold, obs, last *observations) (updated, stale []Threshold) {
	for _, t := range thresholds {
		o, ok := obs.get(t.Signal)
		if !ok {
			continue
		}
		var l *Observation
		if last != nil {
			l, _ = last.get(t.Signal)
		}
		if l == nil || o.Time.IsZero() || o.Time.After(l.Time.Time) {
			updated = append(updated, t)
		} else {
			stale = append(stale, t)
		}
	}
	return updated, stale
}

func firstObservedAt(list []thresholdObservedAt, t Threshold) time.Time {
	for _, fo := range list {
		if sameThreshold(fo.threshold, t) {
			return fo.at
		}
	}
	return time.Time{}
}

// getReclaimableThreshold is the kubelet's getReclaimableThreshold: the
// first threshold whose signal names a resource to reclaim, and that
// resource.
func getReclaimableThreshold(thresholds []Threshold) (Threshold, v1.ResourceName, bool) {
	for _, t := range thresholds {
		if r, ok := signalToResource[t.Signal]; ok {
			return t, r, true
		}
	}
	return Threshold{}, "", false
}

// Reclaimed continues a synchronize whose Decision requested node-level
// reclaim, after the caller ran the reclaim functions. fresh is the Summary
// seen afterwards; nil means it could not be read, and the kubelet then goes
// on to evict. As in the kubelet, every threshold is checked against fresh
// with its minimum reclaim; if none is met no pod is evicted, otherwise pods
// are ranked with the stats of the original synchronize.
func (e *Engine) Reclaimed(now time.Time, fresh *statsv1alpha1.Summary) Decision {
	return e.ReclaimedHost(now, fresh, nil)
}

// ReclaimedHost is Reclaimed with the node's /proc/meminfo figures read
// after the reclaim (Input.Host; they matter with Profile.MemAvailable).
func (e *Engine) ReclaimedHost(now time.Time, fresh *statsv1alpha1.Summary, host *HostMemory) Decision {
	p := e.pending
	e.pending = nil
	if p == nil {
		return Decision{Now: now, Error: "no node-level reclaim is pending", Reclaim: []string{}, Candidates: []Candidate{},
			Evictions: []Eviction{}, Events: []Event{}, NodeConditions: e.NodeConditions()}
	}
	d := p.decision
	d.ReclaimPending = false
	if fresh == nil {
		d.Notes = append(d.Notes, "no stats after node-level reclaim: evicting")
	} else {
		obs := e.observe(fresh, host, nil)
		d.AfterReclaim = obs.list()
		if len(thresholdsMet(e.thresholds, obs, true)) == 0 {
			d.ReclaimSufficient = true
			return d
		}
	}
	e.evict(&d, p.pods, p.facts, p.stats, p.thresholds, p.obs, p.deciding)
	if e.cfg.Profile.LoopBreaker {
		d.Loops = e.loops.list()
	}
	return d
}

// evict ranks the pods for the deciding signal and kills at most one.
func (e *Engine) evict(d *Decision, pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats, ordered []Threshold, obs *observations, deciding Threshold) {
	if len(pods) == 0 {
		d.Notes = append(d.Notes, "eviction thresholds have been met, but no pods are active to evict")
		return
	}
	ranked := e.rank(pods, facts, stats, deciding.Signal, &e.rankBuf)
	d.Candidates = candidatesOf(ranked, facts, deciding.Signal, e.fs)
	res := signalToResource[deciding.Signal]
	for r := 0; r < ranked.len(); r++ {
		pod := ranked.at(r).pod
		critical := facts[ranked.order[r]].critical
		grace := int64(immediateEvictionGracePeriodSeconds)
		if !deciding.Hard() {
			grace = e.cfg.MaxPodGracePeriodSeconds
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = min(e.cfg.MaxPodGracePeriodSeconds, *pod.Spec.TerminationGracePeriodSeconds)
			}
		}
		ps, found := stats[string(pod.UID)]
		msg, ann := evictionMessage(res, pod, ps, found, ordered, obs, e.cfg.Features)
		if critical {
			d.SkippedCritical = append(d.SkippedCritical, refOf(pod))
			continue
		}
		cond := &v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: pod.Generation,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            msg,
		}
		e.record(d, pod, grace, msg, ann, cond, string(deciding.Signal), deciding.Hard())
		if e.cfg.Profile.LoopBreaker {
			e.noteLoop(d, pod, d.Now)
		}
		return
	}
	d.Notes = append(d.Notes, "unable to evict any pods from the node")
}

func (e *Engine) record(d *Decision, pod *v1.Pod, grace int64, msg string, ann map[string]string, cond *v1.PodCondition, signal string, immediate bool) {
	d.Evictions = append(d.Evictions, Eviction{Pod: refOf(pod), GracePeriodSeconds: grace, Message: msg,
		Annotations: ann, Condition: cond, Signal: signal, Limit: cond == nil, Immediate: immediate})
	d.Events = append(d.Events, Event{Object: pod.Namespace + "/" + pod.Name, Type: v1.EventTypeWarning,
		Reason: Reason, Message: msg, Annotations: ann})
}

// localStorageEviction evicts every pod over an emptyDir sizeLimit, its pod
// ephemeral-storage limit or a container's (sidecars included), in pod
// order, checking each pod in that order and stopping at the first hit.
func (e *Engine) localStorageEviction(d *Decision, pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats) bool {
	evicted := false
	for i, pod := range pods {
		f := facts[i]
		if len(f.emptyDirLimits) == 0 && !f.hasPodEphLimit && len(f.containerEphLimits) == 0 {
			continue // nothing to exceed
		}
		ps, ok := stats[string(pod.UID)]
		if !ok {
			continue
		}
		// For a critical pod the kubelet's evictPod refuses, and it goes on to
		// the next check.
		if hit, msg, sig := emptyDirOverLimit(ps, f); hit {
			if e.evictLimit(d, pod, f, msg, sig) {
				evicted = true
				continue
			}
		}
		if hit, msg, sig := podOverLimit(ps, f); hit {
			if e.evictLimit(d, pod, f, msg, sig) {
				evicted = true
				continue
			}
		}
		if hit, msg, sig := e.containerOverLimit(ps, f); hit {
			evicted = e.evictLimit(d, pod, f, msg, sig) || evicted
		}
	}
	return evicted
}

func (e *Engine) evictLimit(d *Decision, pod *v1.Pod, f *podFacts, msg, sig string) bool {
	if f.critical {
		d.SkippedCritical = append(d.SkippedCritical, refOf(pod))
		return false
	}
	e.record(d, pod, immediateEvictionGracePeriodSeconds, msg, nil, nil, sig, true)
	return true
}

func emptyDirOverLimit(ps *statsv1alpha1.PodStats, f *podFacts) (bool, string, string) {
	for _, ed := range f.emptyDirLimits {
		var used int64
		measured := false
		// The kubelet dereferences usedBytes without a check (a nil would
		// crash it); evictd treats a volume without usedBytes as unmeasured.
		// The last stats entry of the name wins, as in the kubelet's map.
		for j := range ps.VolumeStats {
			if ps.VolumeStats[j].Name == ed.name && ps.VolumeStats[j].UsedBytes != nil {
				used, measured = int64(*ps.VolumeStats[j].UsedBytes), true
			}
		}
		// used > size, written as size < used so that no Quantity escapes
		if measured && ed.q.Cmp(*resource.NewQuantity(used, resource.BinarySI)) < 0 {
			return true, fmt.Sprintf(emptyDirMessageFmt, ed.name, ed.q.String()), SignalEmptyDirFsLimit
		}
	}
	return false, "", ""
}

func podOverLimit(ps *statsv1alpha1.PodStats, f *podFacts) (bool, string, string) {
	if !f.hasPodEphLimit {
		return false, "", ""
	}
	var usage int64
	if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
		usage = int64(*ps.EphemeralStorage.UsedBytes)
	}
	if f.podEphLimit.Cmp(*resource.NewQuantity(usage, resource.BinarySI)) < 0 {
		return true, fmt.Sprintf(podEphemeralStorageMessageFmt, f.podEphLimit.String()), SignalEphemeralPodFsLimit
	}
	return false, "", ""
}

func (e *Engine) containerOverLimit(ps *statsv1alpha1.PodStats, f *podFacts) (bool, string, string) {
	if len(f.containerEphLimits) == 0 {
		return false, "", ""
	}
	for i := range ps.Containers {
		cs := &ps.Containers[i]
		l, ok := f.containerEphLimit(cs.Name)
		if !ok {
			continue
		}
		used := fsUsed(cs.Logs)
		if !e.fs.DedicatedImageFs {
			// the kubelet adds two Quantities; int64 addition is the same
			// below 2^63 bytes, which filesystems do not reach
			used += fsUsed(cs.Rootfs)
		}
		if l.Cmp(*resource.NewQuantity(used, resource.BinarySI)) < 0 {
			return true, fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, l.String()), SignalEphemeralContainerFsLimit
		}
	}
	return false, "", ""
}

// hasThreshold is the kubelet's hasThreshold: sameThreshold with one of list.
func hasThreshold(list []Threshold, t Threshold) bool {
	for _, x := range list {
		if sameThreshold(x, t) {
			return true
		}
	}
	return false
}

// sameThreshold is how the kubelet tells thresholds apart (hasThreshold,
// and the keys of its thresholdsObservedAt map): same grace period,
// operator, signal and value (compareThresholdValue). Minimum reclaim is not
// compared: it is set per signal, so thresholds equal in the rest have the
// same one.
func sameThreshold(a, b Threshold) bool {
	return a.GracePeriod == b.GracePeriod && a.Operator == b.Operator && a.Signal == b.Signal && sameValue(a.Value, b.Value)
}

// sameValue is the kubelet's compareThresholdValue.
func sameValue(a, b ThresholdValue) bool {
	if a.Quantity != nil {
		return b.Quantity != nil && a.Quantity.Cmp(*b.Quantity) == 0
	}
	if b.Quantity != nil {
		return false
	}
	return a.Percentage == b.Percentage
}

func (e *Engine) status(t Threshold, obs *observations, first, now time.Time) ThresholdStatus {
	st := ThresholdStatus{Threshold: t, FirstObserved: first}
	if o, ok := obs.get(t.Signal); ok {
		st.Quantity = thresholdQuantity(t.Value, &o.Capacity)
		a := o.Available.DeepCopy()
		st.Available = &a
	}
	if left := t.GracePeriod - now.Sub(first); left > 0 {
		st.GraceRemaining = left
	}
	return st
}

// byEvictionPriority is the kubelet's byEvictionPriority: Less(i, j) holds
// when i is a memory signal, or j has no resource (never here: every valid
// signal has one). It is not a strict order; with the kubelet's sort.Sort
// (insertion sort up to 12 elements) it moves the memory thresholds to the
// front in reverse order and keeps the others in order.
type byEvictionPriority []Threshold

func (b byEvictionPriority) Len() int      { return len(b) }
func (b byEvictionPriority) Swap(i, j int) { b[i], b[j] = b[j], b[i] }
func (b byEvictionPriority) Less(i, j int) bool {
	_, jHasResource := signalToResource[b[j].Signal]
	return b[i].Signal == SignalMemoryAvailable || b[i].Signal == SignalAllocatableMemoryAvailable || !jHasResource
}

// Admit is the kubelet's admission check under node pressure: no condition →
// admit; critical pods → admit; MemoryPressure alone → admit all but
// BestEffort pods that do not tolerate the memory-pressure taint; any other
// condition → reject.
func (e *Engine) Admit(pod *v1.Pod) AdmitResult {
	if len(e.conditions) == 0 {
		return AdmitResult{Admit: true}
	}
	if IsCriticalPod(pod) {
		return AdmitResult{Admit: true}
	}
	if len(e.conditions) == 1 && e.conditions[0] == v1.NodeMemoryPressure {
		if PodQOS(pod, e.cfg.Features) != v1.PodQOSBestEffort {
			return AdmitResult{Admit: true}
		}
		if toleratesMemoryPressure(pod, e.cfg.Features) {
			return AdmitResult{Admit: true}
		}
	}
	return AdmitResult{Admit: false, Reason: Reason, Message: fmt.Sprintf(nodeConditionMessageFmt, e.conditions)}
}

// updateContainerFsThresholds is the kubelet's UpdateContainerFsThresholds:
// containerfs thresholds are overwritten in place (with an error the kubelet
// only logs) and missing ones appended, copied from nodefs (single or split
// layout) or imagefs (dedicated imagefs only). A copy from a threshold that
// does not exist has no operator and never fires.
func updateContainerFsThresholds(in []Threshold, imageFs, split bool) ([]Threshold, error) {
	th := append([]Threshold(nil), in...)
	var hardNodeFs, softNodeFs, hardNodeInodes, softNodeInodes Threshold
	var hardImageFs, softImageFs, hardImageInodes, softImageInodes Threshold
	hardCFs, softCFs, hardCInodes, softCInodes := -1, -1, -1, -1
	var errs []error
	for i, t := range th {
		hard := t.Hard()
		switch t.Signal {
		case SignalImageFsAvailable:
			if hard {
				hardImageFs = t
			} else {
				softImageFs = t
			}
		case SignalImageFsInodesFree:
			if hard {
				hardImageInodes = t
			} else {
				softImageInodes = t
			}
		case SignalNodeFsAvailable:
			if hard {
				hardNodeFs = t
			} else {
				softNodeFs = t
			}
		case SignalNodeFsInodesFree:
			if hard {
				hardNodeInodes = t
			} else {
				softNodeInodes = t
			}
		case SignalContainerFsAvailable:
			if hard {
				errs = append(errs, errors.New("found containerfs.available for hard eviction. ignoring"))
				hardCFs = i
			} else {
				errs = append(errs, errors.New("found containerfs.available for soft eviction. ignoring"))
				softCFs = i
			}
		case SignalContainerFsInodesFree:
			if hard {
				errs = append(errs, errors.New("found containerfs.inodesFree for hard eviction. ignoring"))
				hardCInodes = i
			} else {
				errs = append(errs, errors.New("found containerfs.inodesFree for soft eviction. ignoring"))
				softCInodes = i
			}
		}
	}
	set := func(idx int, sig Signal, src Threshold, withGrace bool) {
		t := Threshold{Signal: sig, Operator: src.Operator, Value: src.Value, MinReclaim: src.MinReclaim}
		if withGrace {
			t.GracePeriod = src.GracePeriod
		}
		if idx != -1 {
			th[idx] = t
		} else {
			th = append(th, t)
		}
	}
	switch {
	case (imageFs && split) || (!imageFs && !split):
		set(hardCFs, SignalContainerFsAvailable, hardNodeFs, false)
		set(softCFs, SignalContainerFsAvailable, softNodeFs, true)
		set(hardCInodes, SignalContainerFsInodesFree, hardNodeInodes, false)
		set(softCInodes, SignalContainerFsInodesFree, softNodeInodes, true)
	case imageFs && !split:
		set(hardCFs, SignalContainerFsAvailable, hardImageFs, false)
		set(softCFs, SignalContainerFsAvailable, softImageFs, true)
		// the kubelet copies the grace period for the hard inode override too (it is 0)
		set(hardCInodes, SignalContainerFsInodesFree, hardImageInodes, hardCInodes != -1)
		set(softCInodes, SignalContainerFsInodesFree, softImageInodes, true)
	}
	// The kubelet's errors.Join of a single error keeps only the last one.
	if len(errs) > 0 {
		return th, errs[len(errs)-1]
	}
	return th, nil
}
