// Package kube is evictd's Kubernetes wiring: the pods of this node from an
// informer scoped to it, their stats from evictd's own cgroup collector
// (named as the kubelet's Summary names them) with the disk part from the
// kubelet's Summary API, and an evictor that evicts through the Eviction API
// with the kubelet's grace period, condition, Events and message.
//
// The loop (internal/agent) and the decisions (internal/policy) are the ones
// host mode uses; this package only provides the agent's PodSource,
// StatsSource and Evictor.
package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/evictd/evictd/internal/kubeclient"
)

// Self identifies evictd's own pod (from the downward API: POD_UID, or
// POD_NAMESPACE and POD_NAME). evictd never evicts it.
type Self struct {
	UID       types.UID
	Namespace string
	Name      string
}

func (s Self) is(p *v1.Pod) bool {
	if s.UID != "" {
		return p.UID == s.UID
	}
	return s.Name != "" && p.Name == s.Name && p.Namespace == s.Namespace
}

// SelfAnnotation marks the copy of evictd's own pod that Pods returns. It
// comes with the static-pod annotation (config.source "evictd") so that the
// engine ranks evictd's pod like any other but, like a critical pod, never
// evicts it — the kubelet's own rule for pods that must not go.
const SelfAnnotation = "evictd.io/self"

const configSourceAnnotation = "kubernetes.io/config.source"

// Pods is the pod source on a Kubernetes node, for the Observer: an
// informer on the pods bound to this node only (field selector
// spec.nodeName), no cluster-wide cache.
type Pods struct {
	Node string
	Self Self

	informer cache.SharedIndexInformer
	stop     chan struct{}
	stopOnce sync.Once

	mu       sync.Mutex
	excluded map[types.UID]bool // killed locally, or vanished; see Exclude
}

// Exclude leaves the pod with this UID out of Pods until the informer no
// longer lists it: evictd killed its cgroup itself, and its API object may
// stay (terminating, or not even that while the API server is away) for as
// long as the kubelet or the API server are not back.
func (p *Pods) Exclude(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.excluded == nil {
		p.excluded = map[types.UID]bool{}
	}
	p.excluded[uid] = true
}

// NewPods starts the informer and waits (bounded by ctx) for its first list.
func NewPods(ctx context.Context, client *kubeclient.Client, node string, self Self) (*Pods, error) {
	if node == "" {
		return nil, errors.New("kube: the node name is empty (set --node-name or NODE_NAME)")
	}
	// The indexer client-go's pod informer has (by namespace), no resync.
	inf := cache.NewSharedIndexInformer(client.PodListWatch(fields.OneTermEqualSelector("spec.nodeName", node)), &v1.Pod{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p := &Pods{Node: node, Self: self, informer: inf, stop: make(chan struct{})}
	if podTransform != nil {
		if err := p.informer.SetTransform(podTransform); err != nil {
			return nil, fmt.Errorf("kube: pod informer: %w", err)
		}
	}
	go inf.Run(p.stop)
	if !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced) {
		p.Close()
		return nil, fmt.Errorf("kube: listing the pods of node %s did not finish: %w", node, context.Cause(ctx))
	}
	return p, nil
}

// podTransform is what the informer does to each pod before it caches it
// (trimPod; nil in a benchmark's baseline).
var podTransform cache.TransformFunc = trimPod

// lastAppliedAnnotation is kubectl apply's copy of the whole object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// trimPod drops from a pod what evictd never reads, before the informer
// caches it (client-go's documented use of a transform: the object is the
// informer's own, freshly decoded, and may be changed in place): the
// managed fields (server-side apply's record of who set what, often the
// largest part of a pod object), kubectl's last-applied-configuration
// annotation (the whole object again), and in every container its
// environment, command, arguments, probes and lifecycle hooks. Everything
// the engine ranks and names by stays — metadata (labels, the other
// annotations: mirror, config source), resources, priority, volumes (their
// size limits), tolerations, owner references — and the whole status.
// Measured by BenchmarkPodInformerMemory (docs/kubernetes.md#cost).
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil // a tombstone or another kind: as it is
	}
	pod.ManagedFields = nil
	delete(pod.Annotations, lastAppliedAnnotation)
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Env, c.EnvFrom, c.Command, c.Args = nil, nil, nil, nil
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		c.Env, c.EnvFrom, c.Command, c.Args = nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	}
	return pod, nil
}

// Close stops the informer.
func (p *Pods) Close() { p.stopOnce.Do(func() { close(p.stop) }) }

// Informer returns the pod informer (shadow mode watches it too).
func (p *Pods) Informer() cache.SharedIndexInformer { return p.informer }

// Pods lists the node's active pods from the cache, sorted by namespace and
// name (the kubelet's order is its pod manager's, which only matters for
// ties the ranking breaks by sort stability). The agent's listing, with the
// pods whose cgroup is gone left out, is Observer.Pods.
func (p *Pods) Pods(ctx context.Context) ([]*v1.Pod, error) { return p.active(), nil }

// active lists the informer's active pods less the excluded ones, sorted.
func (p *Pods) active() []*v1.Pod {
	objs := p.informer.GetStore().List()
	out := make([]*v1.Pod, 0, len(objs))
	p.mu.Lock()
	defer p.mu.Unlock()
	var listed map[types.UID]bool
	if len(p.excluded) > 0 {
		listed = make(map[types.UID]bool, len(p.excluded))
	}
	for _, o := range objs {
		pod, ok := o.(*v1.Pod)
		if !ok {
			continue
		}
		if p.excluded[pod.UID] {
			listed[pod.UID] = true
			continue
		}
		if !Active(pod) {
			continue
		}
		if p.Self.is(pod) {
			pod = markSelf(pod)
		}
		out = append(out, pod)
	}
	for uid := range p.excluded {
		if !listed[uid] {
			delete(p.excluded, uid) // gone from the API: nothing to hide any more
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// All lists the informer's pods in any phase.
func (p *Pods) All() []*v1.Pod {
	objs := p.informer.GetStore().List()
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*v1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out
}

// Get returns the cached pod with this UID (nil when the informer does not
// know it, or knows another pod under that name).
func (p *Pods) Get(namespace, name string, uid types.UID) *v1.Pod {
	o, ok, err := p.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	pod, _ := o.(*v1.Pod)
	if pod == nil || (uid != "" && pod.UID != uid) {
		return nil
	}
	return pod
}

// markSelf returns a copy of evictd's own pod that the engine treats as
// critical (see SelfAnnotation); the cached object is never modified.
func markSelf(pod *v1.Pod) *v1.Pod {
	c := pod.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[SelfAnnotation] = "true"
	if src, ok := c.Annotations[configSourceAnnotation]; !ok || src == "api" {
		c.Annotations[configSourceAnnotation] = "evictd"
	}
	return c
}

// Active reports whether the kubelet counts pod among its active pods (what
// its eviction manager ranks): admitted by the kubelet and not terminal.
//
//   - Admitted: the kubelet sets status.startTime when it admits a pod, so a
//     pod bound to the node that the kubelet has not admitted yet (no start
//     time) is not active, as it is not in the kubelet's list either.
//   - Terminal (phase Succeeded or Failed) pods are not active.
//   - A terminating pod (deletion timestamp set) stays active while any of
//     its containers may still run, as the kubelet keeps it until its pod
//     worker has stopped every container; once every container status
//     says terminated (or there are none), it is not.
func Active(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false
	}
	if pod.Status.StartTime == nil {
		return false
	}
	if pod.DeletionTimestamp != nil {
		for _, lists := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
			for i := range lists {
				if lists[i].State.Terminated == nil {
					return true
				}
			}
		}
		return false
	}
	return true
}
