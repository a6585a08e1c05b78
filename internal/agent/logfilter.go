package agent

import (
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/policy"
)

// DecisionLogHeartbeat is how often the decision log gets a record while
// the node stays under pressure with nothing changing but the numbers:
// enough points for `evictd-tools report`'s chart (its default --gap is a
// minute), without a record per synchronize and per wake-up (13 KB each
// with 53 workloads, 205 MB a day on a 110-pod node before).
const DecisionLogHeartbeat = 30 * time.Second

// logFilter decides which synchronizes go to the decision log, and in what
// size. A record is written when something happened (an action, an
// eviction), when the decision's state changed (thresholds met, in their
// grace period or acted on; node conditions; the deciding threshold; an
// error; critical pods skipped), and as a heartbeat while the node stays
// under pressure; not when only the observed amounts moved. The ranking
// (candidates, most of a record) is kept only in records that evict: that
// is where it explains a decision. OnRecord still sees every record whole.
type logFilter struct {
	last    string    // key of the last record written
	lastAt  time.Time // when it was written
	written bool
	omitted int // synchronizes left out since
}

// pass returns the record to write, or ok=false to leave this one out.
func (f *logFilter) pass(r Record) (out Record, ok bool) {
	key := decisionKey(r.Decision)
	changed := !f.written || key != f.last
	switch {
	case len(r.Actions) > 0 || len(r.Decision.Evictions) > 0 || r.EarlyStopUndone != nil || r.EarlyStopMoved != nil:
	case changed:
		// Pressure that ends is a change too: the record saying so is
		// written even though it has nothing met.
	case interesting(r) && r.Time.Sub(f.lastAt) >= DecisionLogHeartbeat:
	default:
		if f.written {
			f.omitted++
		}
		return Record{}, false
	}
	if !f.written && !interesting(r) {
		return Record{}, false // an idle node's first synchronize says nothing
	}
	out = r
	out.Omitted = f.omitted
	if len(r.Decision.Evictions) == 0 {
		out.Decision.Candidates = nil
	}
	f.last, f.lastAt, f.written, f.omitted = key, r.Time, true, 0
	return out, true
}

// interesting reports a synchronize that has anything to say.
func interesting(r Record) bool {
	d := r.Decision
	return len(d.Met) > 0 || len(d.Evictions) > 0 || d.Error != "" || len(r.Actions) > 0 || r.EarlyStopUndone != nil || r.EarlyStopMoved != nil || len(d.NodeConditions) > 0 || len(d.SkippedCritical) > 0
}

// decisionKey is what of a decision counts as a change: which thresholds
// are met, in grace, stale or actionable, the conditions, the deciding
// threshold, the error and the critical pods skipped — not the amounts.
func decisionKey(d policy.Decision) string {
	var b strings.Builder
	list := func(name string, ts []policy.ThresholdStatus) {
		b.WriteString(name)
		for _, t := range ts {
			b.WriteString(t.Threshold.String())
			if t.MinReclaimActive {
				b.WriteString("+minreclaim")
			}
			b.WriteByte(',')
		}
		b.WriteByte(';')
	}
	list("met:", d.Met)
	list("grace:", d.InGrace)
	list("stale:", d.Stale)
	list("actionable:", d.Actionable)
	b.WriteString("conditions:")
	for _, c := range d.NodeConditions {
		b.WriteString(string(c))
		b.WriteByte(',')
	}
	if d.Deciding != nil {
		b.WriteString(";deciding:" + d.Deciding.Threshold.String())
	}
	b.WriteString(";error:" + d.Error + ";skipped:" + strconv.Itoa(len(d.SkippedCritical)))
	for _, p := range d.SkippedCritical {
		b.WriteString(p.Namespace + "/" + p.Name + ",")
	}
	return b.String()
}
