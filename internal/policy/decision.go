package policy

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Input is what one kubelet synchronize reads: the stats Summary and the
// active pods (admitted, not terminal), in the order the pod source lists them.
// Pods are matched to their stats by UID. Treat passed pods as immutable, as
// Kubernetes API objects are: the engine memoises what it derives from a pod
// spec per pod object (re-deriving when UID, resourceVersion or generation
// change), so give a changed pod as a new object. Pods must not be nil. The
// engine never modifies its inputs.
type Input struct {
	Summary *statsv1alpha1.Summary
	Pods    []*v1.Pod
}

// Filesystems is the node's filesystem layout, which the kubelet detects once
// on its first synchronize.
type Filesystems struct {
	// DedicatedImageFs: the image filesystem is not the node (kubelet) filesystem.
	DedicatedImageFs bool `json:"dedicatedImageFs"`
	// SplitContainerFs: container writable layers are on yet another
	// filesystem than images (requires KubeletSeparateDiskGC).
	SplitContainerFs bool `json:"splitContainerFs"`
}

// Observation is one signal's observed value, as the kubelet derives it.
type Observation struct {
	Signal Signal `json:"signal"`
	// Available may be negative: the Summary's unsigned values are converted
	// to int64 as the kubelet does (kubernetes#52386).
	Available resource.Quantity `json:"available"`
	// Capacity is what percentages resolve against.
	Capacity resource.Quantity `json:"capacity"`
	// Time is the stats timestamp (zero when the Summary has none).
	Time metav1.Time `json:"time"`
}

// ThresholdStatus is a threshold with its resolved quantity and timing.
type ThresholdStatus struct {
	Threshold Threshold `json:"threshold"`
	// Quantity is the threshold value resolved against the observed capacity
	// (without min-reclaim); Available the observed value (nil without observation).
	Quantity  *resource.Quantity `json:"quantity,omitempty"`
	Available *resource.Quantity `json:"available,omitempty"`
	// MinReclaimActive: met only because a previously met threshold has not
	// yet recovered past value + minReclaim (hysteresis).
	MinReclaimActive bool `json:"minReclaimActive,omitempty"`
	// FirstObserved is when the threshold was first seen met in this episode.
	FirstObserved time.Time `json:"firstObserved"`
	// GraceRemaining is the part of the grace period still to run (0 when satisfied).
	GraceRemaining time.Duration `json:"graceRemaining"`
}

// PodRef names a pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

func refOf(p *v1.Pod) PodRef {
	return PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// Candidate is one pod in the ranking for the deciding signal, with the keys
// that ranked it. Rank 1 is evicted first.
type Candidate struct {
	Rank     int    `json:"rank"`
	Pod      PodRef `json:"pod"`
	HasStats bool   `json:"hasStats"`
	// ExceedsRequest: usage > request (memory and disk rankings).
	ExceedsRequest bool  `json:"exceedsRequest"`
	Priority       int32 `json:"priority"`
	// Usage and Request of the ranked resource (memory: working set; disk:
	// the filesystems measured for the signal; inodes: inodes used). For the
	// PID ranking Usage is the process count and Request is absent.
	Usage   *resource.Quantity `json:"usage,omitempty"`
	Request *resource.Quantity `json:"request,omitempty"`
	// UsageMinusRequest is the third key (memory and disk rankings). For
	// inodes the kubelet subtracts the ephemeral-storage request (quirk).
	UsageMinusRequest *resource.Quantity `json:"usageMinusRequest,omitempty"`
	// ProcessCount is the second key of the PID ranking.
	ProcessCount uint64 `json:"processCount,omitempty"`
	// Critical pods are ranked like any other but never evicted.
	Critical bool `json:"critical,omitempty"`
	// Swap is the pod's swap usage, counted in Usage with Profile.SwapAware.
	Swap *resource.Quantity `json:"swap,omitempty"`
	// Looping: the pod's controller is in an eviction loop on this node, so
	// the pod ranks after the others (Profile.LoopBreaker).
	Looping bool `json:"looping,omitempty"`
}

// Eviction is one pod the kubelet would kill, with everything it records.
type Eviction struct {
	Pod PodRef `json:"pod"`
	// GracePeriodSeconds is the override passed to the pod kill.
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
	// Message is the pod status message and the event message, byte for byte.
	Message string `json:"message"`
	// Annotations of the "Evicted" pod event (nil for limit evictions, an
	// empty map when the pod has no stats).
	Annotations map[string]string `json:"annotations,omitempty"`
	// Condition is the DisruptionTarget condition (threshold evictions only).
	Condition *v1.PodCondition `json:"condition,omitempty"`
	// Signal is the kubelet's kubelet_evictions metric label (evictd's
	// evictd_evictions_total has the same): a signal name, or
	// emptydirfs.limit, ephemeralpodfs.limit, ephemeralcontainerfs.limit.
	Signal string `json:"signal"`
	// Limit is true for local-storage limit evictions.
	Limit bool `json:"limit,omitempty"`
	// Immediate is true when the kubelet kills without waiting: a hard
	// threshold's eviction or a local-storage limit's (grace override 1 s).
	// Kubernetes mode then overrides a PodDisruptionBudget at once.
	Immediate bool `json:"immediate,omitempty"`
}

// Event is an event the kubelet records.
type Event struct {
	// Object is "Node" or the pod's namespace/name.
	Object      string            `json:"object"`
	Type        string            `json:"type"`
	Reason      string            `json:"reason"`
	Message     string            `json:"message"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Decision is the result of one synchronize (Step), or of its continuation
// after node-level reclaim (Reclaimed).
type Decision struct {
	Now time.Time `json:"now"`
	// Error is set when the kubelet's synchronize would return early with an
	// error or log one and stop (no summary; split filesystem without the
	// KubeletSeparateDiskGC gate). State is unchanged unless noted.
	Error string `json:"error,omitempty"`
	// Observations in evictd's signal order.
	Observations []Observation `json:"observations"`
	// Met: thresholds met now ignoring grace periods (with hysteresis).
	Met []ThresholdStatus `json:"met"`
	// InGrace: the met thresholds whose grace period has not run out.
	InGrace []ThresholdStatus `json:"inGrace"`
	// Stale: grace-satisfied thresholds dropped because their stats are not
	// newer than the previous synchronize's.
	Stale []ThresholdStatus `json:"stale,omitempty"`
	// Unevaluated: thresholds the kubelet does not look at in this
	// synchronize — the containerfs thresholds it derives on its first
	// synchronize are appended after it took its list (seen from the second).
	Unevaluated []Threshold `json:"unevaluated,omitempty"`
	// Actionable: grace-satisfied thresholds with fresh stats, deciding first.
	Actionable []ThresholdStatus `json:"actionable"`
	// NodeConditions reported (with the transition period), sorted.
	NodeConditions []v1.NodeConditionType `json:"nodeConditions"`
	// Deciding threshold (nil when no threshold drives eviction now).
	Deciding *ThresholdStatus `json:"deciding,omitempty"`
	// Signal and Resource to reclaim ("" when none).
	Signal   Signal          `json:"signal,omitempty"`
	Resource v1.ResourceName `json:"resource,omitempty"`
	// Reclaim lists the node-level reclaim functions to run, in the kubelet's
	// order ("containerGC", "imageGC"). When non-empty and ReclaimPending, the
	// caller runs them and calls Engine.Reclaimed with fresh stats.
	Reclaim        []string `json:"reclaim"`
	ReclaimPending bool     `json:"reclaimPending,omitempty"`
	// ReclaimSufficient: after reclaim no threshold (with min-reclaim) is met,
	// so no pod is evicted.
	ReclaimSufficient bool `json:"reclaimSufficient,omitempty"`
	// AfterReclaim are the observations of the second look.
	AfterReclaim []Observation `json:"afterReclaim,omitempty"`
	// MemoryReclaim is set with Profile.ReclaimFirst when Reclaim holds
	// ReclaimMemory: what to ask the kernel to reclaim before evicting.
	MemoryReclaim *MemoryReclaim `json:"memoryReclaim,omitempty"`
	// NodeMemory shows the node memory figures side by side (nil when the
	// Summary has no node memory).
	NodeMemory *NodeMemory `json:"nodeMemory,omitempty"`
	// Loops are the loop breaker's eviction loops after this synchronize.
	Loops []Loop `json:"loops,omitempty"`
	// Candidates ranked for Signal.
	Candidates []Candidate `json:"candidates"`
	// Evictions: the pod(s) killed this cycle (several only for limit evictions).
	Evictions []Eviction `json:"evictions"`
	// SkippedCritical: pods the kubelet tried but refused as critical.
	SkippedCritical []PodRef `json:"skippedCritical,omitempty"`
	// Events the kubelet records (node and pod events).
	Events []Event `json:"events"`
	// Notes explains early returns in words (for explain).
	Notes []string `json:"notes,omitempty"`
}

// AdmitResult is the admission decision under node pressure.
type AdmitResult struct {
	Admit   bool   `json:"admit"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}
