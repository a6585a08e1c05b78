package trial

import (
	"context"
	"errors"
	"log/slog"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/syncbuf"
)

// defaultRecords is the records channel's capacity: a trial waits for one
// eviction, the demo's story has a handful of records a second.
const defaultRecords = 16

// AgentOptions configure NewAgent.
type AgentOptions struct {
	// Options are the agent's. WorkloadRoot is set to the sandbox's
	// parent. A nil Log is captured at Info (Agent.Log): one line per
	// state change, so that a failed trial's error says what the agent saw
	// and did. OnRecord, when set, is called before Keep.
	hostmode.Options
	// Keep says which records go to Records (nil: every one);
	// EvictionDecided keeps those that decided an eviction.
	Keep func(agent.Record) bool
	// Records is the channel's capacity (0: 16). A record that finds it
	// full is dropped: the agent never waits for the trial.
	Records int
}

// EvictionDecided reports whether the record's decision evicts a pod.
func EvictionDecided(r agent.Record) bool { return len(r.Decision.Evictions) > 0 }

// Agent is the real host-mode agent on the trial's sandbox.
type Agent struct {
	Host *hostmode.Host

	t       *Trial
	recs    chan agent.Record
	log     *syncbuf.Buffer // nil: the caller's own Log
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
	stopped bool
}

// NewAgent wires the agent (hostmode.New) on the sandbox. Nothing runs
// until Start; Close stops it (or releases what New opened, if it never
// started).
func (t *Trial) NewAgent(o AgentOptions) (*Agent, error) {
	if t.agent != nil {
		return nil, errors.New("trial: the sandbox has an agent already")
	}
	n := o.Records
	if n <= 0 {
		n = defaultRecords
	}
	a := &Agent{t: t, recs: make(chan agent.Record, n)}
	ho := o.Options
	ho.WorkloadRoot = t.Sandbox.Parent.Rel
	if ho.Log == nil {
		a.log = &syncbuf.Buffer{}
		ho.Log = slog.New(slog.NewTextHandler(a.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if ho.Observed == nil {
		ho.Observed = agent.ReleaseStartupPages(ho.Log) // as evictd run does
	}
	onRecord, keep := o.OnRecord, o.Keep
	ho.OnRecord = func(r agent.Record) {
		if onRecord != nil {
			onRecord(r)
		}
		if keep == nil || keep(r) {
			select {
			case a.recs <- r:
			default:
			}
		}
	}
	h, err := hostmode.New(ho)
	if err != nil {
		return nil, err
	}
	a.Host = h
	t.agent = a
	return a, nil
}

// Start runs the agent until Stop, Close or the trial's context.
func (a *Agent) Start() {
	if a.started || a.stopped {
		return
	}
	a.started = true
	var ctx context.Context
	ctx, a.cancel = context.WithCancel(a.t.ctx)
	a.done = make(chan struct{})
	go func() {
		defer close(a.done)
		a.Host.Run(ctx)
	}()
}

// Stop stops the agent and waits until it has stopped; for an agent that
// never started, it releases what hostmode.New opened. It is safe to call
// more than once.
func (a *Agent) Stop() {
	if a.stopped {
		return
	}
	a.stopped = true
	if !a.started {
		a.Host.Close()
		return
	}
	a.cancel()
	<-a.done
}

// Records are the records Keep kept, in order.
func (a *Agent) Records() <-chan agent.Record { return a.recs }

// Log is what the agent has logged so far ("" when the caller gave its own
// Log).
func (a *Agent) Log() string {
	if a.log == nil {
		return ""
	}
	return a.log.String()
}
