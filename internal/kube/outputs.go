package kube

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
)

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
