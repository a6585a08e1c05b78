package policy

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// rank orders pods for signal s as evict does: the kubelet's rank function,
// with the profile's options (swap as usage, loops last).
func (e *Engine) rank(pods []*v1.Pod, facts []*podFacts, stats map[string]*statsv1alpha1.PodStats, s Signal, buf *ranked) ranked {
	opt := rankOptions{swap: e.cfg.Profile.SwapAware}
	if e.cfg.Profile.LoopBreaker && len(e.loops) > 0 {
		opt.demoted = func(i int) bool {
			c := metav1.GetControllerOfNoCopy(pods[i])
			return c != nil && e.loops.looping(string(c.UID))
		}
	}
	return rankPodsWith(buf, pods, facts, stats, s, e.fs, opt)
}

// candidatesOf describes a ranking with the keys that made it.
func candidatesOf(ranked ranked, facts []*podFacts, s Signal, fs Filesystems) []Candidate {
	kind, _, _ := rankFor(s, fs)
	// one backing array for the candidates' quantities instead of 3 allocations each
	qs := make([]resource.Quantity, 3*ranked.len())
	out := make([]Candidate, 0, ranked.len())
	for r := 0; r < ranked.len(); r++ {
		k := ranked.at(r)
		c := Candidate{Rank: r + 1, Pod: refOf(k.pod), HasStats: k.found, Priority: k.priority, Critical: facts[ranked.order[r]].critical, Looping: k.demoted}
		if k.swap >= 0 {
			c.Swap = resource.NewQuantity(k.swap, resource.BinarySI)
		}
		switch kind {
		case rankPID:
			c.ProcessCount = k.procs
			c.Usage = resource.NewQuantity(int64(k.procs), resource.DecimalSI)
		default:
			c.ExceedsRequest = k.exceeds
			qs[3*r] = k.request
			c.Request = &qs[3*r]
			if k.found {
				qs[3*r+1], qs[3*r+2] = k.usage, k.delta
				c.Usage, c.UsageMinusRequest = &qs[3*r+1], &qs[3*r+2]
			}
		}
		out = append(out, c)
	}
	return out
}

// Rank returns the pods of in ranked for eviction on signal s, first to go
// first, as the next synchronize would rank them if a threshold on s were
// acted on — for asking "whom would it evict" before any threshold is met
// (explain --cluster). It changes no state; call it between synchronizes,
// not between a Step that asked for reclaim and its Reclaimed.
func (e *Engine) Rank(s Signal, in Input) []Candidate {
	if in.Summary == nil || !ValidSignal(s) {
		return nil
	}
	stats := podStatsIndex(in.Summary)
	facts := make([]*podFacts, len(in.Pods))
	for i, p := range in.Pods {
		facts[i] = newPodFacts(p, e.cfg.Features)
	}
	return candidatesOf(e.rank(in.Pods, facts, stats, s, nil), facts, s, e.fs)
}
