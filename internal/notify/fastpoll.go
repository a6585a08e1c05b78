package notify

import (
	"context"
	"sync"
	"time"
)

// Fast-poll bounds. The interval shrinks with the headroom to the nearest
// memory threshold: far from it a read per second costs nothing measurable;
// close to it a read every 10 ms keeps detection well inside the kernel OOM
// killer's reach.
const (
	DefaultFastPollMin = 10 * time.Millisecond
	DefaultFastPollMax = time.Second
	// DefaultRampRate is the allocation rate the interval is sized for: at
	// 2 GiB/s the headroom left after one interval is still half the
	// headroom seen.
	DefaultRampRate = 2 << 30 // bytes per second
)

// HeadroomFunc returns, for each memory threshold the poll watches,
// available − threshold in bytes: a threshold is met while its headroom is
// negative (available < threshold, the kubelet's strict comparison). It
// should be cheap: memory.current (or memory.usage_in_bytes) and
// inactive_file of the pods' parent.
type HeadroomFunc func() ([]int64, error)

// FastPoll polls a HeadroomFunc at an interval that shrinks with the
// headroom, and wakes the sink whenever the number of thresholds met
// changes (a crossing of any of them, in either direction, like the v1
// memcg thresholds, one per threshold).
//
// Every threshold counts, not only the nearest: once a soft threshold is
// met, the hard one below it is the next crossing that matters, and the
// soft grace period may be far from over (in the VM demo the kernel OOM
// killer struck before that grace ran out).
type FastPoll struct {
	Headroom HeadroomFunc
	Sink     Sink
	Min, Max time.Duration
	RampRate int64 // bytes per second the interval is sized for
	// OnError is called once per run of consecutive errors (optional).
	OnError func(error)

	once   sync.Once
	mu     sync.Mutex
	rebase *int          // thresholds met in the Summary a synchronize just saw, not yet taken up by Run
	kick   chan struct{} // Rebase → Run, buffered 1
}

func (f *FastPoll) init() { f.once.Do(func() { f.kick = make(chan struct{}, 1) }) }

// Rebase tells the poll that a synchronize has just decided on a Summary
// with these headrooms (as HeadroomFunc returns them), and that the
// HeadroomFunc now counts from that Summary. Run reads the headroom again
// at once — its sleep was planned on the old baseline, perhaps before there
// was any (1 s) — and wakes the sink if a threshold has crossed since.
func (f *FastPoll) Rebase(headrooms []int64) {
	f.init()
	met, _ := metAndNearest(headrooms)
	f.mu.Lock()
	f.rebase = &met
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Interval returns the poll interval for a headroom (the distance to the
// nearest threshold, either way): the time it lasts at RampRate, halved,
// clamped to [Min, Max].
func (f *FastPoll) Interval(headroom int64) time.Duration {
	lo, hi, rate := f.Min, f.Max, f.RampRate
	if lo <= 0 {
		lo = DefaultFastPollMin
	}
	if hi < lo {
		hi = DefaultFastPollMax
		if hi < lo {
			hi = lo
		}
	}
	if rate <= 0 {
		rate = DefaultRampRate
	}
	if headroom <= 0 {
		return lo
	}
	d := time.Duration(float64(headroom) / float64(rate) / 2 * float64(time.Second))
	if d < lo {
		return lo
	}
	if d > hi {
		return hi
	}
	return d
}

// Run polls until ctx is done.
func (f *FastPoll) Run(ctx context.Context) {
	f.init()
	var known, failing bool
	prevMet := 0
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-f.kick:
			f.mu.Lock()
			if f.rebase != nil {
				prevMet, known = *f.rebase, true
				f.rebase = nil
			}
			f.mu.Unlock()
			if !t.Stop() {
				select { // drain a tick that fired meanwhile
				case <-t.C:
				default:
				}
			}
		}
		hs, err := f.Headroom()
		var next time.Duration
		if err != nil {
			if !failing && f.OnError != nil {
				f.OnError(err)
			}
			failing = true
			next = f.Interval(1 << 62)
		} else {
			failing = false
			met, nearest := metAndNearest(hs)
			if known && met != prevMet || !known && met > 0 {
				f.Sink.Wake(Wake{Source: "fast-poll", At: time.Now()})
			}
			known, prevMet = true, met
			next = f.Interval(nearest)
		}
		t.Reset(next)
	}
}

// metAndNearest counts the negative headrooms (thresholds met) and returns
// the smallest distance to any threshold, met or not (1<<62 with none).
func metAndNearest(hs []int64) (met int, nearest int64) {
	nearest = 1 << 62
	for _, h := range hs {
		if h < 0 {
			met++
			h = -h
		}
		nearest = min(nearest, h)
	}
	return met, nearest
}
