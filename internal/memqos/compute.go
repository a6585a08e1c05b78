package memqos

import (
	"math"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/evictd/evictd/internal/policy"
)

// oom_score_adj constants of pkg/kubelet/qos/policy.go.
const (
	guaranteedOOMScoreAdj = -997 // Guaranteed and node-critical containers
	besteffortOOMScoreAdj = 1000
	// burstableMinOOMScoreAdj keeps a Burstable container above a Guaranteed
	// one that uses all memory (1000 + guaranteedOOMScoreAdj).
	burstableMinOOMScoreAdj = 1000 + guaranteedOOMScoreAdj
	// systemNodeCritical is the priority class name that, with a critical
	// pod, earns the Guaranteed oom_score_adj.
	systemNodeCritical = "system-node-critical"
)

// ForPods computes the values for every pod, and for the QoS-class cgroups
// (which depend on all pods' requests). It fails only on invalid settings.
func ForPods(pods []*v1.Pod, s Settings) ([]Pod, QoSCgroups, error) {
	if err := s.Validate(); err != nil {
		return nil, QoSCgroups{}, err
	}
	out := make([]Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, ForPod(p, s))
	}
	return out, QoSValues(pods, s), nil
}

// ForPod computes the values the kubelet writes for one pod's cgroup and for
// each of its init and regular containers. s must be valid (Settings.Validate).
func ForPod(pod *v1.Pod, s Settings) Pod {
	r := Pod{
		Namespace: pod.Namespace,
		Name:      pod.Name,
		QOSClass:  podQOS(pod, s),
		Cgroup:    podCgroup(pod, s),
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		kind := KindInit
		if isSidecar(pod, c) {
			kind = KindSidecar
		}
		r.Containers = append(r.Containers, container(pod, c, kind, r.QOSClass, s))
	}
	for i := range pod.Spec.Containers {
		r.Containers = append(r.Containers, container(pod, &pod.Spec.Containers[i], KindRegular, r.QOSClass, s))
	}
	return r
}

func podQOS(pod *v1.Pod, s Settings) v1.PodQOSClass {
	return policy.PodQOS(pod, policy.FeatureGates{
		PodLevelResources:                   s.PodLevelResources,
		PodLevelResourcesFixKubeletQOSClass: s.PodLevelResourcesFixKubeletQOSClass,
	})
}

// container follows generateLinuxContainerResources.
func container(pod *v1.Pod, c *v1.Container, kind ContainerKind, qos v1.PodQOSClass, s Settings) Container {
	out := Container{Name: c.Name, Kind: kind, OOMScoreAdj: ContainerOOMScoreAdj(pod, c, s)}
	if !s.CgroupV2 {
		return out // cgroup v1: no unified files at all
	}
	if !s.MemoryQoS {
		// MemoryQoS off on cgroup v2: memory.high is reset to "max" so that
		// a throttle left by an earlier MemoryQoS kubelet goes away.
		out.MemoryHigh = Max()
		return out
	}
	request := c.Resources.Requests.Memory().Value()
	limit := c.Resources.Limits.Memory().Value()
	if request != 0 && s.tiered() {
		// Only one of the two files is written; the other keeps its value.
		if qos == v1.PodQOSGuaranteed {
			out.MemoryMin = Bytes(request)
		} else {
			out.MemoryLow = Bytes(request)
		}
	} else {
		out.MemoryMin = Bytes(0)
		out.MemoryLow = Bytes(0)
	}
	// With a pod-level memory limit, a container without its own limit is
	// throttled by the pod cgroup's memory.high instead.
	skip := limit == 0 && s.PodLevelResources && resourcehelper.IsPodLevelResourcesSet(pod) &&
		!pod.Spec.Resources.Limits.Memory().IsZero()
	if s.ThrottlingFactor != nil && !skip && (request != limit || request == 0) {
		var high int64
		if limit != 0 {
			high = memoryHigh(request, limit, *s.ThrottlingFactor, s.PageSize)
		} else if s.NodeAllocatableMemory > 0 {
			high = memoryHigh(request, s.NodeAllocatableMemory, *s.ThrottlingFactor, s.PageSize)
		}
		if high != 0 && high > request {
			out.MemoryHigh = Bytes(high)
		}
	}
	return out
}

// memoryHigh is the kubelet's formula, in float64 as the kubelet computes it:
// floor((request + factor × (limit − request)) / pageSize) × pageSize.
func memoryHigh(request, limit int64, factor float64, pageSize int64) int64 {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return int64(math.Floor((float64(request)+(float64(limit)-float64(request))*factor)/float64(pageSize))) * pageSize
}

// podCgroup follows ResourceConfigForPod (memory.min/low) and
// ApplyPodLevelMemoryHigh (memory.high) for the pod's own cgroup.
func podCgroup(pod *v1.Pod, s Settings) PodCgroupValues {
	var out PodCgroupValues
	if !s.enforced() {
		return out
	}
	opts := resourcehelper.PodResourcesOptions{SkipPodLevelResources: !s.PodLevelResources}
	reqs := resourcehelper.PodRequests(pod, opts)
	if s.tiered() {
		if req := reqs.Memory().Value(); req > 0 {
			if podQOS(pod, s) == v1.PodQOSGuaranteed {
				out.MemoryMin = Bytes(req)
			} else {
				out.MemoryLow = Bytes(req)
			}
		}
	}
	if s.ThrottlingFactor == nil || !s.PodLevelResources || !resourcehelper.IsPodLevelResourcesSet(pod) {
		return out
	}
	limitsDeclared := true
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Resources.Limits.Memory().IsZero() {
			limitsDeclared = false
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Resources.Limits.Memory().IsZero() {
			limitsDeclared = false
		}
	}
	if !pod.Spec.Resources.Limits.Memory().IsZero() {
		limitsDeclared = true
	}
	if !limitsDeclared {
		return out
	}
	// ApplyPodLevelMemoryHigh sums with default options (pod-level values
	// win when set).
	podReqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	podLims := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	request, limit := podReqs.Memory().Value(), podLims.Memory().Value()
	if (request == limit && request != 0) || limit == 0 {
		return out
	}
	if high := memoryHigh(request, limit, *s.ThrottlingFactor, s.PageSize); high > 0 && high > request {
		out.MemoryHigh = Bytes(high)
	}
	return out
}

// QoSValues follows the QoS container manager: with MemoryQoS and
// TieredReservation, kubepods gets memory.min = Guaranteed + Burstable
// requests and memory.low = Burstable requests, and the burstable cgroup
// memory.low = Burstable requests. Otherwise, on cgroup v2, the kubelet
// resets them to 0 at startup.
func QoSValues(pods []*v1.Pod, s Settings) QoSCgroups {
	if !s.CgroupV2 {
		return QoSCgroups{}
	}
	if !s.MemoryQoS || !s.tiered() {
		return QoSCgroups{KubepodsMemoryMin: Bytes(0), KubepodsMemoryLow: Bytes(0), BurstableMemoryLow: Bytes(0)}
	}
	var guaranteed, burstable int64
	for _, p := range pods {
		// getQoSMemoryRequests classifies with GetPodQOS and sums with
		// default options.
		q := podQOS(p, s)
		if q == v1.PodQOSBestEffort {
			continue
		}
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		if q == v1.PodQOSGuaranteed {
			guaranteed += reqs.Memory().Value()
		} else {
			burstable += reqs.Memory().Value()
		}
	}
	return QoSCgroups{
		KubepodsMemoryMin:  Bytes(guaranteed + burstable),
		KubepodsMemoryLow:  Bytes(burstable),
		BurstableMemoryLow: Bytes(burstable),
	}
}

// ContainerOOMScoreAdj is the kubelet's GetContainerOOMScoreAdjust (without
// DRA node-allocatable claims, whose gate is off by default).
// It uses s.MemoryCapacity (the machine's memory in bytes), which must be
// positive for Burstable pods (the kubelet would divide by zero), and the
// pod-level resources gates.
func ContainerOOMScoreAdj(pod *v1.Pod, c *v1.Container, s Settings) int {
	if isNodeCritical(pod) {
		return guaranteedOOMScoreAdj
	}
	memoryCapacity, podLevelResources := s.MemoryCapacity, s.PodLevelResources
	switch podQOS(pod, s) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	request := c.Resources.Requests.Memory().Value()
	podLevel := podLevelResources && resourcehelper.IsPodLevelRequestsSet(pod)
	var adj, remaining int64
	if podLevel {
		remaining = remainingPodMemoryPerContainer(pod)
		adj = 1000 - (1000*(request+remaining))/memoryCapacity
	} else {
		adj = 1000 - (1000*request)/memoryCapacity
	}
	// A sidecar is never kept longer than the regular container with the
	// smallest request.
	if isSidecar(pod, c) {
		minRequest := minRegularContainerMemory(pod)
		if podLevel {
			minRequest += remaining
		}
		if minAdj := 1000 - (1000*minRequest)/memoryCapacity; adj > minAdj {
			adj = minAdj
		}
	}
	if int(adj) < burstableMinOOMScoreAdj {
		return burstableMinOOMScoreAdj
	}
	if int(adj) == besteffortOOMScoreAdj {
		return besteffortOOMScoreAdj - 1
	}
	return int(adj)
}

// isSidecar is qos.isSidecarContainer: restartPolicy Always and listed among
// the init containers (by name).
func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// isNodeCritical is types.IsNodeCriticalPod: critical (static, mirror or
// priority ≥ 2×10⁹) and in the system-node-critical priority class.
func isNodeCritical(pod *v1.Pod) bool {
	return policy.IsCriticalPod(pod) && pod.Spec.PriorityClassName == systemNodeCritical
}

func minRegularContainerMemory(pod *v1.Pod) int64 {
	if len(pod.Spec.Containers) == 0 {
		return 0 // the kubelet would index out of range; no valid pod has no containers
	}
	m := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
	for i := 1; i < len(pod.Spec.Containers); i++ {
		if v := pod.Spec.Containers[i].Resources.Requests.Memory().Value(); v < m {
			m = v
		}
	}
	return m
}

// remainingPodMemoryPerContainer shares the pod-level memory request not
// claimed by containers equally among all (init and regular) containers.
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	if pod.Spec.Resources == nil || pod.Spec.Resources.Requests.Memory().IsZero() {
		return 0
	}
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if n == 0 {
		return 0
	}
	aggr := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	remaining := pod.Spec.Resources.Requests.Memory().Value() - aggr.Memory().Value()
	return max(remaining, 0) / n
}
