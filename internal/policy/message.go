package policy

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet's wording (pkg/kubelet/eviction/helpers.go, eviction_manager.go).
const (
	// Reason is the pod status reason and event reason of an eviction.
	Reason = "Evicted"

	nodeLowMessageFmt                   = "The node was low on resource: %v. "
	nodeConditionMessageFmt             = "The node had condition: %v. "
	containerMessageFmt                 = "Container %s was using %s, request is %s, has larger consumption of %v. "
	podMessageFmt                       = "Pod %s was using %s, request is %s, has larger consumption of %v. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	thresholdMetMessageFmt              = "Threshold quantity: %v, available: %v. "

	// Event annotation keys.
	OffendingContainersKey      = "offending_containers"
	OffendingContainersUsageKey = "offending_containers_usage"
	OffendingPodKey             = "offending_pod"
	OffendingPodUsageKey        = "offending_pod_usage"
	StarvedResourceKey          = "starved_resource"

	// Metric labels of local-storage limit evictions.
	SignalEmptyDirFsLimit           = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"

	// immediateEvictionGracePeriodSeconds is the grace of hard and limit evictions.
	immediateEvictionGracePeriodSeconds = 1
)

// evictionMessage is the kubelet's evictionMessage: the head, the threshold
// part from the first threshold (in decision order) of the same resource with
// an observation, then the pod-level and per-container parts.
func evictionMessage(res v1.ResourceName, pod *v1.Pod, ps *statsv1alpha1.PodStats, found bool, thresholds []Threshold, obs *observations, gates FeatureGates) (string, map[string]string) {
	annotations := map[string]string{}
	var b strings.Builder
	fmt.Fprintf(&b, nodeLowMessageFmt, res)
	for _, t := range thresholds {
		if signalToResource[t.Signal] != res {
			continue
		}
		if o, ok := obs.get(t.Signal); ok {
			q := thresholdQuantity(t.Value, &o.Capacity)
			fmt.Fprintf(&b, thresholdMetMessageFmt, q, &o.Available)
			break
		}
	}
	if !found {
		return b.String(), annotations
	}
	if res == v1.ResourceMemory && gates.PodLevelResources && resourcehelper.IsPodLevelResourcesSet(pod) {
		if req, ok := pod.Spec.Resources.Requests[res]; ok && ps.Memory != nil {
			u := memoryUsage(ps.Memory)
			fmt.Fprintf(&b, podMessageFmt, pod.Name, u.String(), req.String(), res)
			annotations[OffendingPodKey] = pod.Name
			annotations[OffendingPodUsageKey] = u.String()
		}
	}
	var names, usages []string
	for i := range ps.Containers {
		cs := &ps.Containers[i]
		c := findContainer(pod, cs.Name)
		if c == nil {
			continue
		}
		req := c.Resources.Requests[res]
		var usage *resource.Quantity
		switch res {
		case v1.ResourceEphemeralStorage:
			if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
				usage = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
			}
		case v1.ResourceMemory:
			if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
				usage = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
			}
		}
		if usage != nil && usage.Cmp(req) > 0 {
			fmt.Fprintf(&b, containerMessageFmt, c.Name, usage.String(), req.String(), res)
			names = append(names, c.Name)
			usages = append(usages, usage.String())
		}
	}
	annotations[OffendingContainersKey] = strings.Join(names, ",")
	annotations[OffendingContainersUsageKey] = strings.Join(usages, ",")
	annotations[StarvedResourceKey] = string(res)
	return b.String(), annotations
}

// findContainer finds the first regular, then init container with name
// (ephemeral containers are not considered, as in the kubelet).
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
