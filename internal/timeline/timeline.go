// Package timeline turns a sequence of eviction decisions — a scenario's
// steps or a decision log's records — into what a chart of them shows: per
// signal that has a threshold, the available amount against each threshold's
// quantity and the soft thresholds' grace periods; the node conditions as
// intervals; and every eviction as a point in time.
//
// A Builder takes the decisions one at a time and keeps bounded memory
// whatever their number: the series go into at most MaxBuckets time buckets
// that keep each bucket's minimum and maximum (so a spike survives the
// downsampling), doubling the bucket width when the time range outgrows
// them; intervals and markers have caps too. A scenario's few steps fit
// without merging, so its chart shows every step exactly.
package timeline

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/policy"
)

// Unit is what a panel's values are measured in.
type Unit int

// Panel units. Bytes and Count follow the kubelet's quantities (memory and
// filesystem bytes; inodes and PIDs); Percent is used when every threshold
// of the signal is a percentage of capacity, as the config writes it.
const (
	Bytes Unit = iota
	Count
	Percent
)

// Point is a value at X seconds after the Timeline's Origin.
type Point struct{ X, Y float64 }

// Interval is [From, To] in seconds after the Origin.
type Interval struct{ From, To float64 }

// Threshold is one threshold's line in a panel.
type Threshold struct {
	// Label names the threshold as the kubelet config does:
	// "memory.available<100Mi", "nodefs.available<10% (soft, 1m30s)" — in
	// the config's own spelling when the Builder has one (Builder.Spell).
	Label string
	Soft  bool
	// Quantity is the threshold's value in the panel's unit, in segments
	// that break where the data does.
	Quantity [][]Point
	// Grace are the soft threshold's grace periods: from when it was first
	// seen met to when the grace period ran out, cut short where it stopped
	// being met.
	Grace []Interval
}

// Panel is one signal's chart.
type Panel struct {
	Signal policy.Signal
	Unit   Unit
	// Available is the observed value in the panel's unit, in segments that
	// break at gaps longer than the Builder's MaxGap. Downsampled buckets
	// contribute their minimum and maximum in the order they occurred.
	Available  [][]Point
	Thresholds []Threshold
}

// Band is a node condition and when it was reported.
type Band struct {
	Condition string
	On        []Interval
}

// Marker is one eviction.
type Marker struct {
	X      float64
	Pod    string // namespace/name
	Reason string // the signal evicted for, or a local-storage limit (e.g. ephemeralpodfs.limit)
	// Panel is the index in Timeline.Panels of the reason's signal, or -1
	// (local-storage limits, or a signal without a threshold panel).
	Panel int
	Y     float64 // the available value in that panel's unit when Panel >= 0
}

// Timeline is what a chart shows.
type Timeline struct {
	Origin time.Time
	// End is the last sample's X (seconds after Origin).
	End        float64
	Panels     []Panel
	Conditions []Band
	Evictions  []Marker
	// EvictionsDropped counts evictions past MaxMarkers (not in Evictions).
	EvictionsDropped int
	// Unobserved lists signals with a threshold that no sample observed
	// (no panel is drawn for them).
	Unobserved []policy.Signal
	// Samples is the number of decisions added; BucketWidth the time one
	// bucket of the series spans (0 when no two samples were merged).
	Samples     int
	BucketWidth time.Duration
	// IntervalsMerged: there were more condition or grace intervals than
	// MaxIntervals, so close ones were joined.
	IntervalsMerged bool
}

// Observation is one signal's observed value in a sample.
type Observation struct {
	Signal    policy.Signal
	Available int64
	Capacity  int64
}

// Met is a threshold met in a sample, and since when.
type Met struct {
	Threshold     policy.Threshold
	FirstObserved time.Time
}

// Eviction is one pod evicted in a sample.
type Eviction struct {
	Pod    string // namespace/name
	Reason string // policy.Eviction.Signal
}

// Sample is what the chart takes from one decision.
type Sample struct {
	Time         time.Time
	Observations []Observation
	Met          []Met
	Conditions   []string
	Evictions    []Eviction
}

// SampleOf extracts a Sample from an engine decision made at t.
func SampleOf(t time.Time, d *policy.Decision) Sample {
	s := Sample{Time: t}
	for _, o := range d.Observations {
		s.Observations = append(s.Observations, Observation{Signal: o.Signal, Available: o.Available.Value(), Capacity: o.Capacity.Value()})
	}
	for _, m := range d.Met {
		s.Met = append(s.Met, Met{Threshold: m.Threshold, FirstObserved: m.FirstObserved})
	}
	for _, c := range d.NodeConditions {
		s.Conditions = append(s.Conditions, string(c))
	}
	for _, e := range d.Evictions {
		s.Evictions = append(s.Evictions, Eviction{Pod: e.Pod.Namespace + "/" + e.Pod.Name, Reason: e.Signal})
	}
	return s
}

// Bounds of a Builder's memory; the zero Builder fields take these.
const (
	// DefaultMaxBuckets keeps a chart about as detailed as it is wide in
	// pixels: two points (min and max) per bucket.
	DefaultMaxBuckets = 1024
	// DefaultMaxIntervals bounds condition bands and grace windows per
	// condition or threshold; past it, neighbours are joined.
	DefaultMaxIntervals = 2048
	// DefaultMaxMarkers bounds the eviction markers kept; more are counted.
	DefaultMaxMarkers = 5000
)

// Conditions in the order bands are drawn (the kubelet's three pressure
// conditions).
var Conditions = []string{"MemoryPressure", "DiskPressure", "PIDPressure"}

// Builder accumulates samples. Set the options before the first Add.
type Builder struct {
	// MaxGap breaks lines and intervals where two samples are further apart
	// (0: never; a scenario's steps hold their state until the next step).
	MaxGap       time.Duration
	MaxBuckets   int
	MaxIntervals int
	MaxMarkers   int
	// Spell names thresholds as the configuration writes them (nil: the
	// canonical Label).
	Spell Spelling

	started   bool
	origin    time.Time
	last      time.Time
	samples   int
	width     float64 // bucket width in seconds; 0 until set by the first spread
	buckets   []bucket
	merged    bool
	order     []string // threshold labels in the order first seen
	known     map[string]*thresholdState
	conds     map[string]*intervals
	markers   []marker
	dropped   int
	backwards int
}

type thresholdState struct {
	t     policy.Threshold
	grace intervals
	open  bool // a grace window is open (its threshold was met in the last sample)
	first time.Time
}

type marker struct {
	x           float64
	pod, reason string
	avail, cap  float64
	observed    bool
}

// bucket aggregates the samples in one time slot.
type bucket struct {
	n            int
	first, last  float64 // X of the first and last sample
	sig          [signalCount]agg
	hasSigSample bool
}

type agg struct {
	set              bool
	minV, maxV       float64
	minX, maxX       float64
	minCap, maxCap   float64
	capAtMin, capMax float64
}

const signalCount = 9

func signalIndex(s policy.Signal) int {
	for i, x := range policy.Signals {
		if x == s {
			return i
		}
	}
	return -1
}

// Known declares thresholds (from the configuration), so that their panels
// exist and keep the configuration's order even when they are never met.
func (b *Builder) Known(ts []policy.Threshold) {
	for _, t := range ts {
		b.threshold(t)
	}
}

func (b *Builder) threshold(t policy.Threshold) *thresholdState {
	if b.known == nil {
		b.known = map[string]*thresholdState{}
	}
	l := Label(t)
	if s, ok := b.known[l]; ok {
		return s
	}
	s := &thresholdState{t: t}
	b.known[l] = s
	b.order = append(b.order, l)
	return s
}

// Label names a threshold as the kubelet configuration writes it:
// "memory.available<100Mi", "nodefs.available<10% (soft, 1m30s)".
func Label(t policy.Threshold) string {
	l := string(t.Signal) + "<" + t.Value.String()
	if !t.Hard() {
		l += " (soft, " + FormatDuration(t.GracePeriod) + ")"
	}
	return l
}

// FormatDuration writes d as a config would: "2m", "1m30s", "1h" rather
// than Go's "2m0s", "1h0m0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (b *Builder) x(t time.Time) float64 { return t.Sub(b.origin).Seconds() }

// Add takes the next sample. Samples are expected in time order; one that
// goes back in time is drawn at the previous sample's time (counted in
// Backwards).
func (b *Builder) Add(s Sample) {
	if b.MaxBuckets <= 0 {
		b.MaxBuckets = DefaultMaxBuckets
	}
	if b.MaxIntervals <= 0 {
		b.MaxIntervals = DefaultMaxIntervals
	}
	if b.MaxMarkers <= 0 {
		b.MaxMarkers = DefaultMaxMarkers
	}
	if b.conds == nil {
		b.conds = map[string]*intervals{}
	}
	t := s.Time
	if !b.started {
		b.started, b.origin, b.last = true, t, t
	}
	if t.Before(b.last) {
		b.backwards++
		t = b.last
	}
	gap := b.MaxGap > 0 && t.Sub(b.last) > b.MaxGap
	prevX := b.x(b.last)
	b.last = t
	b.samples++
	x := b.x(t)

	bk := b.bucketFor(x)
	if bk.n == 0 {
		bk.first = x
	}
	bk.n++
	bk.last = x
	var avail [signalCount]*Observation
	for i := range s.Observations {
		o := &s.Observations[i]
		si := signalIndex(o.Signal)
		if si < 0 {
			continue // a signal this version does not know: nothing to draw it against
		}
		avail[si] = o
		a := &bk.sig[si]
		v, c := float64(o.Available), float64(o.Capacity)
		if !a.set {
			*a = agg{set: true, minV: v, maxV: v, minX: x, maxX: x, capAtMin: c, capMax: c}
		} else {
			if v < a.minV {
				a.minV, a.minX, a.capAtMin = v, x, c
			}
			if v > a.maxV {
				a.maxV, a.maxX, a.capMax = v, x, c
			}
		}
	}

	// Conditions: an interval runs from the sample that reports it to the
	// first sample that does not (the state holds between samples), and
	// ends at the last sample before a gap.
	on := map[string]bool{}
	for _, c := range s.Conditions {
		on[c] = true
		iv := b.conds[c]
		if iv == nil {
			iv = &intervals{max: b.MaxIntervals}
			b.conds[c] = iv
		}
		iv.extend(x, prevX, gap)
	}
	for c, iv := range b.conds {
		if !on[c] {
			iv.close(x, prevX, gap)
		}
	}

	// Grace windows of soft thresholds.
	met := map[string]bool{}
	for _, m := range s.Met {
		if m.Threshold.Operator == "" {
			continue
		}
		ts := b.threshold(m.Threshold)
		l := Label(m.Threshold)
		met[l] = true
		if m.Threshold.Hard() {
			continue
		}
		if !ts.open || !ts.first.Equal(m.FirstObserved) {
			from := b.x(m.FirstObserved)
			if m.FirstObserved.IsZero() {
				from = x
			}
			ts.grace.max = b.MaxIntervals
			ts.grace.add(Interval{From: from, To: from + m.Threshold.GracePeriod.Seconds()})
			ts.open, ts.first = true, m.FirstObserved
		}
	}
	for l, ts := range b.known {
		if ts.open && !met[l] {
			ts.open = false
			ts.grace.clipLast(x)
		}
	}

	for _, e := range s.Evictions {
		if len(b.markers) >= b.MaxMarkers {
			b.dropped++
			continue
		}
		m := marker{x: x, pod: e.Pod, reason: e.Reason}
		if si := signalIndex(policy.Signal(e.Reason)); si >= 0 && avail[si] != nil {
			m.avail, m.cap, m.observed = float64(avail[si].Available), float64(avail[si].Capacity), true
		}
		b.markers = append(b.markers, m)
	}
	b.merged = b.merged || b.condsMerged()
}

// Backwards is the number of samples that went back in time.
func (b *Builder) Backwards() int { return b.backwards }

func (b *Builder) condsMerged() bool {
	for _, iv := range b.conds {
		if iv.merged {
			return true
		}
	}
	return false
}

// bucketFor returns the bucket of x, widening the buckets (pairs merged)
// while x lies past the last one.
func (b *Builder) bucketFor(x float64) *bucket {
	if b.buckets == nil {
		b.buckets = make([]bucket, 0, b.MaxBuckets)
	}
	// Until the buckets are full, each sample gets its own bucket: a short
	// series is kept exactly.
	if b.width == 0 {
		if len(b.buckets) > 0 && b.buckets[len(b.buckets)-1].last == x {
			return &b.buckets[len(b.buckets)-1]
		}
		if len(b.buckets) < b.MaxBuckets {
			b.buckets = append(b.buckets, bucket{})
			return &b.buckets[len(b.buckets)-1]
		}
		// Full: switch to fixed-width buckets spanning what is there.
		old := b.buckets
		b.width = spanWidth(x, b.MaxBuckets)
		b.buckets = make([]bucket, b.MaxBuckets)
		for i := range old {
			mergeInto(&b.buckets[b.index(old[i].first)], &old[i])
		}
	}
	for b.index(x) >= b.MaxBuckets {
		b.widen()
	}
	return &b.buckets[b.index(x)]
}

// spanWidth is a bucket width (seconds, a power of two) such that x fits in
// n buckets with room to grow.
func spanWidth(x float64, n int) float64 {
	w := math.Pow(2, math.Ceil(math.Log2(math.Max(x, 1e-3)/float64(n)*2)))
	return w
}

func (b *Builder) index(x float64) int {
	i := int(x / b.width)
	if i < 0 {
		return 0
	}
	return i
}

func (b *Builder) widen() {
	n := len(b.buckets)
	for i := 0; i < n/2; i++ {
		nb := b.buckets[2*i]
		mergeInto(&nb, &b.buckets[2*i+1])
		b.buckets[i] = nb
	}
	for i := n / 2; i < n; i++ {
		b.buckets[i] = bucket{}
	}
	b.width *= 2
}

func mergeInto(dst, src *bucket) {
	if src.n == 0 {
		return
	}
	if dst.n == 0 {
		*dst = *src
		return
	}
	dst.n += src.n
	dst.first = math.Min(dst.first, src.first)
	dst.last = math.Max(dst.last, src.last)
	for i := range dst.sig {
		d, s := &dst.sig[i], &src.sig[i]
		switch {
		case !s.set:
		case !d.set:
			*d = *s
		default:
			if s.minV < d.minV {
				d.minV, d.minX, d.capAtMin = s.minV, s.minX, s.capAtMin
			}
			if s.maxV > d.maxV {
				d.maxV, d.maxX, d.capMax = s.maxV, s.maxX, s.capMax
			}
		}
	}
}

// Build returns the timeline of the samples added so far.
func (b *Builder) Build() *Timeline {
	tl := &Timeline{Origin: b.origin, End: b.x(b.last), Samples: b.samples, Evictions: []Marker{}, EvictionsDropped: b.dropped}
	if b.width > 0 {
		tl.BucketWidth = time.Duration(b.width * float64(time.Second))
	}
	// Thresholds per signal, in signal order, then the order first seen.
	bySignal := map[policy.Signal][]*thresholdState{}
	for _, l := range b.order {
		ts := b.known[l]
		bySignal[ts.t.Signal] = append(bySignal[ts.t.Signal], ts)
	}
	panelOf := map[policy.Signal]int{}
	for si, sig := range policy.Signals {
		ths := bySignal[sig]
		if len(ths) == 0 {
			continue
		}
		pts := b.points(si)
		if len(pts) == 0 {
			tl.Unobserved = append(tl.Unobserved, sig)
			continue
		}
		p := Panel{Signal: sig, Unit: unitOf(sig, ths)}
		p.Available = b.segments(pts, func(q rawPoint) float64 { return scale(p.Unit, q.v, q.cap) })
		for _, ts := range ths {
			th := Threshold{Label: LabelAs(ts.t, b.Spell), Soft: !ts.t.Hard(), Grace: ts.grace.list}
			th.Quantity = b.segments(pts, func(q rawPoint) float64 { return thresholdValue(p.Unit, ts.t, q.cap) })
			if ts.grace.merged {
				tl.IntervalsMerged = true
			}
			p.Thresholds = append(p.Thresholds, th)
		}
		panelOf[sig] = len(tl.Panels)
		tl.Panels = append(tl.Panels, p)
	}
	for _, c := range Conditions {
		band := Band{Condition: c}
		if iv := b.conds[c]; iv != nil {
			band.On = iv.list
		}
		tl.Conditions = append(tl.Conditions, band)
	}
	for c, iv := range b.conds {
		if !knownCondition(c) {
			tl.Conditions = append(tl.Conditions, Band{Condition: c, On: iv.list})
		}
	}
	sort.SliceStable(tl.Conditions[len(Conditions):], func(i, j int) bool {
		return tl.Conditions[len(Conditions)+i].Condition < tl.Conditions[len(Conditions)+j].Condition
	})
	tl.IntervalsMerged = tl.IntervalsMerged || b.merged
	for _, m := range b.markers {
		mk := Marker{X: m.x, Pod: m.pod, Reason: m.reason, Panel: -1}
		if i, ok := panelOf[policy.Signal(m.reason)]; ok && m.observed {
			mk.Panel = i
			mk.Y = scale(tl.Panels[i].Unit, m.avail, m.cap)
		}
		tl.Evictions = append(tl.Evictions, mk)
	}
	return tl
}

func knownCondition(c string) bool {
	for _, k := range Conditions {
		if k == c {
			return true
		}
	}
	return false
}

type rawPoint struct {
	x, v, cap float64
	gapBefore bool
}

// points lists signal si's values in time order: per bucket its minimum and
// maximum (one point when they are the same sample).
func (b *Builder) points(si int) []rawPoint {
	var out []rawPoint
	prev := math.Inf(-1)
	for i := range b.buckets {
		bk := &b.buckets[i]
		a := &bk.sig[si]
		if bk.n == 0 || !a.set {
			continue
		}
		gap := b.MaxGap > 0 && len(out) > 0 && bk.first-prev > b.MaxGap.Seconds()
		lo := rawPoint{x: a.minX, v: a.minV, cap: a.capAtMin, gapBefore: gap}
		hi := rawPoint{x: a.maxX, v: a.maxV, cap: a.capMax, gapBefore: gap}
		switch {
		case a.minX == a.maxX && a.minV == a.maxV:
			out = append(out, lo)
		case a.minX <= a.maxX:
			hi.gapBefore = false
			out = append(out, lo, hi)
		default:
			lo.gapBefore = false
			out = append(out, hi, lo)
		}
		prev = bk.last
	}
	return out
}

func (b *Builder) segments(pts []rawPoint, y func(rawPoint) float64) [][]Point {
	var segs [][]Point
	for i, p := range pts {
		if i == 0 || p.gapBefore {
			segs = append(segs, nil)
		}
		segs[len(segs)-1] = append(segs[len(segs)-1], Point{X: p.x, Y: y(p)})
	}
	return segs
}

// unitOf is Percent when every threshold of the signal is a percentage (the
// way the config speaks of it), else the signal's own quantity.
func unitOf(sig policy.Signal, ths []*thresholdState) Unit {
	pct := true
	for _, t := range ths {
		if t.t.Value.Quantity != nil {
			pct = false
		}
	}
	if pct {
		return Percent
	}
	if r, _ := policy.ResourceFor(sig); r == policy.ResourceInodes || r == policy.ResourcePIDs {
		return Count
	}
	return Bytes
}

func scale(u Unit, v, capacity float64) float64 {
	if u != Percent {
		return v
	}
	if capacity == 0 {
		return 0
	}
	return v / capacity * 100
}

// thresholdValue is the threshold's quantity resolved against capacity as
// the kubelet resolves it (policy.ThresholdQuantity), in unit u.
func thresholdValue(u Unit, t policy.Threshold, capacity float64) float64 {
	if u == Percent {
		return float64(t.Value.Percentage) * 100
	}
	if t.Value.Quantity != nil {
		return float64(t.Value.Quantity.Value())
	}
	return math.Trunc(capacity * float64(t.Value.Percentage))
}
