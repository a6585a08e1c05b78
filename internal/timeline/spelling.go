package timeline

import (
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

// Spelling says how a configuration writes a threshold: its value ("1000",
// "0.0%") and, for a soft one, its grace period ("90s"). ok is false for a
// threshold the configuration does not write (a kubelet default); Label's
// canonical form names it then.
type Spelling func(t policy.Threshold) (value, grace string, ok bool)

// derivedFrom lists the signals whose configured value a derived threshold
// copies: the kubelet adds allocatableMemory.available from each hard
// memory.available threshold (enforceNodeAllocatable: pods), and the
// containerfs thresholds from nodefs or imagefs for the filesystem layout.
var derivedFrom = map[policy.Signal][]policy.Signal{
	policy.SignalAllocatableMemoryAvailable: {policy.SignalMemoryAvailable},
	policy.SignalContainerFsAvailable:       {policy.SignalNodeFsAvailable, policy.SignalImageFsAvailable},
	policy.SignalContainerFsInodesFree:      {policy.SignalNodeFsInodesFree, policy.SignalImageFsInodesFree},
}

// ConfigSpelling spells thresholds as kc writes them, so that a chart's
// legend says pid.available<1000 where the config says '1000' (the
// quantity's canonical form is "1k"). A threshold takes the text of the
// config entry for its signal — or for the signal it is derived from — only
// when that text parses to the same value, so a legend never shows a
// number the threshold does not have.
func ConfigSpelling(kc *kubeletconfigv1beta1.KubeletConfiguration) Spelling {
	if kc == nil {
		return nil
	}
	return func(t policy.Threshold) (string, string, bool) {
		maps := []map[string]string{kc.EvictionHard, kc.EvictionSoft}
		if !t.Hard() {
			maps[0], maps[1] = maps[1], maps[0]
		}
		signals := append([]policy.Signal{t.Signal}, derivedFrom[t.Signal]...)
		for mi, m := range maps {
			for _, sig := range signals {
				raw, ok := m[string(sig)]
				if !ok || !sameValue(sig, raw, t.Value) {
					continue
				}
				grace := ""
				if !t.Hard() {
					// A soft threshold's soft map is maps[0].
					grace = FormatDuration(t.GracePeriod)
					if g, ok := kc.EvictionSoftGracePeriod[string(sig)]; ok && mi == 0 {
						if d, err := time.ParseDuration(g); err == nil && d == t.GracePeriod {
							grace = g
						}
					}
				}
				return raw, grace, true
			}
		}
		return "", "", false
	}
}

// sameValue reports whether raw, written for signal sig, parses to v.
func sameValue(sig policy.Signal, raw string, v policy.ThresholdValue) bool {
	ts, err := policy.ParseThresholdConfig(nil, map[string]string{string(sig): raw}, nil, nil, nil)
	return err == nil && len(ts) == 1 && ts[0].Value.String() == v.String()
}

// LabelAs names a threshold as spell writes it, falling back to Label.
func LabelAs(t policy.Threshold, spell Spelling) string {
	if spell == nil {
		return Label(t)
	}
	value, grace, ok := spell(t)
	if !ok {
		return Label(t)
	}
	l := string(t.Signal) + "<" + value
	if !t.Hard() {
		l += " (soft, " + grace + ")"
	}
	return l
}
