package lint

import (
	"fmt"
	"strings"

	"github.com/evictd/evictd/internal/policy"
)

// RuleCoexistence names the findings of Coexistence.
const RuleCoexistence = "coexistence-kubelet-first"

// Coexistence checks evictd beside the kubelet on a Kubernetes node: for
// every threshold of the kubelet (hard and soft, allocatableMemory copies
// included), evictd must have one on the same signal that is met no later,
// or the kubelet evicts first, at its 10 s poll, while evictd still waits.
//
// An evictd threshold e is met no later than the kubelet's k when its value
// is at least k's (same unit: both quantities or both percentages) and it
// acts no later: e is hard, or both are soft and e's grace period is not
// longer. A quantity cannot be compared with a percentage without the node's
// capacity: that is an info. evictd's thresholds come first in the
// arguments; kubeletField names where the kubelet's come from.
func Coexistence(evictd, kubelet []policy.Threshold, kubeletField string) []Finding {
	var out []Finding
	for _, k := range kubelet {
		if k.Operator == "" {
			continue
		}
		ok, unsure := false, []string{}
		var same []string
		for _, e := range evictd {
			if e.Signal != k.Signal || e.Operator == "" {
				continue
			}
			same = append(same, e.String())
			ge, comparable := valueAtLeast(e.Value, k.Value)
			if !comparable {
				unsure = append(unsure, e.String())
				continue
			}
			if ge && (e.Hard() || (!k.Hard() && e.GracePeriod <= k.GracePeriod)) {
				ok = true
				break
			}
		}
		switch {
		case ok:
		case len(unsure) > 0:
			out = append(out, Finding{Severity: SeverityInfo, Rule: RuleCoexistence, Field: kubeletField, Value: k.String(),
				Message: fmt.Sprintf("the kubelet's %s cannot be compared with evictd's %s without the node's capacity", k.String(), strings.Join(unsure, ", ")),
				Why:     "one is a quantity and the other a percentage; which is met first depends on the node",
				Fix:     "write both in the same unit, so that evictd's is met first on every node"})
		default:
			have := "none on this signal"
			if len(same) > 0 {
				have = strings.Join(same, ", ")
			}
			when := "a hard threshold"
			if !k.Hard() {
				when = fmt.Sprintf("a hard threshold, or a soft one with a grace period of at most %s,", k.GracePeriod)
			}
			out = append(out, Finding{Severity: SeverityWarning, Rule: RuleCoexistence, Field: kubeletField, Value: k.String(),
				Message: fmt.Sprintf("the kubelet's %s is met before any of evictd's thresholds (evictd: %s)", k.String(), have),
				Why:     "the kubelet then evicts first, at its next 10 s poll, without evictd's kernel wake-ups; the kernel OOM killer may strike before either acts",
				Fix:     fmt.Sprintf("give evictd %s %s<%s or higher", when, k.Signal, k.Value.String())})
		}
	}
	return out
}

// valueAtLeast reports whether a ≥ b, and whether the two can be compared.
func valueAtLeast(a, b policy.ThresholdValue) (ge, comparable bool) {
	switch {
	case a.Quantity != nil && b.Quantity != nil:
		return a.Quantity.Cmp(*b.Quantity) >= 0, true
	case a.Quantity == nil && b.Quantity == nil:
		return a.Percentage >= b.Percentage, true
	}
	return false, false
}
