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
		Headroom: func() (int64, error) { reads.Add(1); return headroom.Load(), nil }}
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
