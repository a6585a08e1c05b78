package notify

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestFastPollInterval(t *testing.T) {
	f := &FastPoll{Min: 10 * time.Millisecond, Max: time.Second, RampRate: 1 << 30}
	for _, c := range []struct {
		headroom int64
		want     time.Duration
	}{
		{-1, 10 * time.Millisecond},
		{0, 10 * time.Millisecond},
		{1 << 20, 10 * time.Millisecond},    // 1 MiB at 1 GiB/s: 0.5 ms → clamped up
		{256 << 20, 125 * time.Millisecond}, // 256 MiB lasts 250 ms; poll at half
		{64 << 30, time.Second},             // far away → clamped down
	} {
		if got := f.Interval(c.headroom); got != c.want {
			t.Errorf("Interval(%d) = %s, want %s", c.headroom, got, c.want)
		}
	}
}

// The fast poll wakes on each sign change of the headroom (both directions)
// and not while the sign stays the same.
func TestFastPollWakesOnCrossings(t *testing.T) {
	var headroom atomic.Int64
	var reads atomic.Int64
	headroom.Store(100 << 20)
	w := NewWaker()
	f := &FastPoll{Min: time.Millisecond, Max: time.Millisecond, Sink: w,
		Headroom: func() ([]int64, error) { reads.Add(1); return []int64{headroom.Load()}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	waitReads := func(n int64) {
		for start := reads.Load(); reads.Load() < start+n; {
			time.Sleep(time.Millisecond)
		}
	}
	waitReads(5)
	select {
	case x := <-w.C():
		t.Fatalf("woke with headroom: %+v", x)
	default:
	}
	headroom.Store(-1)
	if x := waitWake(t, w, 5*time.Second, "headroom going negative"); x.Source != "fast-poll" {
		t.Fatalf("source %q", x.Source)
	}
	waitReads(5)
	select {
	case x := <-w.C():
		t.Fatalf("woke again while still below: %+v", x)
	default:
	}
	headroom.Store(1 << 20)
	waitWake(t, w, 5*time.Second, "headroom recovering")
}

// The threshold is met when available < threshold: a headroom of exactly 0
// is not a crossing, -1 is.
func TestFastPollIsStrict(t *testing.T) {
	var headroom atomic.Int64
	headroom.Store(1 << 20)
	w := NewWaker()
	f := &FastPoll{Min: time.Millisecond, Max: time.Millisecond, Sink: w,
		Headroom: func() ([]int64, error) { return []int64{headroom.Load()}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	time.Sleep(20 * time.Millisecond)
	headroom.Store(0)
	select {
	case x := <-w.C():
		t.Fatalf("woke at a headroom of 0 (available == threshold is not met): %+v", x)
	case <-time.After(100 * time.Millisecond):
	}
	headroom.Store(-1)
	waitWake(t, w, 5*time.Second, "headroom going below 0")
}

// Rebase makes the poll read at once, instead of at the end of a sleep
// planned on an older baseline, and wakes only if the threshold crossed
// since the Summary the synchronize decided on.
func TestFastPollRebase(t *testing.T) {
	var headroom, reads atomic.Int64
	headroom.Store(1 << 40) // far: the first read plans the longest sleep
	w := NewWaker()
	f := &FastPoll{Min: time.Hour, Max: time.Hour, Sink: w,
		Headroom: func() ([]int64, error) { reads.Add(1); return []int64{headroom.Load()}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	for reads.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	// The synchronize saw the threshold met; so does the poll: no wake.
	headroom.Store(-1)
	f.Rebase([]int64{-1}, nil)
	for reads.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	select {
	case x := <-w.C():
		t.Fatalf("woke although the synchronize already saw the threshold met: %+v", x)
	case <-time.After(50 * time.Millisecond):
	}
	// The synchronize saw it not met, but it is met now: wake, within
	// far less than the hour-long sleep.
	f.Rebase([]int64{1 << 40}, nil)
	if x := waitWake(t, w, 5*time.Second, "a crossing since the rebased Summary"); x.Source != "fast-poll" {
		t.Fatalf("source %q", x.Source)
	}
}

// With a soft threshold met, crossing the hard one below it wakes too: each
// threshold counts, not only the nearest. (The VM demo's kernel OOM kill:
// the soft grace had not run out when cache went through the hard one.)
func TestFastPollWakesForEachThreshold(t *testing.T) {
	var growth atomic.Int64
	soft, hard := int64(100<<20), int64(200<<20) // headrooms at the baseline
	w := NewWaker()
	f := &FastPoll{Min: time.Millisecond, Max: time.Millisecond, Sink: w,
		Headroom: func() ([]int64, error) {
			g := growth.Load()
			return []int64{soft - g, hard - g}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	growth.Store(150 << 20) // soft met, hard not
	waitWake(t, w, 5*time.Second, "the soft threshold met")
	growth.Store(160 << 20) // deeper, still only soft
	select {
	case x := <-w.C():
		t.Fatalf("woke while only the soft threshold stayed met: %+v", x)
	case <-time.After(50 * time.Millisecond):
	}
	growth.Store(250 << 20) // the hard one too
	waitWake(t, w, 5*time.Second, "the hard threshold met while the soft one already was")
}

func TestMetAndNearest(t *testing.T) {
	for _, c := range []struct {
		hs      []int64
		met     int
		nearest int64
	}{
		{nil, 0, 1 << 62},
		{[]int64{5}, 0, 5},
		{[]int64{0}, 0, 0},
		{[]int64{-3, 10}, 1, 3},
		{[]int64{-30, -10}, 2, 10},
	} {
		met, nearest := metAndNearest(c.hs)
		if met != c.met || nearest != c.nearest {
			t.Errorf("metAndNearest(%v) = %d, %d; want %d, %d", c.hs, met, nearest, c.met, c.nearest)
		}
	}
}

// With Arm, the poll wakes as a named threshold comes near, once per
// halving of the headroom since the Rebase (not for an unnamed one); the
// crossing's wake-up names the threshold crossed, the way back names none.
func TestFastPollArmsAndNamesTheCrossing(t *testing.T) {
	const key = "memory.available<100Mi"
	var hs atomic.Pointer[[]int64]
	set := func(v ...int64) { hs.Store(&v) }
	base := []int64{64 << 20, 64 << 20} // named, unnamed
	set(base...)
	w := NewWaker()
	f := &FastPoll{Min: time.Millisecond, Max: time.Millisecond, Sink: w, Arm: true,
		Headroom: func() ([]int64, error) { return *hs.Load(), nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	f.Rebase(base, []string{key, ""})
	quiet := func(what string) {
		t.Helper()
		select {
		case x := <-w.C():
			t.Fatalf("%s: woke %+v", what, x)
		case <-time.After(30 * time.Millisecond):
		}
	}
	quiet("headrooms as at the rebase")
	set(40<<20, 20<<20) // the unnamed one has halved: no arming for it
	quiet("only the unnamed threshold near")
	set(30<<20, 20<<20)
	if x := waitWake(t, w, 5*time.Second, "the named threshold's headroom halved"); x.Source != "fast-poll arming" || x.Crossed != "" {
		t.Fatalf("arming wake-up %+v", x)
	}
	set(20<<20, 20<<20)
	quiet("halved again, but no rebase since the arming")
	set(-1, 20<<20)
	if x := waitWake(t, w, 5*time.Second, "the named threshold crossed"); x.Source != "fast-poll" || x.Crossed != key {
		t.Fatalf("crossing wake-up %+v, want Crossed %q", x, key)
	}
	set(1<<20, 20<<20)
	if x := waitWake(t, w, 5*time.Second, "back above it"); x.Crossed != "" {
		t.Fatalf("wake-up on the way back %+v, want no Crossed", x)
	}
}

func TestFastPollArmFloor(t *testing.T) {
	if i := arming([]int64{2*ArmFloor - 1}, []int64{1}, []string{"k"}, []bool{false}); i != -1 {
		t.Errorf("armed at a base below 2×ArmFloor: %d", i)
	}
	if i := arming([]int64{2 * ArmFloor}, []int64{ArmFloor}, []string{"k"}, []bool{false}); i != 0 {
		t.Errorf("not armed at half of 2×ArmFloor: %d", i)
	}
	if i := arming([]int64{2 * ArmFloor}, []int64{-1}, []string{"k"}, []bool{false}); i != -1 {
		t.Errorf("armed for a threshold already met: %d", i)
	}
}
