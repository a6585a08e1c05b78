// Package memqos computes the cgroup v2 memory protection and throttling
// values (memory.min, memory.low, memory.high) and the oom_score_adj that the
// kubelet v1.37.2 writes for each pod and container, so that users can see
// them before a rollout. It is part of the pure core: no OS access; the page
// size, node capacity and allocatable memory are given.
//
// Sources (k8s.io/kubernetes v1.37.2):
//   - pkg/kubelet/kuberuntime/kuberuntime_container_linux.go:
//     generateLinuxContainerResources (container memory.min/low/high)
//   - pkg/kubelet/cm/helpers_linux.go: ResourceConfigForPod (pod cgroup
//     memory.min/low) and ApplyPodLevelMemoryHigh (pod cgroup memory.high)
//   - pkg/kubelet/cm/qos_container_manager_linux.go: setMemoryQoS (QoS-class
//     cgroups)
//   - pkg/kubelet/qos/policy.go: GetContainerOOMScoreAdjust
//   - pkg/kubelet/cm/node_container_manager_linux.go:
//     getNodeAllocatableAbsoluteImpl (allocatable used for memory.high)
package memqos

import (
	"fmt"
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// ReservationPolicy is the KubeletConfiguration memoryReservationPolicy.
type ReservationPolicy string

// The two policies the kubelet accepts; validation refuses anything else.
const (
	ReservationNone   ReservationPolicy = "None"
	ReservationTiered ReservationPolicy = "TieredReservation"
)

// DefaultPageSize is the page size of x86-64 and most arm64 kernels. The
// kubelet uses os.Getpagesize(); `evictd qos` passes the host's.
const DefaultPageSize int64 = 4096

// Settings are the kubelet settings and node facts the values depend on.
type Settings struct {
	// MemoryQoS is the feature gate (beta, on by default in v1.37).
	MemoryQoS bool `json:"memoryQoS"`
	// CgroupV2: MemoryQoS acts only on the unified hierarchy; on cgroup v1
	// the kubelet writes none of these files.
	CgroupV2 bool `json:"cgroupV2"`
	// ReservationPolicy is memoryReservationPolicy ("" means the default, None).
	ReservationPolicy ReservationPolicy `json:"reservationPolicy"`
	// ThrottlingFactor is memoryThrottlingFactor. The v1.37 default is nil,
	// and with nil the kubelet writes no memory.high at all.
	ThrottlingFactor *float64 `json:"throttlingFactor"`
	// PageSize in bytes: memory.high is rounded down to a multiple of it.
	PageSize int64 `json:"pageSize"`
	// NodeAllocatableMemory in bytes: capacity minus systemReserved and
	// kubeReserved (not minus eviction thresholds). memory.high of a
	// container without a memory limit is computed from it.
	NodeAllocatableMemory int64 `json:"nodeAllocatableMemory"`
	// MemoryCapacity in bytes (the machine's MemTotal): the denominator of
	// the Burstable oom_score_adj formula.
	MemoryCapacity int64 `json:"memoryCapacity"`
	// PodLevelResources and PodLevelResourcesFixKubeletQOSClass are the
	// feature gates (both on by default in v1.37).
	PodLevelResources                   bool `json:"podLevelResources"`
	PodLevelResourcesFixKubeletQOSClass bool `json:"podLevelResourcesFixKubeletQOSClass"`
}

// DefaultSettings are the kubelet v1.37.2 defaults on a cgroup v2 node.
// Node facts (allocatable, capacity) are left zero: the caller must set them.
func DefaultSettings() Settings {
	return Settings{
		MemoryQoS:                           true,
		CgroupV2:                            true,
		ReservationPolicy:                   ReservationNone,
		PageSize:                            DefaultPageSize,
		PodLevelResources:                   true,
		PodLevelResourcesFixKubeletQOSClass: true,
	}
}

// Validate checks what the arithmetic needs, with the kubelet's own
// validation wording where the kubelet validates the same setting.
func (s Settings) Validate() error {
	switch s.ReservationPolicy {
	case "", ReservationNone, ReservationTiered:
	default:
		return fmt.Errorf("invalid configuration: option %q specified for memoryReservationPolicy. Valid options are %q or %q",
			s.ReservationPolicy, ReservationNone, ReservationTiered)
	}
	if f := s.ThrottlingFactor; f != nil && (*f <= 0 || *f > 1.0 || math.IsNaN(*f)) {
		return fmt.Errorf("invalid configuration: memoryThrottlingFactor %v must be greater than 0 and less than or equal to 1.0", *f)
	}
	if s.PageSize <= 0 {
		return fmt.Errorf("page size must be positive: %d", s.PageSize)
	}
	if s.MemoryCapacity <= 0 {
		return fmt.Errorf("memory capacity must be positive: %d (oom_score_adj of Burstable containers divides by it)", s.MemoryCapacity)
	}
	if s.NodeAllocatableMemory < 0 {
		return fmt.Errorf("node allocatable memory must not be negative: %d", s.NodeAllocatableMemory)
	}
	return nil
}

// enforced reports whether the kubelet applies MemoryQoS at all.
func (s Settings) enforced() bool { return s.MemoryQoS && s.CgroupV2 }

func (s Settings) tiered() bool { return s.ReservationPolicy == ReservationTiered }

// Value is what the kubelet writes to one cgroup file: nothing, a number of
// bytes, or "max".
type Value struct {
	Written bool
	Max     bool
	Bytes   int64
}

// Bytes is a written byte value.
func Bytes(n int64) Value { return Value{Written: true, Bytes: n} }

// Max is a written "max".
func Max() Value { return Value{Written: true, Max: true} }

// NotWritten is a file the kubelet leaves alone.
func NotWritten() Value { return Value{} }

// String renders the value as the cgroup file would hold it; "-" when the
// kubelet does not write it.
func (v Value) String() string {
	switch {
	case !v.Written:
		return "-"
	case v.Max:
		return "max"
	}
	return strconv.FormatInt(v.Bytes, 10)
}

// MarshalJSON: an integer, "max", or null when the kubelet does not write
// the file (it keeps whatever the runtime or an earlier kubelet left).
func (v Value) MarshalJSON() ([]byte, error) {
	switch {
	case !v.Written:
		return []byte("null"), nil
	case v.Max:
		return []byte(`"max"`), nil
	}
	return strconv.AppendInt(nil, v.Bytes, 10), nil
}

// ContainerKind says how the kubelet runs a container.
type ContainerKind string

const (
	KindInit    ContainerKind = "init"
	KindSidecar ContainerKind = "sidecar" // init container with restartPolicy Always
	KindRegular ContainerKind = "regular"
)

// Container holds the values for one container's cgroup.
type Container struct {
	Name        string        `json:"name"`
	Kind        ContainerKind `json:"-"`
	MemoryMin   Value         `json:"memoryMin"`
	MemoryLow   Value         `json:"memoryLow"`
	MemoryHigh  Value         `json:"memoryHigh"`
	OOMScoreAdj int           `json:"oomScoreAdj"`
}

// Pod holds the values for one pod: its containers (init containers first,
// in spec order, then regular containers) and its pod-level cgroup.
type Pod struct {
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	QOSClass   v1.PodQOSClass  `json:"qosClass"`
	Containers []Container     `json:"containers"`
	Cgroup     PodCgroupValues `json:"-"`
}

// PodCgroupValues are the memory files of the pod's own cgroup
// (kubepods/<qos>/pod<uid>).
type PodCgroupValues struct {
	MemoryMin  Value
	MemoryLow  Value
	MemoryHigh Value
}

// QoSCgroups are the values of the QoS-class cgroups with
// TieredReservation: the root kubepods cgroup (which is also the Guaranteed
// one) and the burstable cgroup. All NotWritten without TieredReservation:
// the kubelet then resets them to 0 once, at startup, and never again.
type QoSCgroups struct {
	KubepodsMemoryMin  Value
	KubepodsMemoryLow  Value
	BurstableMemoryLow Value
}
