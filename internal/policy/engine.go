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
	// firstObserved maps an index into thresholds to when it was first met.
	firstObserved map[int]time.Time
	condLast      map[v1.NodeConditionType]time.Time
	conditions    []v1.NodeConditionType
	met           []int // grace-satisfied thresholds of the last synchronize
	lastObs       *observations

	pending *pendingReclaim
	facts   factsCache
	// Buffers reused from one synchronize to the next (only the pending
	// reclaim holds on to them, and the next Step drops it first).
	statsBuf map[string]*statsv1alpha1.PodStats
	factsBuf []*podFacts
	rankBuf  ranked
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
			return nil, fmt.Errorf("threshold %d: unsupported eviction signal %v", i, t.Signal)
		}
		if t.GracePeriod < 0 {
			return nil, fmt.Errorf("threshold %d (%s): negative grace period %v", i, t.Signal, t.GracePeriod)
		}
	}
	e := &Engine{
		cfg:           cfg,
		fs:            fs,
		base:          append([]Threshold(nil), cfg.Thresholds...),
		firstObserved: map[int]time.Time{},
		condLast:      map[v1.NodeConditionType]time.Time{},
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

// Step runs one kubelet synchronize at time now.
func (e *Engine) Step(now time.Time, in Input) Decision {
	e.pending = nil
	d := Decision{Now: now, Reclaim: []string{}, Candidates: []Candidate{}, Evictions: []Eviction{}, Events: []Event{},
		Met: []ThresholdStatus{}, InGrace: []ThresholdStatus{}, Actionable: []ThresholdStatus{}, NodeConditions: []v1.NodeConditionType{}}

	if len(e.thresholds) == 0 && !e.cfg.LocalStorageCapacityIsolation {
		d.Notes = append(d.Notes, "no thresholds and localStorageCapacityIsolation off: the eviction manager does nothing")
		d.NodeConditions = e.NodeConditions()
		return d
	}

	// The kubelet evaluates only the thresholds it had before this block on
	// its first synchronize: the containerfs thresholds it appends are seen
	// from the second synchronize on (in-place overrides are seen at once).
	evaluate := len(e.thresholds)
	if !e.synced {
		e.synced = true
		if e.fs.SplitContainerFs && !e.cfg.Features.KubeletSeparateDiskGC {
			e.splitBroken = true
			d.Error = ErrSplitFsWithoutGate.Error()
			d.NodeConditions = e.NodeConditions()
			return d
		}
		evaluate = len(e.base)
		e.thresholds, _ = updateContainerFsThresholds(e.base, e.fs.DedicatedImageFs, e.fs.SplitContainerFs)
		for _, t := range e.thresholds[evaluate:] {
			if t.Operator != "" { // copies without a source never fire anyway
				d.Unevaluated = append(d.Unevaluated, t)
			}
		}
	}

	if in.Summary == nil {
		d.Error = "failed to get summary stats"
		d.NodeConditions = e.NodeConditions()
		return d
	}

	obs := makeObservations(in.Summary)
	e.statsBuf = podStatsIndexInto(e.statsBuf, in.Summary)
	stats := e.statsBuf
	d.Observations = obs.list()
	e.facts.begin()
	if cap(e.factsBuf) < len(in.Pods) {
		e.factsBuf = make([]*podFacts, len(in.Pods))
	}
	facts := e.factsBuf[:len(in.Pods)]
	for i, p := range in.Pods {
		facts[i] = e.facts.get(p, e.cfg.Features)
	}
	e.facts.end(len(in.Pods))

	idx := make([]int, evaluate)
	for i := range idx {
		idx[i] = i
	}
	met := e.thresholdsMet(idx, obs, false)
	fromMet := make(map[int]bool, len(met))
	for _, i := range met {
		fromMet[i] = true
	}
	if len(e.met) > 0 {
		for _, i := range e.thresholdsMet(e.met, obs, true) {
			if !e.hasThreshold(met, i) {
				met = append(met, i)
			}
		}
	}

	firstObserved := make(map[int]time.Time, len(met))
	for _, i := range met {
		at, ok := e.firstObserved[i]
		if !ok {
			at = now
		}
		firstObserved[i] = at
	}

	condLast := make(map[v1.NodeConditionType]time.Time, 3)
	for _, i := range met {
		condLast[signalToCondition[e.thresholds[i].Signal]] = now
	}
	for c, at := range e.condLast {
		if _, ok := condLast[c]; !ok {
			condLast[c] = at
		}
	}
	var conditions []v1.NodeConditionType
	for c, at := range condLast {
		if now.Sub(at) < e.cfg.PressureTransitionPeriod {
			conditions = append(conditions, c)
		}
	}
	sort.Slice(conditions, func(a, b int) bool { return conditions[a] < conditions[b] })

	var graceMet []int
	for _, i := range met {
		st := e.status(i, obs, firstObserved[i], now)
		st.MinReclaimActive = !fromMet[i]
		d.Met = append(d.Met, st)
		if now.Sub(firstObserved[i]) < e.thresholds[i].GracePeriod {
			d.InGrace = append(d.InGrace, st)
			continue
		}
		graceMet = append(graceMet, i)
	}

	e.conditions = conditions
	e.firstObserved = firstObserved
	e.condLast = condLast
	e.met = graceMet
	d.NodeConditions = e.NodeConditions()

	// Stale-stats filter: act only on thresholds whose stats are newer than
	// the previous synchronize's.
	var actionable []int
	for _, i := range graceMet {
		o, ok := obs.get(e.thresholds[i].Signal)
		if !ok {
			continue
		}
		var last *Observation
		if e.lastObs != nil {
			last, _ = e.lastObs.get(e.thresholds[i].Signal)
		}
		if last == nil || o.Time.IsZero() || o.Time.After(last.Time.Time) {
			actionable = append(actionable, i)
		} else {
			d.Stale = append(d.Stale, e.status(i, obs, firstObserved[i], now))
		}
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

	// The kubelet lists the grace-satisfied thresholds by iterating a Go map
	// (a random rotation of their insertion order) and sorts them with
	// byEvictionPriority. evictd takes the insertion order — the kubelet's most
	// likely iteration order — and applies the kubelet's sort to it.
	sort.Sort(byEvictionPriority{idx: actionable, th: e.thresholds})
	ordered := make([]Threshold, len(actionable))
	for k, i := range actionable {
		ordered[k] = e.thresholds[i]
		d.Actionable = append(d.Actionable, e.status(i, obs, firstObserved[i], now))
	}
	deciding := ordered[0]
	dec := d.Actionable[0]
	d.Deciding = &dec
	d.Signal = deciding.Signal
	d.Resource = signalToResource[deciding.Signal]
	d.Events = append(d.Events, Event{Object: "Node", Type: v1.EventTypeWarning, Reason: "EvictionThresholdMet",
		Message: fmt.Sprintf("Attempting to reclaim %s", d.Resource)})

	if e.splitBroken {
		d.Notes = append(d.Notes, "no ranking function for signal "+string(deciding.Signal)+
			" (split filesystem with KubeletSeparateDiskGC off): nothing evicted")
		return d
	}
	if funcs := reclaimFor(deciding.Signal, e.fs); len(funcs) > 0 {
		d.Reclaim = funcs
		d.ReclaimPending = true
		e.pending = &pendingReclaim{decision: d, pods: in.Pods, facts: facts, stats: stats, thresholds: ordered, obs: obs, deciding: deciding}
		return d
	}
	e.evict(&d, in.Pods, facts, stats, ordered, obs, deciding)
	return d
}

// Reclaimed continues a synchronize whose Decision requested node-level
// reclaim, after the caller ran the reclaim functions. fresh is the Summary
// seen afterwards; nil means it could not be read, and the kubelet then goes
// on to evict. As in the kubelet, every threshold is checked against fresh
// with its minimum reclaim; if none is met no pod is evicted, otherwise pods
// are ranked with the stats of the original synchronize.
func (e *Engine) Reclaimed(now time.Time, fresh *statsv1alpha1.Summary) Decision {
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
		obs := makeObservations(fresh)
		d.AfterReclaim = obs.list()
		all := make([]int, len(e.thresholds))
		for i := range all {
			all[i] = i
		}
		if len(e.thresholdsMet(all, obs, true)) == 0 {
			d.ReclaimSufficient = true
			return d
		}
	}
	e.evict(&d, p.pods, p.facts, p.stats, p.thresholds, p.obs, p.deciding)
	return d
}

// evict ranks the pods for the deciding signal and kills at most one.
func (e *Engine) evict(d *Decision, pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats, ordered []Threshold, obs *observations, deciding Threshold) {
	if len(pods) == 0 {
		d.Notes = append(d.Notes, "eviction thresholds have been met, but no pods are active to evict")
		return
	}
	ranked := rankPodsInto(&e.rankBuf, pods, facts, stats, deciding.Signal, e.fs)
	kind, _, _ := rankFor(deciding.Signal, e.fs)
	// one backing array for the candidates' quantities instead of 3 allocations each
	qs := make([]resource.Quantity, 3*ranked.len())
	d.Candidates = make([]Candidate, 0, ranked.len())
	for r := 0; r < ranked.len(); r++ {
		k := ranked.at(r)
		c := Candidate{Rank: r + 1, Pod: refOf(k.pod), HasStats: k.found, Priority: k.priority, Critical: facts[ranked.order[r]].critical}
		switch kind {
		case rankPID:
			c.ProcessCount = k.procs
			c.Usage = resource.NewQuantity(int64(k.procs), resource.DecimalSI)
		default:
			c.ExceedsRequest = k.exceeds
			qs[3*r] = k.request
			c.Request = &qs[3*r]
			if k.found {
				qs[3*r+1], qs[3*r+2] = k.usage, k.delta
				c.Usage, c.UsageMinusRequest = &qs[3*r+1], &qs[3*r+2]
			}
		}
		d.Candidates = append(d.Candidates, c)
	}
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

// thresholdsMet returns the indices in idx whose threshold is met by obs:
// quantity (+ minReclaim when enforceMinReclaim) > available.
func (e *Engine) thresholdsMet(idx []int, obs *observations, enforceMinReclaim bool) []int {
	var out []int
	for _, i := range idx {
		t := &e.thresholds[i]
		o, ok := obs.get(t.Signal)
		if !ok {
			continue
		}
		q := thresholdQuantity(t.Value, &o.Capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			q.Add(*thresholdQuantity(*t.MinReclaim, &o.Capacity))
		}
		if t.Operator == OpLessThan && q.Cmp(o.Available) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// hasThreshold is the kubelet's hasThreshold: same grace period, operator,
// signal and value (minimum reclaim is not compared).
func (e *Engine) hasThreshold(list []int, i int) bool {
	b := &e.thresholds[i]
	for _, j := range list {
		a := &e.thresholds[j]
		if a.GracePeriod == b.GracePeriod && a.Operator == b.Operator && a.Signal == b.Signal && sameValue(a.Value, b.Value) {
			return true
		}
	}
	return false
}

func sameValue(a, b ThresholdValue) bool {
	if a.Quantity != nil {
		return b.Quantity != nil && a.Quantity.Cmp(*b.Quantity) == 0
	}
	if b.Quantity != nil {
		return false
	}
	return a.Percentage == b.Percentage
}

func (e *Engine) status(i int, obs *observations, first, now time.Time) ThresholdStatus {
	t := e.thresholds[i]
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

// byEvictionPriority is the kubelet's byEvictionPriority over indices into
// th: Less(i, j) holds when i is a memory signal, or j has no resource (never
// here: every valid signal has one). It is not a strict order; with the
// kubelet's sort.Sort (insertion sort up to 12 elements) it moves the memory
// thresholds to the front in reverse order and keeps the others in order.
type byEvictionPriority struct {
	idx []int
	th  []Threshold
}

func (b byEvictionPriority) Len() int      { return len(b.idx) }
func (b byEvictionPriority) Swap(i, j int) { b.idx[i], b.idx[j] = b.idx[j], b.idx[i] }
func (b byEvictionPriority) Less(i, j int) bool {
	si, sj := b.th[b.idx[i]].Signal, b.th[b.idx[j]].Signal
	_, jHasResource := signalToResource[sj]
	return si == SignalMemoryAvailable || si == SignalAllocatableMemoryAvailable || !jHasResource
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
