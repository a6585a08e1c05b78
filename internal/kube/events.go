package kube

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
)

// nodeEventRepeat is how often the same node Event is recorded again while
// it keeps being due. The kubelet records "Attempting to reclaim <resource>"
// on every synchronize that acts on a threshold and its recorder folds the
// repeats into one Event's count; evictd records one Event per episode
// instead, and again after this long.
const nodeEventRepeat = 10 * time.Minute

// NodeEvents records the node Events of the agent's decisions
// (EvictionThresholdMet "Attempting to reclaim <resource>") against the
// Node, as the kubelet does. Hook Record into agent.Config.OnRecord.
type NodeEvents struct {
	Client      kubernetes.Interface
	Node        string
	CallTimeout time.Duration
	Log         *slog.Logger
	DryRun      bool // record nothing (dry-run and shadow mode)

	lastMsg string
	lastAt  time.Time
}

// Record creates the node Events of one synchronize record.
func (n *NodeEvents) Record(rec agent.Record) {
	if n.DryRun {
		return
	}
	for _, ev := range rec.Decision.Events {
		if ev.Reason == policy.EvictionLoopReason {
			n.recordLoop(rec, ev)
			continue
		}
		if ev.Object != "Node" {
			continue
		}
		key := ev.Reason + "\x00" + ev.Message
		if key == n.lastMsg && rec.Time.Sub(n.lastAt) < nodeEventRepeat {
			continue
		}
		// The kubelet's node reference: kind Node, the node's name as UID.
		ref := v1.ObjectReference{Kind: "Node", Name: n.Node, UID: types.UID(n.Node)}
		to := n.CallTimeout
		if to <= 0 {
			to = DefaultCallTimeout
		}
		err := createEvent(context.Background(), n.Client, func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, to)
		}, n.Node, ref, "", ev.Reason, ev.Message, ev.Annotations, rec.Time)
		if err != nil {
			if n.Log != nil {
				n.Log.Warn("recording a node event failed", "reason", ev.Reason, "err", err)
			}
			continue
		}
		n.lastMsg, n.lastAt = key, rec.Time
	}
	if len(rec.Decision.Met) == 0 {
		n.lastMsg = "" // a new episode records again
	}
}

// recordLoop records the loop breaker's EvictionLoop Event (policy profile
// loop-breaker) against the pod whose eviction made the loop: it names the
// controller, and the pod's own Events are where its eviction is.
func (n *NodeEvents) recordLoop(rec agent.Record, ev policy.Event) {
	var pod *policy.PodRef
	for i := range rec.Decision.Evictions {
		p := rec.Decision.Evictions[i].Pod
		if p.Namespace+"/"+p.Name == ev.Object {
			pod = &p
		}
	}
	if pod == nil {
		return
	}
	to := n.CallTimeout
	if to <= 0 {
		to = DefaultCallTimeout
	}
	ref := v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID)}
	err := createEvent(context.Background(), n.Client, func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, to)
	}, n.Node, ref, pod.Namespace, ev.Reason, ev.Message, nil, rec.Time)
	if err != nil && n.Log != nil {
		n.Log.Warn("recording the eviction loop event failed", "pod", ev.Object, "err", err)
	}
}
