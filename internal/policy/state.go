package policy

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
)

// State is the engine's memory between synchronizes, explicit and
// JSON-serialisable so the agent can persist it and explain can show it.
// Thresholds are keyed as the kubelet keys them, by value (signal, operator,
// value, grace period), so a state still fits a configuration whose
// thresholds were reordered, and Restore refuses one that names a threshold
// the configuration does not have.
type State struct {
	// Synced: the first synchronize ran (the kubelet detected the layout and
	// derived the containerfs thresholds).
	Synced bool `json:"synced"`
	// SplitFsWithoutGate: the first synchronize found a split layout with
	// KubeletSeparateDiskGC off; no threshold eviction ever happens.
	SplitFsWithoutGate bool `json:"splitFsWithoutGate,omitempty"`
	// FirstObserved: thresholds currently met and when each was first met.
	FirstObserved []ThresholdTime `json:"firstObserved"`
	// Met: the grace-satisfied thresholds of the last synchronize (they are
	// re-checked with their minimum reclaim next time: hysteresis).
	Met []ThresholdRef `json:"met"`
	// ConditionsLastObserved: when each node condition was last raised.
	ConditionsLastObserved map[v1.NodeConditionType]time.Time `json:"conditionsLastObserved"`
	// NodeConditions reported by the last synchronize, sorted.
	NodeConditions []v1.NodeConditionType `json:"nodeConditions"`
	// LastObservations of the last synchronize (the stale-stats filter).
	LastObservations []Observation `json:"lastObservations"`
	// Loops: the loop breaker's evictions and loops (Profile.LoopBreaker).
	Loops []Loop `json:"loops,omitempty"`
}

// ThresholdRef names a threshold of the engine's effective list by the
// kubelet's key: signal, operator, value and grace period. Threshold is the
// threshold as text, for people.
//
// Migration: state files written before thresholds were keyed by value hold
// only "index" and "threshold" (the text). Restore reads such an entry by
// its text, which must equal exactly one effective threshold's String(); the
// index is ignored. An entry that matches none is an error, as before.
type ThresholdRef struct {
	Signal      Signal            `json:"signal,omitempty"`
	Operator    ThresholdOperator `json:"operator,omitempty"`
	Value       *ThresholdValue   `json:"value,omitempty"`
	GracePeriod time.Duration     `json:"gracePeriod,omitempty"`
	Threshold   string            `json:"threshold"`
	// Index is read from old state files only (see Migration above).
	Index *int `json:"index,omitempty"`
}

// ThresholdTime is a threshold with a time.
type ThresholdTime struct {
	ThresholdRef
	At time.Time `json:"at"`
}

func refOfThreshold(t Threshold) ThresholdRef {
	v := t.Value
	return ThresholdRef{Signal: t.Signal, Operator: t.Operator, Value: &v, GracePeriod: t.GracePeriod, Threshold: t.String()}
}

// State returns a copy of the engine's state.
func (e *Engine) State() State {
	s := State{
		Synced:                 e.synced,
		SplitFsWithoutGate:     e.splitBroken,
		FirstObserved:          []ThresholdTime{},
		Met:                    []ThresholdRef{},
		ConditionsLastObserved: map[v1.NodeConditionType]time.Time{},
		NodeConditions:         e.NodeConditions(),
		LastObservations:       []Observation{},
	}
	if s.NodeConditions == nil {
		s.NodeConditions = []v1.NodeConditionType{}
	}
	for _, fo := range e.firstObserved {
		s.FirstObserved = append(s.FirstObserved, ThresholdTime{refOfThreshold(fo.threshold), fo.at})
	}
	for _, t := range e.met {
		s.Met = append(s.Met, refOfThreshold(t))
	}
	for c, at := range e.condLast {
		s.ConditionsLastObserved[c] = at
	}
	if e.lastObs != nil {
		s.LastObservations = e.lastObs.list()
	}
	if len(e.loops) > 0 {
		s.Loops = e.loops.list()
	}
	return s
}

// resolve finds the effective threshold r names: by key, or, for an entry
// of an old state file (no signal), by its text.
func (r ThresholdRef) resolve(th []Threshold) (Threshold, error) {
	if r.Signal == "" {
		var found []Threshold
		for _, t := range th {
			if t.String() == r.Threshold {
				found = append(found, t)
			}
		}
		switch len(found) {
		case 1:
			return found[0], nil
		case 0:
			return Threshold{}, fmt.Errorf("restore: threshold %q of the state is not in this configuration", r.Threshold)
		}
		return Threshold{}, fmt.Errorf("restore: threshold %q of the state matches %d thresholds of this configuration", r.Threshold, len(found))
	}
	if r.Value == nil {
		return Threshold{}, fmt.Errorf("restore: threshold %q of the state has no value", r.Threshold)
	}
	want := Threshold{Signal: r.Signal, Operator: r.Operator, Value: *r.Value, GracePeriod: r.GracePeriod}
	for _, t := range th {
		if sameThreshold(t, want) {
			return t, nil
		}
	}
	return Threshold{}, fmt.Errorf("restore: threshold %s of the state is not in this configuration", want)
}

// Restore replaces the engine's state with s, taken from an engine with the
// same thresholds (in any order) and layout. On error the engine is unchanged.
func (e *Engine) Restore(s State) error {
	th := e.base
	if s.Synced && !s.SplitFsWithoutGate {
		th, _ = updateContainerFsThresholds(e.base, e.fs.DedicatedImageFs, e.fs.SplitContainerFs)
	}
	first := make([]thresholdObservedAt, 0, len(s.FirstObserved))
	for _, ft := range s.FirstObserved {
		t, err := ft.resolve(th)
		if err != nil {
			return err
		}
		first = append(first, thresholdObservedAt{t, ft.At})
	}
	met := make([]Threshold, 0, len(s.Met))
	for _, r := range s.Met {
		t, err := r.resolve(th)
		if err != nil {
			return err
		}
		met = append(met, t)
	}
	var last *observations
	if len(s.LastObservations) > 0 {
		last = &observations{}
		for _, o := range s.LastObservations {
			if !ValidSignal(o.Signal) {
				return fmt.Errorf("restore: observation of %w", unsupportedSignal(o.Signal))
			}
			last.put(o)
		}
	}
	condLast := make(map[v1.NodeConditionType]time.Time, len(s.ConditionsLastObserved))
	for c, at := range s.ConditionsLastObserved {
		condLast[c] = at
	}
	conds := append([]v1.NodeConditionType(nil), s.NodeConditions...)
	sort.Slice(conds, func(a, b int) bool { return conds[a] < conds[b] })

	e.synced, e.splitBroken = s.Synced, s.SplitFsWithoutGate
	e.thresholds = th
	loops := loopBook{}
	for _, l := range s.Loops {
		if l.UID == "" {
			return fmt.Errorf("restore: loop of %q has no controller UID", l.Controller)
		}
		c := l
		c.Evictions = append([]LoopEviction(nil), l.Evictions...)
		loops[l.UID] = &c
	}

	e.firstObserved, e.met, e.lastObs, e.condLast, e.conditions = first, met, last, condLast, conds
	e.loops = loops
	e.pending = nil
	return nil
}
