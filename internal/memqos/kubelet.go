package memqos

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

// Feature gate names read from the KubeletConfiguration featureGates map.
const (
	gateMemoryQoS                           = "MemoryQoS"
	gatePodLevelResources                   = "PodLevelResources"
	gatePodLevelResourcesFixKubeletQOSClass = "PodLevelResourcesFixKubeletQOSClass"
	// previousDefaultMemoryThrottlingFactor is still accepted with MemoryQoS
	// off (pkg/kubelet/apis/config/validation).
	previousDefaultMemoryThrottlingFactor = 0.9
)

// FromKubelet reads the MemoryQoS settings of a KubeletConfiguration (gates,
// memoryReservationPolicy, memoryThrottlingFactor) over DefaultSettings and
// applies the kubelet's validation of them, with its wording. Node facts
// (page size, capacity, allocatable) and the cgroup version are the caller's.
func FromKubelet(kc *kubeletconfigv1beta1.KubeletConfiguration) (Settings, error) {
	s := DefaultSettings()
	if kc == nil {
		return s, nil
	}
	for name, on := range kc.FeatureGates {
		switch name {
		case gateMemoryQoS:
			s.MemoryQoS = on
		case gatePodLevelResources:
			s.PodLevelResources = on
		case gatePodLevelResourcesFixKubeletQOSClass:
			s.PodLevelResourcesFixKubeletQOSClass = on
		}
	}
	if kc.MemoryReservationPolicy != "" {
		s.ReservationPolicy = ReservationPolicy(kc.MemoryReservationPolicy)
	}
	if kc.MemoryThrottlingFactor != nil {
		f := *kc.MemoryThrottlingFactor
		s.ThrottlingFactor = &f
	}
	if !s.MemoryQoS && s.ThrottlingFactor != nil && *s.ThrottlingFactor != previousDefaultMemoryThrottlingFactor {
		return s, policy.NewError(policy.ErrThrottlingFactorWithoutMemoryQoS, "memoryThrottlingFactor",
			"invalid configuration: memoryThrottlingFactor must not be set when MemoryQoS feature gate is disabled")
	}
	if f := s.ThrottlingFactor; f != nil && (*f <= 0 || *f > 1.0) {
		return s, policy.NewError(policy.ErrThrottlingFactorOutOfRange, "memoryThrottlingFactor",
			fmt.Sprintf("invalid configuration: memoryThrottlingFactor %v must be greater than 0 and less than or equal to 1.0", *f))
	}
	if !s.MemoryQoS && s.ReservationPolicy == ReservationTiered {
		return s, policy.NewError(policy.ErrReservationPolicyNeedsMemoryQoS, "memoryReservationPolicy",
			fmt.Sprintf("invalid configuration: memoryReservationPolicy %q requires MemoryQoS feature gate to be enabled", s.ReservationPolicy))
	}
	switch s.ReservationPolicy {
	case ReservationNone, ReservationTiered:
	default:
		return s, policy.NewError(policy.ErrUnknownReservationPolicy, "memoryReservationPolicy",
			fmt.Sprintf("invalid configuration: option %q specified for memoryReservationPolicy. Valid options are %q or %q",
				s.ReservationPolicy, ReservationNone, ReservationTiered))
	}
	return s, nil
}

// NodeAllocatableMemory is the kubelet's absolute node allocatable memory
// (getNodeAllocatableAbsoluteImpl): capacity − systemReserved.memory −
// kubeReserved.memory, never below 0. Eviction thresholds are not
// subtracted here; this is the figure memory.high is computed from.
func NodeAllocatableMemory(capacity int64, kc *kubeletconfigv1beta1.KubeletConfiguration) (int64, error) {
	alloc := capacity
	if kc != nil {
		for _, r := range []struct {
			field string
			m     map[string]string
		}{{"systemReserved", kc.SystemReserved}, {"kubeReserved", kc.KubeReserved}} {
			v, ok := r.m["memory"]
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return 0, fmt.Errorf("%s.memory: %q: %w", r.field, v, err)
			}
			alloc -= q.Value()
		}
	}
	return max(alloc, 0), nil
}
