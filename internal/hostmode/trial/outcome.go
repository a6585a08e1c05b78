package trial

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// Kind is what ended a trial.
type Kind int

const (
	// Evicted: the agent's record of an eviction came (Outcome.Record).
	Evicted Kind = iota + 1
	// OOMKilled: the hog died and the sandbox's counters say the kernel
	// OOM killer struck, before any record of an eviction.
	OOMKilled
)

func (k Kind) String() string {
	switch k {
	case Evicted:
		return "evicted"
	case OOMKilled:
		return "OOM-killed"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Outcome is how a trial ended.
type Outcome struct {
	Kind Kind
	// Crossed is when the watcher saw the crossing; zero when Early.
	Crossed time.Time
	// Early: the hog was gone before the watcher saw the crossing, and
	// the record explains it — evictd, woken by the kernel at the
	// crossing, decided and killed before the watcher's next read came
	// round (seen under the race detector on two busy cores). The caller
	// takes the crossing from the record.
	Early bool
	// Record is the agent's record (Kind Evicted).
	Record agent.Record
	// OOM is the sandbox's OOM counters when the outcome was decided.
	OOM sandbox.OOM
}

// Reason is why a trial failed.
type Reason int

const (
	// EndedBeforeCrossing: the hog ended before the watcher saw the
	// crossing, with no OOM kill and no eviction record.
	EndedBeforeCrossing Reason = iota + 1
	// NeverCrossed: the trial's time ran out (or its context ended)
	// before the crossing.
	NeverCrossed
	// ExitedByItself: the hog ended after the crossing with no OOM kill
	// and no eviction record.
	ExitedByItself
	// NoEviction: the trial's time ran out after the crossing with no
	// eviction.
	NoEviction
)

func (r Reason) String() string {
	switch r {
	case EndedBeforeCrossing:
		return "ended before the crossing"
	case NeverCrossed:
		return "never crossed"
	case ExitedByItself:
		return "exited by itself"
	case NoEviction:
		return "no eviction"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Failure is a trial that ended in none of the Kinds.
type Failure struct {
	Reason Reason
	// State is how the hog ended, and Said what it wrote to stderr
	// (EndedBeforeCrossing, ExitedByItself).
	State *os.ProcessState
	Said  string
	// AgentLog is the agent's captured log, read once it had stopped.
	AgentLog string
	// Timeout is the trial's (NoEviction; 0: its context was cancelled).
	Timeout time.Duration
}

func (f *Failure) Error() string {
	switch f.Reason {
	case EndedBeforeCrossing:
		return fmt.Sprintf("the workload ended before it reached the threshold (%v; no OOM kill, no eviction; it said %q); agent log: %s", f.State, f.Said, f.AgentLog)
	case NeverCrossed:
		return "the workload never reached the threshold"
	case ExitedByItself:
		return fmt.Sprintf("the workload exited by itself (%v; no OOM kill, no eviction; it said %q); agent log: %s", f.State, f.Said, f.AgentLog)
	case NoEviction:
		if f.Timeout == 0 {
			return "no eviction before the trial was cancelled; agent log: " + f.AgentLog
		}
		return fmt.Sprintf("no eviction within %s; agent log: %s", f.Timeout, f.AgentLog)
	}
	return fmt.Sprintf("trial failed (reason %d)", int(f.Reason))
}

// Wait waits for the end of a trial whose hog h crosses a threshold that
// crossed (from Crossing) reports: an eviction record from the agent
// (NewAgent's Keep decides which records count), or the hog's death by the
// kernel OOM killer. A hog that dies without an OOM kill is given
// recordWait for the record that explains it: evictd's kill, whose record
// follows once the kill has seen the cgroup empty. Anything else is a
// *Failure, with the agent's log (the agent is stopped to read it).
func (t *Trial) Wait(crossed <-chan time.Time, h *Hog, recordWait time.Duration) (Outcome, error) {
	if t.agent == nil {
		return Outcome{}, fmt.Errorf("trial: Wait needs an agent (NewAgent)")
	}
	recs := t.agent.recs
	var o Outcome
	var rec *agent.Record
	dead := h.Done() // nil once seen: then wait for the record only
	select {
	case o.Crossed = <-crossed:
	case <-dead:
		if o.OOM = t.OOM(); o.OOM.Struck() {
			// The kernel got it before the watcher saw the crossing.
			o.Kind = OOMKilled
			return o, nil
		}
		select {
		case r := <-recs:
			rec, o.Early, dead = &r, true, nil
		case <-time.After(recordWait):
			return o, t.failure(EndedBeforeCrossing, h)
		}
	case <-t.ctx.Done():
		return o, t.failure(NeverCrossed, nil)
	}
	for rec == nil {
		select {
		case r := <-recs:
			rec = &r
		case <-dead:
			dead = nil
			if o.OOM = t.OOM(); o.OOM.Struck() {
				o.Kind = OOMKilled
				return o, nil
			}
			// Not the OOM killer: evictd's kill, whose record follows
			// once the cgroup is seen empty, or the hog by itself.
			select {
			case r := <-recs:
				rec = &r
			case <-time.After(recordWait):
				return o, t.failure(ExitedByItself, h)
			}
		case <-t.ctx.Done():
			return o, t.failure(NoEviction, nil)
		}
	}
	o.Kind, o.Record, o.OOM = Evicted, *rec, t.OOM()
	return o, nil
}

func (t *Trial) failure(r Reason, h *Hog) *Failure {
	t.agent.Stop()
	f := &Failure{Reason: r, AgentLog: t.agent.Log()}
	if h != nil {
		f.State, f.Said = h.State(), h.Stderr()
	}
	if r == NoEviction && t.o.Timeout > 0 && t.ctx.Err() == context.DeadlineExceeded {
		f.Timeout = t.o.Timeout
	}
	return f
}
