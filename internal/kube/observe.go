package kube

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/agent"
)

// podCache is what the observer needs of the pod source (Pods): the
// informer's active pods, one listing per call, and the exclusion of a pod
// whose cgroup is gone.
type podCache interface {
	active() []*v1.Pod
	Exclude(uid types.UID)
	All() []*v1.Pod
}

// Observer is the agent's Observer on a Kubernetes node: one listing of the
// informer's active pods per synchronize, the pods whose cgroup is gone
// left out of it (Stats.Vanished), and the Summary of that listing. It is
// also the agent's OOMCounter, which names cgroups from the informer's pods
// in any phase. The pod source and the stats source do not know each
// other: the observer hands the listing from one to the other.
type Observer struct {
	pods  podCache
	stats *Stats
}

// NewObserver observes the node through pods and stats.
func NewObserver(pods *Pods, stats *Stats) *Observer { return &Observer{pods: pods, stats: stats} }

// Observe implements agent.Observer.
func (o *Observer) Observe(ctx context.Context) agent.Observation {
	pods, _ := o.Pods(ctx)
	sum, err := o.stats.SummaryOf(ctx, pods)
	return agent.Observation{Pods: pods, Summary: sum, SummaryErr: err,
		Restat: func(ctx context.Context) (*statsapi.Summary, error) { return o.stats.SummaryOf(ctx, pods) }}
}

// Pods implements agent.Observer: the node's active pods from the cache,
// sorted by namespace and name, less those whose cgroup is gone from this
// node (excluded from then on, as a pod killed locally is, until the
// informer no longer lists them). The informer's cache cannot fail.
func (o *Observer) Pods(ctx context.Context) ([]*v1.Pod, error) {
	out := o.pods.active()
	gone := o.stats.Vanished(out)
	if len(gone) == 0 {
		return out, nil
	}
	for uid := range gone {
		o.pods.Exclude(uid)
	}
	return slices.DeleteFunc(out, func(pod *v1.Pod) bool { return gone[pod.UID] }), nil
}

// NodeOOMKills implements agent.OOMCounter (Stats.NodeOOMKills).
func (o *Observer) NodeOOMKills() (uint64, bool, error) { return o.stats.NodeOOMKills() }

// OOMKills implements agent.OOMCounter (Stats.OOMKillsOf the informer's
// pods in any phase).
func (o *Observer) OOMKills() ([]agent.PodOOMKills, error) { return o.stats.OOMKillsOf(o.pods.All()) }
