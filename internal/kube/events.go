package kube

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/kubeclient"
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
// Node, as the kubelet does, and the loop breaker's EvictionLoop Event.
// Hook Record into agent.Config.OnRecord: it hands the writes to Events
// and returns at once.
type NodeEvents struct {
	Client *kubeclient.Client
	Node   string
	// Events writes them off the loop (nil: at once, on the caller's
	// goroutine).
	Events *Recorder
	DryRun bool // record nothing (dry-run and shadow mode)

	// open: an Event was handed over since the last synchronize with no
	// threshold met (the loop's only).
	open bool
	// The last node Event written and when: the repeat rule's state, the
	// writer's only (the writes run in order on Events' goroutine, and
	// the state follows what was written, not what was queued).
	lastMsg string
	lastAt  time.Time
}

// Record hands the Events of one synchronize record to Events; it never
// waits for the API server.
func (n *NodeEvents) Record(rec agent.Record) {
	if n.DryRun {
		return
	}
	at := rec.Time
	for _, ev := range rec.Decision.Events {
		switch {
		case ev.Reason == policy.EvictionLoopReason:
			if ref, ok := loopRef(rec, ev); ok {
				n.open = true
				n.Events.Post("the EvictionLoop event of "+ev.Object, func(ctx context.Context) error {
					return createEvent(ctx, n.Client, n.Node, ref, ref.Namespace, ev.Reason, ev.Message, nil, at)
				})
			}
		case ev.Object == "Node":
			n.open = true
			n.Events.Post("the node event "+ev.Reason, func(ctx context.Context) error { return n.writeNodeEvent(ctx, ev, at) })
		}
	}
	if len(rec.Decision.Met) == 0 && n.open {
		// A new episode records again.
		n.open = !n.Events.do(func() { n.lastMsg = "" })
	}
}

// writeNodeEvent creates a node Event unless the same one was written less
// than nodeEventRepeat before at.
func (n *NodeEvents) writeNodeEvent(ctx context.Context, ev policy.Event, at time.Time) error {
	key := ev.Reason + "\x00" + ev.Message
	if key == n.lastMsg && at.Sub(n.lastAt) < nodeEventRepeat {
		return nil
	}
	// The kubelet's node reference: kind Node, the node's name as UID.
	ref := v1.ObjectReference{Kind: "Node", Name: n.Node, UID: types.UID(n.Node)}
	if err := createEvent(ctx, n.Client, n.Node, ref, "", ev.Reason, ev.Message, ev.Annotations, at); err != nil {
		return err
	}
	n.lastMsg, n.lastAt = key, at
	return nil
}

// loopRef is the pod the loop breaker's EvictionLoop Event goes to (policy
// profile loop-breaker): the pod whose eviction made the loop; it names the
// controller, and the pod's own Events are where its eviction is.
func loopRef(rec agent.Record, ev policy.Event) (v1.ObjectReference, bool) {
	for _, e := range rec.Decision.Evictions {
		if p := e.Pod; p.Namespace+"/"+p.Name == ev.Object {
			return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}, true
		}
	}
	return v1.ObjectReference{}, false
}
