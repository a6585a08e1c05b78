package lint

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/policy"
)

// Upper bounds on what any Linux node can have, per signal. A threshold at
// or above one is met on every node from the first synchronize: the kubelet
// accepts it and evicts every pod it can, one per synchronize.
var (
	// 4 PiB: the physical address space of x86-64 with 5-level paging (52
	// bits), the most memory a Linux node can address.
	maxNodeMemory = resource.MustParse("4Pi")
	// 8 EiB: byte counts are signed 64-bit numbers in statfs and in the
	// kubelet's stats; XFS, the largest common filesystem, stops there.
	maxFilesystemBytes = resource.MustParse("8Ei")
	// 2^64 inodes: the widest inode counter of any Linux filesystem.
	maxInodes = resource.MustParse("18446744073709551616")
	// 4194304: PID_MAX_LIMIT on 64-bit kernels, the highest kernel.pid_max.
	maxPIDs = resource.MustParse("4194304")
)

// capacityBound returns the bound for a signal and what it is.
func capacityBound(sig policy.Signal) (resource.Quantity, string, bool) {
	switch sig {
	case policy.SignalMemoryAvailable, policy.SignalAllocatableMemoryAvailable:
		return maxNodeMemory, "4Pi, the most memory Linux can address", true
	case policy.SignalNodeFsAvailable, policy.SignalImageFsAvailable, policy.SignalContainerFsAvailable:
		return maxFilesystemBytes, "8Ei, the largest filesystem a node can report", true
	case policy.SignalNodeFsInodesFree, policy.SignalImageFsInodesFree, policy.SignalContainerFsInodesFree:
		return maxInodes, "2^64, the most inodes any filesystem counts", true
	case policy.SignalPIDAvailable:
		return maxPIDs, "4194304, the highest kernel.pid_max", true
	}
	return resource.Quantity{}, "", false
}

// ruleAboveAnyCapacity flags a threshold quantity no node can stay above.
func ruleAboveAnyCapacity(in *Input) []Finding {
	var out []Finding
	check := func(mapField, flag string, m map[string]string) {
		for _, k := range sortedKeys(m) {
			v := m[k]
			if strings.HasSuffix(v, "%") {
				continue
			}
			bound, what, ok := capacityBound(policy.Signal(k))
			if !ok {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Cmp(bound) < 0 {
				continue
			}
			out = append(out, Finding{Severity: SeverityWarning, Field: in.field(mapField, flag, k), Value: v,
				Message: fmt.Sprintf("the threshold is above what any node has (%s)", what),
				Why:     "available can never be above it, so the threshold is met on every node from the first synchronize and the kubelet evicts every pod it can, one per synchronize",
				Fix:     fmt.Sprintf("use a quantity below the node's capacity (e.g. %s<500Mi) or a percentage (%s<10%%)", k, k)})
		}
	}
	check("evictionHard", flagHard, in.effectiveHard())
	check("evictionSoft", flagSoft, in.Config.EvictionSoft)
	return out
}
