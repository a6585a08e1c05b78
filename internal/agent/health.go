package agent

import (
	"fmt"
	"sync"
	"time"
)

// DefaultUnhealthyAfter is how many synchronizes in a row may fail to read
// the workloads or the stats before /healthz turns 503: one failure is a
// race with a workload going away, three (30 s at the kubelet's period)
// mean the agent is blind and cannot evict.
const DefaultUnhealthyAfter = 3

// Stages of a synchronize whose failures are counted
// (evictd_synchronize_errors_total{stage}) and logged once per change.
const (
	stagePods        = "pods"         // listing the workloads
	stageStats       = "stats"        // reading the stats Summary
	stageStateFile   = "state-file"   // saving the engine state
	stageDecisionLog = "decision-log" // appending to the decision log
)

// faults remembers, per stage, the error of the last attempt, so that a
// failure is logged when it starts or changes and once more when it ends,
// never on every tick; and how many synchronizes in a row could not observe
// the node, for the health check.
type faults struct {
	mu        sync.Mutex
	last      map[string]string // stage → error text of the last attempt ("" ok)
	blind     int               // synchronizes in a row without workloads or stats
	blindErr  string
	blindFrom time.Time
}

// note records the outcome of one stage and reports whether it changed:
// failing (with another error than before) or recovered.
func (a *Agent) note(stage string, err error) (changed, recovered bool) {
	f := &a.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[string]string{}
	}
	prev := f.last[stage]
	if err == nil {
		f.last[stage] = ""
		return false, prev != ""
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.SyncErrors.WithLabelValues(stage).Inc()
	}
	f.last[stage] = err.Error()
	return prev != err.Error(), false
}

// noteObserve records whether a synchronize could list the workloads and
// read the stats, and logs the change.
func (a *Agent) noteObserve(now time.Time, perr, serr error) {
	for _, st := range []struct {
		stage, what string
		err         error
	}{{stagePods, "listing workloads", perr}, {stageStats, "reading stats", serr}} {
		switch changed, recovered := a.note(st.stage, st.err); {
		case changed:
			a.log.Error(st.what+" failed; evictd cannot evict until it works again", "err", st.err)
		case recovered:
			a.log.Info(st.what + " works again")
		}
	}
	f := &a.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		if a.cfg.Metrics != nil {
			a.cfg.Metrics.Blind.Set(b2f(f.blind >= a.unhealthyAfter()))
		}
	}()
	switch {
	case perr == nil && serr == nil:
		f.blind, f.blindErr = 0, ""
		a.observed.Store(true)
	default:
		if f.blind == 0 {
			f.blindFrom = now
		}
		f.blind++
		if perr != nil {
			f.blindErr = perr.Error()
		} else {
			f.blindErr = serr.Error()
		}
	}
}

// noteOutput records whether writing an output (state file, decision log)
// worked, and logs the change.
func (a *Agent) noteOutput(stage string, err error) {
	switch changed, recovered := a.note(stage, err); {
	case changed:
		a.log.Error("writing the "+stage+" failed; retrying at every synchronize", "err", err)
	case recovered:
		a.log.Info("writing the " + stage + " works again")
	}
}

// blindness returns an error when the last UnhealthyAfter synchronizes or
// more could not read the workloads or the stats.
func (a *Agent) blindness() error {
	f := &a.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	n := a.unhealthyAfter()
	if f.blind < n {
		return nil
	}
	return fmt.Errorf("blind: %d synchronizes in a row since %s could not observe the node: %s",
		f.blind, f.blindFrom.UTC().Format(time.RFC3339), f.blindErr)
}

// unhealthyAfter is Config.UnhealthyAfter or its default.
func (a *Agent) unhealthyAfter() int {
	if a.cfg.UnhealthyAfter <= 0 {
		return DefaultUnhealthyAfter
	}
	return a.cfg.UnhealthyAfter
}
