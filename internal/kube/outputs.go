package kube

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
)

// eventQueue is how many Event creations may wait for a slow API server;
// more are dropped and counted (evictd_output_dropped_total{output="events"}).
const eventQueue = 64

// newPosts starts the queue that creates Events off the loop.
func newPosts(m *agent.Metrics) *agent.Queue[func()] {
	q := agent.NewQueue(eventQueue, func(f func()) error { f(); return nil })
	if m != nil {
		q.SetDropped(m.OutputDropped.WithLabelValues(agent.OutputEvents).Inc)
	}
	return q
}

// post runs f through Posts, or at once without it.
func (e *Evictor) post(ctx context.Context, f func(context.Context)) {
	if e.Posts == nil {
		f(ctx)
		return
	}
	// The call has its own timeout (DefaultCallTimeout); it must not end
	// with the eviction that asked for it.
	e.Posts.Put(func() { f(context.Background()) })
}

// postNodeEvents hands the node Events of a record to q: only what
// NodeEvents reads, copied, so the queue holds no ranking.
func postNodeEvents(q *agent.Queue[func()], n *NodeEvents, rec agent.Record) {
	if len(rec.Decision.Events) == 0 && len(rec.Decision.Met) > 0 {
		return // nothing to record, and no end of an episode to note
	}
	r := agent.Record{Time: rec.Time, Decision: policy.Decision{Events: slices.Clone(rec.Decision.Events),
		Met: make([]policy.ThresholdStatus, len(rec.Decision.Met))}}
	q.Put(func() { n.Record(r) })
}

var _ agent.Resumer = (*Evictor)(nil)

// Resume implements agent.Resumer. The last run's eviction may not have
// reached the API server (the stop came during the call), so it is sent
// again with what is left of the grace period (Evict makes it at least the
// API's 1 s): a pod already terminating then keeps its deadline, as a
// deletion may only shorten a grace period, and one not yet told gets the
// rest of it, so the grace period is not restarted.
func (e *Evictor) Resume(ctx context.Context, pod *v1.Pod, deadline time.Time, ev policy.Eviction) (agent.EvictResult, error) {
	left := time.Until(deadline).Truncate(time.Second)
	res, err := e.Evict(ctx, pod, max(left, 0), ev)
	res.Method = "resumed: " + res.Method
	return res, err
}
