package policy

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Annotations and constants of pkg/kubelet/types that make a pod critical.
const (
	configSourceAnnotationKey = "kubernetes.io/config.source"
	configMirrorAnnotationKey = v1.MirrorPodAnnotationKey
	apiserverSource           = "api"
	// systemCriticalPriority is scheduling.SystemCriticalPriority (2×10⁹).
	systemCriticalPriority = 2 * 1000000000
)

// IsCriticalPod is the kubelet's IsCriticalPod: a static pod (config.source
// annotation other than "api"), a mirror pod, or priority ≥ 2000000000. The
// eviction manager never evicts one, on either path.
func IsCriticalPod(pod *v1.Pod) bool {
	if src, ok := pod.Annotations[configSourceAnnotationKey]; ok && src != apiserverSource {
		return true
	}
	if _, ok := pod.Annotations[configMirrorAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// PodQOS is the kubelet's GetPodQOS (status.qosClass when set, otherwise
// computed from requests and limits of cpu and memory).
func PodQOS(pod *v1.Pod, gates FeatureGates) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	if gates.PodLevelResources && pod.Spec.Resources != nil &&
		(!gates.PodLevelResourcesFixKubeletQOSClass || resourcehelper.IsPodLevelResourcesSet(pod)) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var qos v1.PodQOSClass
	visit := func(c *v1.Container) (v1.PodQOSClass, bool) {
		cq := requirementsQOS(&c.Resources)
		if cq == v1.PodQOSBurstable {
			return cq, true
		}
		if qos == "" {
			qos = cq
		} else if qos != cq {
			return v1.PodQOSBurstable, true
		}
		return "", false
	}
	for i := range pod.Spec.InitContainers {
		if q, done := visit(&pod.Spec.InitContainers[i]); done {
			return q
		}
	}
	for i := range pod.Spec.Containers {
		if q, done := visit(&pod.Spec.Containers[i]); done {
			return q
		}
	}
	if qos == "" {
		qos = v1.PodQOSBestEffort
	}
	return qos
}

func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return v1.PodQOSBestEffort
	}
	var qos v1.PodQOSClass
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req := r.Requests[name]
		lim := r.Limits[name]
		var rq v1.PodQOSClass
		switch {
		case !req.Equal(lim):
			return v1.PodQOSBurstable
		case req.IsZero():
			rq = v1.PodQOSBestEffort
		default:
			rq = v1.PodQOSGuaranteed
		}
		if qos == "" {
			qos = rq
		} else if qos != rq {
			return v1.PodQOSBurstable
		}
	}
	return qos
}

// toleratesMemoryPressure is the kubelet's check in admission,
// TolerationsTolerateTaint(tolerations, node.kubernetes.io/memory-pressure
// :NoSchedule), written out because component-helpers takes a logger and the
// core imports no logging package. It is v1.Toleration.ToleratesTaint for
// that one taint, whose value is empty: an Lt or Gt toleration compares the
// taint's value as an integer, "" is none, so it never matches, with the
// TaintTolerationComparisonOperators gate on or off (the kubelet only logs
// the parse error). TestToleratesMemoryPressureMatchesComponentHelpers keeps
// it equal to the library.
func toleratesMemoryPressure(pod *v1.Pod, _ FeatureGates) bool {
	for i := range pod.Spec.Tolerations {
		t := &pod.Spec.Tolerations[i]
		if t.Effect != "" && t.Effect != v1.TaintEffectNoSchedule {
			continue
		}
		if t.Key != "" && t.Key != v1.TaintNodeMemoryPressure {
			continue
		}
		switch t.Operator {
		case "", v1.TolerationOpEqual:
			if t.Value == "" {
				return true
			}
		case v1.TolerationOpExists:
			return true
		}
	}
	return false
}

func isRestartableInitContainer(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
