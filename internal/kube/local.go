package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/actuate"
)

// DefaultLocalDeadline is how long after an immediate eviction's grace
// period evictd waits for the pod's containers to stop before it kills the
// pod's cgroup itself. A live kubelet sees the eviction through its watch
// within milliseconds and stops the containers within the 1 s grace plus
// its runtime calls; 5 s more means it is wedged or cannot be told.
const DefaultLocalDeadline = 5 * time.Second

// localPoll is how often the pod cgroup is checked for processes while
// waiting for the kubelet.
const localPoll = 100 * time.Millisecond

// LocalFallback kills a pod's cgroup on this node when an immediate
// eviction (a hard threshold's, or a local-storage limit's) has not stopped
// its processes after the grace period plus Deadline: the kubelet is slow
// or wedged, or the API server could not be told. Only immediate evictions
// fall back: they are the ones the kubelet itself carries out at once; a
// soft eviction waits for the kubelet (the threshold is re-checked at every
// synchronize, and a hard one takes over when it is met).
//
// The threshold is the one met when the eviction was decided; it is not
// read again before the kill (the wait is at most grace + Deadline).
type LocalFallback struct {
	Killer *actuate.Killer
	// Cgroup finds the pod's cgroup directory (absolute) by UID.
	Cgroup   func(uid types.UID) (string, bool)
	Deadline time.Duration // 0: DefaultLocalDeadline
	// Killed is told about each pod killed locally (Pods.Exclude): its
	// API object may stay listed while the kubelet or the API server is
	// away, and must not be ranked again.
	Killed func(uid types.UID)
}

// unreachable reports whether an API error means the API server could not
// answer (no status, a timeout, a 5xx): the eviction may not have happened.
// A 4xx is an answer (403: no right to evict) and never leads to a local kill.
func unreachable(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	code := st.Status().Code
	return code >= 500 || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// wait waits up to grace + Deadline for the pod's cgroup to hold no
// process, then kills what is left. It returns what it did, "" when the
// pod stopped by itself (or has no cgroup).
func (l *LocalFallback) wait(ctx context.Context, pod *v1.Pod, grace time.Duration) (string, error) {
	dir, ok := l.Cgroup(pod.UID)
	if !ok {
		return "", nil
	}
	d := l.Deadline
	if d <= 0 {
		d = DefaultLocalDeadline
	}
	deadline := time.Now().Add(grace + d)
	for {
		pids, err := actuate.ProcsRecursive(dir)
		if err != nil || len(pids) == 0 {
			return "", nil // gone (a vanished cgroup is an error here) or empty
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(localPoll):
		}
	}
	res, err := l.Killer.Kill(ctx, actuate.Target{Name: pod.Namespace + "/" + pod.Name, Cgroup: dir}, 0)
	if err != nil {
		return "", err
	}
	if l.Killed != nil {
		l.Killed(pod.UID)
	}
	how := fmt.Sprintf("local %s after grace %s + deadline %s", res.HardKill, grace, d)
	if !res.Gone {
		how += " (processes still present after the kill)"
	}
	return how, nil
}
