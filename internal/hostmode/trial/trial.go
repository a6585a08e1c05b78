// Package trial is the harness that evictd demo, evictd selftest and the
// latency benchmark (bench/latency) run their trials in: a throwaway sandbox
// cgroup (internal/workload/sandbox) whose memory limit stands for a node's
// memory, the real host-mode agent (hostmode.New) on it with its log
// captured and its records on a channel, memory hogs (the caller's binary
// re-executed, internal/workload/hog) in child cgroups, a watcher that
// times the sandbox's crossing of a threshold (or samples its usage), and
// Wait, which tells what ended the trial: evictd's eviction, the kernel
// OOM killer, or the hog by itself.
//
// Close removes everything a trial made: it stops the watchers and waits
// for them, kills the hogs and waits for them, stops the agent, and removes
// the sandbox. Callers defer it right after New, so that a cancelled
// context (Ctrl-C), an early return or a panic in the caller's goroutine
// leaves nothing behind.
//
// It lives beside demo and selftest, under the wiring they drive: it
// imports internal/hostmode (and the agent, the sandbox and the hogs), and
// nothing in the agent or the wirings imports it.
package trial

import (
	"context"
	"sync"
	"time"

	"github.com/evictd/evictd/internal/workload/sandbox"
)

// Options configure New.
type Options struct {
	// Name is the sandbox's cgroup, relative to the hierarchies' roots
	// ("/evictd-selftest-123-1-…"): the caller makes it unique.
	Name string
	// Limit is the sandbox's memory limit in bytes.
	Limit int64
	// Timeout bounds the agent, the watchers and Wait (0: only the
	// context given to New).
	Timeout time.Duration
	// Exe is the binary StartHog re-executes as a hog (os.Executable());
	// it must call hog.MaybeRun first thing.
	Exe string
}

// Trial is one sandbox and what runs in it. Its methods are for the
// goroutine that made it.
type Trial struct {
	// Sandbox is the trial's cgroup tree (its Parent is the agent's
	// workload root).
	Sandbox *sandbox.Sandbox

	o        Options
	ctx      context.Context
	cancel   context.CancelFunc
	agent    *Agent
	hogs     []*Hog
	watchers sync.WaitGroup
	closed   bool
	closeErr error
}

// New makes the sandbox. ctx (and Options.Timeout) bound what the trial
// runs: once it is done the agent stops and Wait gives up.
func New(ctx context.Context, o Options) (*Trial, error) {
	sb, err := sandbox.New(o.Name, o.Limit)
	if err != nil {
		return nil, err
	}
	t := &Trial{Sandbox: sb, o: o}
	if o.Timeout > 0 {
		t.ctx, t.cancel = context.WithTimeout(ctx, o.Timeout)
	} else {
		t.ctx, t.cancel = context.WithCancel(ctx)
	}
	return t, nil
}

// Child makes a workload cgroup under the sandbox's parent.
func (t *Trial) Child(name string) (sandbox.Cgroup, error) { return t.Sandbox.Child(name) }

// OOM reads the kernel OOM killer's counters of the whole sandbox (a
// counter that cannot be read counts as 0).
func (t *Trial) OOM() sandbox.OOM {
	o, _ := t.Sandbox.OOM()
	return o
}

// Close stops the watchers and waits for them, kills every hog and waits
// for it, stops the agent and removes the sandbox's cgroups. It returns
// the sandbox's removal error; calling it again returns the same.
func (t *Trial) Close() error {
	if t.closed {
		return t.closeErr
	}
	t.closed = true
	t.cancel()
	// The watchers got the cgroup's path and mode as values, and are
	// waited for before the sandbox goes: sandbox.Close clears
	// Sandbox.Parent, which a watcher reading the sandbox itself raced
	// with (seen under the race detector in CI).
	t.watchers.Wait()
	for _, h := range t.hogs {
		h.Cmd.Process.Kill()
		<-h.done
	}
	if t.agent != nil {
		t.agent.Stop()
	}
	t.closeErr = t.Sandbox.Close()
	return t.closeErr
}
