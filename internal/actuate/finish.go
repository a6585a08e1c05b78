package actuate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrInterrupted is returned when ctx ended a kill's grace period before it
// ran out: the workload got SIGTERM and was not killed.
var ErrInterrupted = errors.New("the wait for the grace period was interrupted (evictd is stopping); nothing was killed")

// Finish completes a kill whose SIGTERM an earlier run of evictd sent: it
// waits until deadline for t's cgroup to empty, then kills what is left as
// Kill does at the end of a grace period. It sends no SIGTERM, so the
// workload's grace period is neither restarted nor shortened.
func (k *Killer) Finish(ctx context.Context, t Target, deadline time.Time) (Result, error) {
	start := time.Now()
	if wait := time.Until(deadline); wait > 0 && !k.DryRun {
		if k.waitEmpty(ctx, t.Cgroup, wait) {
			return Result{Target: t, Gone: true, Elapsed: time.Since(start)}, nil
		}
		if ctx.Err() != nil {
			return Result{Target: t, Elapsed: time.Since(start)}, fmt.Errorf("kill %s: %w", t.Name, ErrInterrupted)
		}
	}
	res, err := k.Kill(ctx, t, 0)
	res.Elapsed = time.Since(start)
	return res, err
}
