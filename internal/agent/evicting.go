package agent

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/policy"
)

// DefaultStopTimeout is how long a stop (SIGTERM) waits for an eviction in
// progress to finish its grace period and kill. With the outputs' flush
// after it (DefaultFlushTimeout each, when they are stalled) it fits in the
// 30 s Kubernetes gives a pod to stop (terminationGracePeriodSeconds) and
// the shipped unit's TimeoutStopSec. A grace period that ends later is not
// cut short: the eviction and its deadline stay in the state file and the
// next start finishes it.
const DefaultStopTimeout = 20 * time.Second

// evictBusySlack is how long past an eviction's grace period /healthz still
// counts the agent as busy rather than stuck: the hard kill's wait for the
// cgroup to empty (actuate.DefaultGoneTimeout, 10 s), the local fallback's
// deadline (5 s) and API calls fit in it.
const evictBusySlack = 30 * time.Second

// Resumer is an Evictor that can finish an eviction begun by an earlier run
// of the agent: the workload was told to stop (SIGTERM, or the Eviction
// API) and its grace period ends at deadline; it must not be told again
// with a new grace period.
type Resumer interface {
	Resume(ctx context.Context, pod *v1.Pod, deadline time.Time, ev policy.Eviction) (EvictResult, error)
}

// killContext returns the context evictions run under: it outlives ctx (the
// stop) by the stop timeout, so a grace period running when SIGTERM comes
// is neither cut short nor waited for without bound.
func (a *Agent) killContext(ctx context.Context) (context.Context, func()) {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	timeout := a.cfg.StopTimeout
	if timeout == 0 {
		timeout = DefaultStopTimeout
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		if p := a.currentEviction(); p != nil && timeout >= 0 {
			a.log.Info("stopping: letting the eviction in progress finish its grace period first",
				"pod", p.Pod.Namespace+"/"+p.Pod.Name, "deadline", p.Deadline.UTC(), "stop_timeout", timeout)
		}
		if timeout < 0 {
			cancel()
			return
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-done:
		}
	})
	return kctx, func() {
		stop()
		close(done)
		cancel()
	}
}

func (a *Agent) currentEviction() *PendingEviction {
	a.evMu.Lock()
	defer a.evMu.Unlock()
	return a.pending
}

// setPending records the eviction in progress (nil: none) for the state
// file and /healthz.
func (a *Agent) setPending(p *PendingEviction) {
	a.evMu.Lock()
	a.pending = p
	a.evMu.Unlock()
	if p != nil {
		a.setBusy(p.Deadline.Add(evictBusySlack))
	}
	a.saveState()
}

// setBusy makes /healthz count the agent as working until t, however long
// ago the last synchronize finished: an eviction's grace period or the wait
// for its cleanup blocks the loop, and a liveness probe must not restart
// the agent in the middle of it.
func (a *Agent) setBusy(t time.Time) { a.busyUntil.Store(t.UnixNano()) }

func (a *Agent) busy(now time.Time) bool { return now.UnixNano() < a.busyUntil.Load() }

// evict runs one eviction under the kill context: the grace period is
// logged when it starts (the "evicted" line ends it), kept in the state
// file while it runs, and, when the stop's timeout cuts it, left there for
// the next start to finish.
func (a *Agent) evict(ctx context.Context, pod *v1.Pod, act Action, ev policy.Eviction) (EvictResult, error) {
	kctx := a.killCtx
	if kctx == nil {
		kctx = ctx
	}
	now := a.cfg.Clock.Now()
	p := &PendingEviction{Pod: act.Pod, Eviction: ev, Grace: act.Grace, Started: now, Deadline: now.Add(act.Grace)}
	if !a.cfg.DryRun {
		a.setPending(p)
		if act.Grace > 0 {
			a.log.Info("eviction started; waiting for the workload to exit within its grace period",
				"pod", act.Pod.Namespace+"/"+act.Pod.Name, "signal", act.Signal, "grace", act.Grace,
				"deadline", p.Deadline.UTC())
		}
	}
	res, err := a.cfg.Evictor.Evict(kctx, pod, act.Grace, ev)
	if a.cfg.DryRun {
		return res, err
	}
	if err != nil && kctx.Err() != nil {
		a.log.Warn("the stop's timeout ended the wait for the grace period; the next start finishes this eviction at its deadline",
			"pod", act.Pod.Namespace+"/"+act.Pod.Name, "deadline", p.Deadline.UTC())
		a.flushState()
		return res, err
	}
	a.setPending(nil)
	return res, err
}

// resume finishes an eviction that an earlier run left in the state file.
// It runs before the first synchronize; the result is logged and recorded
// as any eviction is, with the trigger "resume".
func (a *Agent) resume(ctx context.Context) {
	p := a.resumePending
	a.resumePending = nil
	if p == nil {
		return
	}
	name := p.Pod.Namespace + "/" + p.Pod.Name
	pods, err := a.cfg.Observer.Pods(ctx)
	if err != nil {
		a.log.Warn("cannot list the workloads to resume an interrupted eviction; deciding afresh", "pod", name, "err", err)
		a.setPending(nil)
		return
	}
	pod := findPod(pods, p.Pod)
	r, ok := a.cfg.Evictor.(Resumer)
	switch {
	case pod == nil:
		a.log.Info("the workload of an eviction interrupted by the last stop is gone; nothing to resume", "pod", name)
		a.setPending(nil)
		return
	case !ok:
		a.log.Warn("this evictor cannot resume an interrupted eviction; deciding afresh", "pod", name)
		a.setPending(nil)
		return
	}
	a.log.Info("resuming an eviction interrupted by the last stop; its grace period is not restarted",
		"pod", name, "started", p.Started.UTC(), "deadline", p.Deadline.UTC())
	a.setPending(p)
	trig := Trigger{Reason: "resume", At: a.cfg.Clock.Now()}
	act := Action{Kind: "evict", Pod: p.Pod, Signal: p.Eviction.Signal, Grace: p.Grace, Message: p.Eviction.Message}
	kctx := a.killCtx
	if kctx == nil {
		kctx = ctx
	}
	res, err := r.Resume(kctx, pod, p.Deadline, p.Eviction)
	act.Result = &res
	if err != nil {
		act.Error = err.Error()
	}
	interrupted := err != nil && kctx.Err() != nil
	if !interrupted {
		a.setPending(nil)
	} else {
		a.flushState()
	}
	a.logEviction(trig, act, policy.Decision{})
	if a.cfg.Metrics != nil && act.Error == "" {
		a.cfg.Metrics.evicted(act.Signal)
	}
	rec := Record{Time: a.cfg.Clock.Now(), Trigger: trig, Actions: []Action{act},
		Decision: policy.Decision{Now: a.cfg.Clock.Now(), Evictions: []policy.Eviction{p.Eviction}}}
	a.writeRecord(rec)
	if act.Error == "" {
		a.waitForCleanup(ctx, []policy.PodRef{p.Pod})
	}
}
