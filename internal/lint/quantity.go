package lint

import (
	"fmt"
	"strings"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/policy"
)

// minSaneByteThreshold is the smallest byte threshold lint takes as meant:
// 1 MiB. The kubelet's smallest default is 100Mi, and a node with less than
// 1 MiB of memory or disk left is failing already; below it a threshold is
// almost always a missing unit ("100" for 100Mi) or the wrong one
// ("100Ki").
var minSaneByteThreshold = resource.MustParse("1Mi")

// unitOf is what a signal's quantity counts.
func unitOf(sig policy.Signal) string {
	switch sig {
	case policy.SignalNodeFsInodesFree, policy.SignalImageFsInodesFree, policy.SignalContainerFsInodesFree:
		return "inodes"
	case policy.SignalPIDAvailable:
		return "processes"
	}
	return "bytes"
}

// quantityEntries calls fn for every threshold and minimum reclaim written
// as a quantity (not a percentage) that parses, with its field.
func quantityEntries(in *Input, fn func(field, key, value string, q resource.Quantity, reclaim bool)) {
	for _, m := range []struct {
		field, flag string
		entries     map[string]string
		reclaim     bool
	}{
		{"evictionHard", flagHard, in.Config.EvictionHard, false},
		{"evictionSoft", flagSoft, in.Config.EvictionSoft, false},
		{"evictionMinimumReclaim", flagReclaim, in.Config.EvictionMinimumReclaim, true},
	} {
		for _, k := range sortedKeys(m.entries) {
			v := strings.TrimSpace(m.entries[k])
			if strings.HasSuffix(v, "%") || !policy.ValidSignal(policy.Signal(k)) {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() <= 0 {
				continue // the kubelet's own errors say why
			}
			fn(in.field(m.field, m.flag, k), k, v, q, m.reclaim)
		}
	}
}

// ruleSubUnit flags a quantity that is not a whole number of its unit:
// "500m" is half a byte (m is milli), "1.5" one and a half.
func ruleSubUnit(in *Input) []Finding {
	var out []Finding
	quantityEntries(in, func(field, key, v string, q resource.Quantity, reclaim bool) {
		d := q.AsDec()
		if new(inf.Dec).Round(d, 0, inf.RoundDown).Cmp(d) == 0 {
			return
		}
		unit := unitOf(policy.Signal(key))
		f := Finding{Severity: SeverityWarning, Field: field, Value: v,
			Message: fmt.Sprintf("%s is %s %s: not a whole number of %s", v, decimal(d), unit, unit)}
		if strings.HasSuffix(v, "m") {
			f.Message = fmt.Sprintf("%s is %s %s: the suffix m is milli (thousandths), not mega", v, decimal(d), unit)
			f.Fix = fmt.Sprintf("write %sMi (mebibytes) or %sM (megabytes)", strings.TrimSuffix(v, "m"), strings.TrimSuffix(v, "m"))
		} else {
			f.Fix = "write a whole quantity with its unit, e.g. 500Mi, or a percentage such as 10%"
		}
		f.Why = "the kubelet compares a whole number of " + unit + " with it: a threshold below one more unit is met only when nothing at all is left, as good as no threshold"
		if reclaim {
			f.Why = "a minimum reclaim of less than one more " + strings.TrimSuffix(unit, "s") + " reclaims nothing beyond the threshold"
		}
		out = append(out, f)
	})
	return out
}

// ruleSuspiciouslySmall flags a byte threshold below minSaneByteThreshold.
func ruleSuspiciouslySmall(in *Input) []Finding {
	var out []Finding
	quantityEntries(in, func(field, key, v string, q resource.Quantity, reclaim bool) {
		if reclaim || unitOf(policy.Signal(key)) != "bytes" || q.Cmp(minSaneByteThreshold) >= 0 || q.Cmp(resource.MustParse("1")) < 0 {
			return // sub-byte values are ruleSubUnit's
		}
		digits := strings.TrimRight(v, "KMGTPEikmgtpe")
		out = append(out, Finding{Severity: SeverityWarning, Field: field, Value: v,
			Message: fmt.Sprintf("%s is %s bytes: a threshold met only when %s is practically exhausted", v, decimal(q.AsDec()), strings.TrimSuffix(key, ".available")),
			Why:     "a quantity without a suffix is bytes (Ki is 1024 bytes): no node works with less than 1 MiB free, so a threshold this small is as good as none — usually a missing or wrong unit",
			Fix:     fmt.Sprintf("did you mean %sMi or %sGi? Byte thresholds are usually 100Mi or more, or a percentage such as 10%%", digits, digits)})
	})
	return out
}

// decimal is d without trailing zeros after the point: 0.5, not 0.500.
func decimal(d *inf.Dec) string {
	s := d.String()
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
