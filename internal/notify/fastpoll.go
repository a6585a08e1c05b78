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
	// Arm also wakes the sink as a named (hard) threshold comes near: when
	// its headroom has halved since the last Rebase, once per Rebase, down
	// to ArmFloor. The synchronize it runs ranks the pods again, so that
	// the agent's early growth stop has its victim ready for the crossing
	// (agent/earlystop.go); a ramp from far away runs about log2 of
	// (headroom / ArmFloor) such synchronizes.
	Arm bool
	// Priority, when > 0, runs the poll on an OS thread of its own at
	// SCHED_FIFO Priority, waiting in the kernel between reads (waiter), so
	// that its reads and the wake-up it sends (the early growth stop runs
	// on it) never wait behind the allocator (RealtimePriority; as for
	// CloseWatch, set it only after ProbeRealtime succeeded).
	Priority int

	once   sync.Once
	mu     sync.Mutex
	rebase *rebase       // the Summary a synchronize just saw, not yet taken up by Run
	kick   chan struct{} // Rebase → Run, buffered 1
}

// rebase is what Rebase hands to Run.
type rebase struct {
	heads []int64  // per threshold, its headroom in the Summary
	met   []bool   // per threshold, met in the Summary
	keys  []string // per threshold, its name for Wake.Crossed ("" or short: none)
}

// ArmFloor is the smallest headroom at which the poll still wakes a
// synchronize to arm the early growth stop (Arm): below it, the next
// halving is a few milliseconds of a fast ramp away and the crossing
// comes first.
const ArmFloor = 8 << 20 // bytes

// arming is the first named threshold, not met, whose headroom fell to
// half or less of the rebase's (at least ArmFloor); fired marks those
// that already woke one since the rebase. -1 if none.
func arming(base, hs []int64, keys []string, fired []bool) int {
	for i, h := range hs {
		if i >= len(base) || i >= len(keys) || i >= len(fired) || keys[i] == "" || fired[i] {
			continue
		}
		if h >= 0 && base[i] >= 2*ArmFloor && h <= base[i]/2 {
			return i
		}
	}
	return -1
}

// metSet is which headrooms are negative (thresholds met).
func metSet(hs []int64) []bool {
	out := make([]bool, len(hs))
	for i, h := range hs {
		out[i] = h < 0
	}
	return out
}

// crossed is the key of the first threshold met in now that was not in
// prev ("" when none, or when the keys do not name it). The headrooms keep
// their order between rebases: Wakeups builds both from the same list.
func crossed(prev, now []bool, keys []string) string {
	for i, m := range now {
		if m && (i >= len(prev) || !prev[i]) && i < len(keys) {
			return keys[i]
		}
	}
	return ""
}

func (f *FastPoll) init() { f.once.Do(func() { f.kick = make(chan struct{}, 1) }) }

// Rebase tells the poll that a synchronize has just decided on a Summary
// with these headrooms (as HeadroomFunc returns them), and that the
// HeadroomFunc now counts from that Summary. Run reads the headroom again
// at once — its sleep was planned on the old baseline, perhaps before there
// was any (1 s) — and wakes the sink if a threshold has crossed since.
// keys name the thresholds, in the headrooms' order (nil: unnamed); a
// wake-up on which one of them became met carries its key as Wake.Crossed.
func (f *FastPoll) Rebase(headrooms []int64, keys []string) {
	f.init()
	f.mu.Lock()
	f.rebase = &rebase{heads: headrooms, met: metSet(headrooms), keys: keys}
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
	rt := false
	if f.Priority > 0 {
		rt = realtime(f.Priority) == nil // ends locked: the thread goes with the poll
		defer ordinary()
	}
	w := newWaiter(rt, ctx.Done(), f.kick)
	defer w.close()
	var known, failing bool
	var prev []bool // per threshold, met at the last read
	var keys []string
	var base []int64 // headrooms at the last rebase
	var fired []bool // per threshold, an arming wake-up since the rebase
	next := time.Duration(0)
	for {
		if !w.wait(next) {
			return
		}
		f.mu.Lock()
		if f.rebase != nil {
			prev, keys, known = f.rebase.met, f.rebase.keys, true
			base, fired = f.rebase.heads, make([]bool, len(f.rebase.heads))
			f.rebase = nil
		}
		f.mu.Unlock()
		hs, err := f.Headroom()
		if err != nil {
			if !failing && f.OnError != nil {
				f.OnError(err)
			}
			failing = true
			next = f.Interval(1 << 62)
			continue
		}
		failing = false
		met, nearest := metAndNearest(hs)
		set := metSet(hs)
		if known && met != count(prev) || !known && met > 0 {
			f.Sink.Wake(Wake{Source: "fast-poll", At: time.Now(), Crossed: crossed(prev, set, keys)})
		} else if i := arming(base, hs, keys, fired); f.Arm && i >= 0 {
			fired[i] = true
			f.Sink.Wake(Wake{Source: "fast-poll arming", At: time.Now()})
		}
		known, prev = true, set
		next = f.Interval(nearest)
	}
}

// count is how many thresholds set has met.
func count(set []bool) int {
	n := 0
	for _, m := range set {
		if m {
			n++
		}
	}
	return n
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
