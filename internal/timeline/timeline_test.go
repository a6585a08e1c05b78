package timeline

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/policy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func hard(q string) policy.Threshold {
	v := resource.MustParse(q)
	return policy.Threshold{Signal: policy.SignalMemoryAvailable, Operator: policy.OpLessThan, Value: policy.ThresholdValue{Quantity: &v}}
}

func mem(at time.Duration, avail int64) Sample {
	return Sample{Time: t0.Add(at), Observations: []Observation{{Signal: policy.SignalMemoryAvailable, Available: avail, Capacity: 8 << 30}}}
}

// TestShortSeriesExact: fewer samples than buckets are kept one by one.
func TestShortSeriesExact(t *testing.T) {
	var b Builder
	b.Known([]policy.Threshold{hard("1Gi")})
	for i := range 10 {
		b.Add(mem(time.Duration(i)*time.Minute, int64(i)<<30))
	}
	tl := b.Build()
	if len(tl.Panels) != 1 || len(tl.Panels[0].Available) != 1 || len(tl.Panels[0].Available[0]) != 10 {
		t.Fatalf("panels %+v", tl.Panels)
	}
	for i, p := range tl.Panels[0].Available[0] {
		if p.X != float64(i*60) || p.Y != float64(int64(i)<<30) {
			t.Errorf("point %d = %+v", i, p)
		}
	}
	if tl.BucketWidth != 0 {
		t.Errorf("bucket width %v for 10 samples", tl.BucketWidth)
	}
	if got := tl.Panels[0].Thresholds[0].Label; got != "memory.available<1Gi" {
		t.Errorf("label %q", got)
	}
}

// TestDownsamplingKeepsSpikes: a week of samples fits the buckets, and a
// one-sample dip and peak survive as the minimum and maximum.
func TestDownsamplingKeepsSpikes(t *testing.T) {
	b := Builder{MaxBuckets: 256}
	b.Known([]policy.Threshold{hard("1Gi")})
	n := 7 * 24 * 3600 / 10
	for i := range n {
		v := int64(4 << 30)
		switch i {
		case 12345:
			v = 1 << 20 // the dip
		case 54321:
			v = 7 << 30 // the peak
		}
		b.Add(mem(time.Duration(i)*10*time.Second, v))
	}
	tl := b.Build()
	pts := tl.Panels[0].Available[0]
	if len(pts) > 2*256 {
		t.Errorf("%d points for 256 buckets", len(pts))
	}
	var lo, hi bool
	for _, p := range pts {
		lo = lo || (p.Y == 1<<20 && p.X == 123450)
		hi = hi || (p.Y == 7<<30 && p.X == 543210)
	}
	if !lo || !hi {
		t.Errorf("dip kept %v, peak kept %v", lo, hi)
	}
	if tl.Samples != n || tl.BucketWidth == 0 {
		t.Errorf("samples %d, bucket width %v", tl.Samples, tl.BucketWidth)
	}
}

// TestGapsBreakLines: samples further apart than MaxGap start a new
// segment, and a condition band ends at the last sample before the gap.
func TestGapsBreakLines(t *testing.T) {
	b := Builder{MaxGap: time.Minute}
	b.Known([]policy.Threshold{hard("1Gi")})
	for _, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second, time.Hour, time.Hour + 10*time.Second} {
		s := mem(at, 512<<20)
		s.Conditions = []string{"MemoryPressure"}
		b.Add(s)
	}
	tl := b.Build()
	if n := len(tl.Panels[0].Available); n != 2 {
		t.Errorf("%d segments, want 2", n)
	}
	on := tl.Conditions[0].On
	if len(on) != 2 || on[0] != (Interval{0, 20}) || on[1] != (Interval{3600, 3610}) {
		t.Errorf("MemoryPressure %v", on)
	}
}

// TestGraceWindows: a soft threshold's grace runs from first observed for
// its grace period, cut short when the threshold stops being met.
func TestGraceWindows(t *testing.T) {
	soft := hard("2Gi")
	soft.GracePeriod = 2 * time.Minute
	var b Builder
	b.Known([]policy.Threshold{soft})
	met := func(at, first time.Duration) Sample {
		s := mem(at, 1<<30)
		s.Met = []Met{{Threshold: soft, FirstObserved: t0.Add(first)}}
		return s
	}
	b.Add(met(time.Minute, time.Minute))
	b.Add(met(2*time.Minute, time.Minute))
	b.Add(mem(150*time.Second, 3<<30)) // recovered inside the grace period
	b.Add(met(5*time.Minute, 5*time.Minute))
	tl := b.Build()
	th := tl.Panels[0].Thresholds[0]
	if th.Label != "memory.available<2Gi (soft, 2m)" || !th.Soft {
		t.Errorf("threshold %q soft=%v", th.Label, th.Soft)
	}
	want := []Interval{{0, 90}, {240, 360}} // X counts from the first sample (1m)
	if len(th.Grace) != 2 || th.Grace[0] != want[0] || th.Grace[1] != want[1] {
		t.Errorf("grace %v, want %v", th.Grace, want)
	}
}

// TestIntervalsBounded: a condition flapping every sample stays within
// MaxIntervals.
func TestIntervalsBounded(t *testing.T) {
	b := Builder{MaxIntervals: 16}
	for i := range 1000 {
		s := mem(time.Duration(i)*time.Second, 1<<30)
		if i%2 == 0 {
			s.Conditions = []string{"DiskPressure"}
		}
		b.Add(s)
	}
	tl := b.Build()
	on := tl.Conditions[1].On
	if len(on) > 16 || len(on) == 0 || !tl.IntervalsMerged {
		t.Errorf("%d intervals (merged %v)", len(on), tl.IntervalsMerged)
	}
	if on[0].From != 0 || on[len(on)-1].To < 997 {
		t.Errorf("the joined intervals lost the ends: %v … %v", on[0], on[len(on)-1])
	}
}

// TestPercentPanels: a signal whose thresholds are all percentages is
// drawn in % of capacity.
func TestPercentPanels(t *testing.T) {
	pct := policy.Threshold{Signal: policy.SignalNodeFsAvailable, Operator: policy.OpLessThan, Value: policy.ThresholdValue{Percentage: 0.1}, GracePeriod: 90 * time.Second}
	var b Builder
	b.Known([]policy.Threshold{pct})
	b.Add(Sample{Time: t0, Observations: []Observation{{Signal: policy.SignalNodeFsAvailable, Available: 25, Capacity: 100}}})
	tl := b.Build()
	p := tl.Panels[0]
	if p.Unit != Percent || p.Available[0][0].Y != 25 || p.Thresholds[0].Quantity[0][0].Y < 9.99 || p.Thresholds[0].Quantity[0][0].Y > 10.01 {
		t.Errorf("panel %+v", p)
	}
	if p.Thresholds[0].Label != "nodefs.available<10% (soft, 1m30s)" {
		t.Errorf("label %q", p.Thresholds[0].Label)
	}
}
