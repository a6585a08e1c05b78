package policy

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
)

// State is the engine's memory between synchronizes, explicit and
// JSON-serialisable so the agent can persist it and explain can show it.
// Thresholds are referred to by their index in the engine's effective
// threshold list; Threshold repeats the threshold as text so that Restore can
// refuse a state taken with another configuration.
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
}

// ThresholdRef identifies a threshold of the engine's effective list.
type ThresholdRef struct {
	Index     int    `json:"index"`
	Threshold string `json:"threshold"`
}

// ThresholdTime is a threshold with a time.
type ThresholdTime struct {
	ThresholdRef
	At time.Time `json:"at"`
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
	for i, at := range e.firstObserved {
		s.FirstObserved = append(s.FirstObserved, ThresholdTime{ThresholdRef{i, e.thresholds[i].String()}, at})
	}
	sort.Slice(s.FirstObserved, func(a, b int) bool { return s.FirstObserved[a].Index < s.FirstObserved[b].Index })
	for _, i := range e.met {
		s.Met = append(s.Met, ThresholdRef{i, e.thresholds[i].String()})
	}
	for c, at := range e.condLast {
		s.ConditionsLastObserved[c] = at
	}
	if e.lastObs != nil {
		s.LastObservations = e.lastObs.list()
	}
	return s
}

// Restore replaces the engine's state with s, taken from an engine with the
// same configuration and layout. On error the engine is unchanged.
func (e *Engine) Restore(s State) error {
	th := e.base
	if s.Synced && !s.SplitFsWithoutGate {
		th, _ = updateContainerFsThresholds(e.base, e.fs.DedicatedImageFs, e.fs.SplitContainerFs)
	}
	check := func(r ThresholdRef) error {
		if r.Index < 0 || r.Index >= len(th) {
			return fmt.Errorf("restore: threshold index %d out of range (config has %d thresholds)", r.Index, len(th))
		}
		if got := th[r.Index].String(); got != r.Threshold {
			return fmt.Errorf("restore: threshold %d is %q in this configuration, %q in the state", r.Index, got, r.Threshold)
		}
		return nil
	}
	first := make(map[int]time.Time, len(s.FirstObserved))
	for _, ft := range s.FirstObserved {
		if err := check(ft.ThresholdRef); err != nil {
			return err
		}
		first[ft.Index] = ft.At
	}
	met := make([]int, 0, len(s.Met))
	for _, r := range s.Met {
		if err := check(r); err != nil {
			return err
		}
		met = append(met, r.Index)
	}
	var last *observations
	if s.LastObservations != nil && (len(s.LastObservations) > 0 || s.Synced) {
		last = &observations{}
		for _, o := range s.LastObservations {
			if !ValidSignal(o.Signal) {
				return fmt.Errorf("restore: observation of unsupported eviction signal %v", o.Signal)
			}
			last.put(o)
		}
		if len(s.LastObservations) == 0 {
			last = nil
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
	e.firstObserved, e.met, e.lastObs, e.condLast, e.conditions = first, met, last, condLast, conds
	e.pending = nil
	return nil
}
