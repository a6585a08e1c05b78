package kube

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/evictd/evictd/internal/agent"
)

// Queue sizes of the API writes that follow a decision. An Event or a
// condition is written within milliseconds by a healthy API server; these
// many may wait for a slow one, and what comes on top is dropped and
// counted (evictd_output_dropped_total{output}).
const (
	eventQueue     = 64 // pod and node Events, at most a few per eviction
	conditionQueue = 16 // DisruptionTarget conditions, one per eviction
)

// Recorder makes the API writes that follow a decision (the Events, the
// DisruptionTarget condition) on a goroutine of its own, one at a time,
// through a bounded queue: Post never blocks, so an API server slow to
// take them delays no decision, eviction call or local kill. Each write
// has its own timeout. client-go's EventBroadcaster is not used: its queue
// drops with nothing to count the drop, its correlator rewrites repeated
// Events ("combined from similar events", a spam filter) and it logs each
// failed Event through klog.
//
// Failures and drops are logged once when they start and once when they
// end (with how many there were), never one line per write: a slow API
// server must not flood the log either.
type Recorder struct {
	what    string // what it writes, for the log: "Events"
	output  string // its evictd_output_dropped_total label
	size    int
	timeout time.Duration
	log     *slog.Logger
	q       *agent.Queue[write]

	mu       sync.Mutex // the drop state: Post runs on the loop and on a background soft kill
	dropping bool
	dropped  uint64

	// The failure state, the worker's only.
	failing bool
	failed  uint64
}

// write is one queued API write; what "" is the recorder's own
// bookkeeping (no API call, no outcome).
type write struct {
	what string
	f    func(context.Context) error
}

// NewRecorder starts a recorder of what ("Events") whose queue holds size
// writes, each bounded by timeout (0: DefaultCallTimeout). output labels
// its drops in m (nil: not counted).
func NewRecorder(what, output string, size int, timeout time.Duration, m *agent.Metrics, log *slog.Logger) *Recorder {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Recorder{what: what, output: output, size: size, timeout: timeout, log: log}
	r.q = agent.NewQueue(size, r.run)
	if m != nil {
		r.q.SetDropped(m.OutputDropped.WithLabelValues(output).Inc)
	}
	return r
}

// Post queues f, which makes one API write (what names it for the log),
// and returns at once. f runs under the recorder's timeout, never under
// the caller's context: the write must not end with the eviction that
// asked for it. A nil Recorder runs f at once, on the caller's goroutine.
func (r *Recorder) Post(what string, f func(context.Context) error) {
	if r == nil {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCallTimeout)
		defer cancel()
		_ = f(ctx)
		return
	}
	r.put(write{what: what, f: f})
}

// do queues f, bookkeeping of the recorder's users that must run in order
// with their writes (no API call), and reports whether it fit.
func (r *Recorder) do(f func()) bool {
	if r == nil {
		f()
		return true
	}
	return r.put(write{f: func(context.Context) error { f(); return nil }})
}

func (r *Recorder) put(w write) bool {
	ok := r.q.Put(w)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !ok:
		r.dropped++
		if !r.dropping {
			r.dropping = true
			r.log.Warn(r.what+" dropped: the API server does not take them as fast as they come; later drops are counted, not logged",
				"write", w.what, "queue", r.size, "metric", `evictd_output_dropped_total{output="`+r.output+`"}`)
		}
	case r.dropping:
		r.log.Info(r.what+" queued again", "dropped", r.dropped)
		r.dropping, r.dropped = false, 0
	}
	return ok
}

func (r *Recorder) run(w write) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	err := w.f(ctx)
	if w.what == "" {
		return nil
	}
	switch {
	case err != nil:
		r.failed++
		if !r.failing {
			r.failing = true
			r.log.Warn("writing "+r.what+" to the API server failed; later failures are counted, not logged, until one works",
				"write", w.what, "err", err)
		}
	case r.failing:
		r.log.Info(r.what+" reach the API server again", "failed", r.failed)
		r.failing, r.failed = false, 0
	}
	return err
}

// Flush waits at most wait for what is queued now to be written.
func (r *Recorder) Flush(wait time.Duration) bool { return r == nil || r.q.Flush(wait) }

// Close stops taking writes and waits at most wait for the queued ones.
func (r *Recorder) Close(wait time.Duration) bool { return r == nil || r.q.Close(wait) }

// closeRecorders closes rs side by side, so that a stop waits at most wait
// for all of them.
func closeRecorders(wait time.Duration, rs ...*Recorder) {
	var wg sync.WaitGroup
	for _, r := range rs {
		if r == nil {
			continue
		}
		wg.Go(func() {
			if !r.Close(wait) {
				r.log.Warn(r.what+" still queued at the stop were not written", "timeout", wait)
			}
		})
	}
	wg.Wait()
}
