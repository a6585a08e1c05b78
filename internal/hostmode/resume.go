package hostmode

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload"
)

var _ agent.Resumer = (*Evictor)(nil)

// Resume implements agent.Resumer: the workload got SIGTERM from an earlier
// run; wait until its grace period's deadline, then kill what is left.
func (h *Evictor) Resume(ctx context.Context, pod *v1.Pod, deadline time.Time, _ policy.Eviction) (agent.EvictResult, error) {
	dir := pod.Annotations[workload.CgroupAnnotation]
	if dir == "" {
		return agent.EvictResult{}, fmt.Errorf("pod %s/%s has no %s annotation", pod.Namespace, pod.Name, workload.CgroupAnnotation)
	}
	res, err := h.Killer.Finish(ctx, actuate.Target{Name: pod.Name, Cgroup: dir}, deadline)
	out := agent.EvictResult{Gone: res.Gone, DryRun: res.DryRun, Took: res.Elapsed, Method: "resumed: SIGTERM sent by the last run"}
	if res.HardKill != "" {
		out.Method += ", then " + res.HardKill
	}
	return out, err
}
