package notify

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/workload/sandbox"
)

// waitNotRunning waits until the watch has ended.
func waitNotRunning(t *testing.T, c *CloseWatch, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.Running() {
		if time.Now().After(deadline) {
			t.Fatalf("the watch still runs after %s: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noWake fails if the waker delivers anything within d.
func noWake(t *testing.T, w *Waker, d time.Duration, why string) {
	t.Helper()
	select {
	case x := <-w.C():
		t.Fatalf("woke (%s, crossed %q): %s", x.Source, x.Crossed, why)
	case <-time.After(d):
	}
}

// On a real v1 memory cgroup: a running watch wakes with the threshold's
// name as Crossed when usage goes above its level, though nothing charges
// after that (a second hog allocates once and holds: the case the kernel's
// own check, made only with charges, can miss), and ends there.
func TestCloseWatchSeesACrossingWithoutCharges(t *testing.T) {
	s, c, _, w, _ := newMemcgFixture(t)
	startHog(t, "alloc 16Mi; hold", c)
	u := waitStableUsage(t, s.Parent.Memory, 16<<20)
	const key = "allocatableMemory.available<100Mi"
	cw := NewCloseWatch(w, "allocatableMemory.available", s.Parent.Memory, key)
	t.Cleanup(func() { cw.Close() })
	cw.Set(u+8<<20, u-8<<20)
	cw.Start()
	if !cw.Running() {
		t.Fatal("Start with usage between the levels: no watch running")
	}
	noWake(t, w, 200*time.Millisecond, "usage is below the watch's level")
	c2, err := s.Child("hog2")
	if err != nil {
		t.Fatal(err)
	}
	startHog(t, "alloc 16Mi; hold", c2)
	x := waitWake(t, w, 5*time.Second, "usage going above the watch's level")
	if x.Source != "memcg-watch allocatableMemory.available" || x.Crossed != key {
		t.Fatalf("wake-up %q crossed %q, want memcg-watch allocatableMemory.available crossed %q", x.Source, x.Crossed, key)
	}
	if now := usage(t, s.Parent.Memory); now <= u+8<<20 {
		t.Errorf("woke with usage %d, not above the level %d", now, u+8<<20)
	}
	waitNotRunning(t, cw, time.Second, "after the crossing")
}

// A watch ends without a wake-up when usage is at or below the arming level
// (the pressure went away), after CloseWatchFor when usage stays between
// the levels, and at Close; a closed watch starts no more. The same at a
// real-time priority, where the watch waits in the kernel and ends on its
// own as well as at Close.
func TestCloseWatchEnds(t *testing.T) {
	needMode(t, sandbox.V1)
	for _, prio := range []int{0, RealtimePriority} {
		t.Run(fmt.Sprintf("priority %d", prio), func(t *testing.T) { closeWatchEnds(t, prio) })
	}
}

func closeWatchEnds(t *testing.T, prio int) {
	s := newSandbox(t, 0)
	w := NewWaker()
	cw := NewCloseWatch(w, "memory.available", s.Parent.Memory, "memory.available<100Mi")
	cw.Priority = prio
	t.Cleanup(func() { cw.Close() })

	cw.Start()
	if cw.Running() {
		t.Fatal("a watch without levels started")
	}
	u := usage(t, s.Parent.Memory)
	cw.Set(u+64<<20, u+32<<20) // usage below the arming level
	cw.Start()
	waitNotRunning(t, cw, time.Second, "usage below the arming level")

	cw.Set(u+64<<20, u-1) // usage between the levels, and staying there
	start := time.Now()
	cw.Start()
	waitNotRunning(t, cw, CloseWatchFor+time.Second, "usage parked between the levels")
	if el := time.Since(start); el < CloseWatchFor {
		t.Errorf("the watch ended after %s, before CloseWatchFor (%s), with usage between the levels", el, CloseWatchFor)
	}
	noWake(t, w, 10*time.Millisecond, "no crossing")

	cw.Start()
	if !cw.Running() {
		t.Fatal("no watch running after Start")
	}
	cw.Close()
	waitNotRunning(t, cw, time.Second, "after Close")
	cw.Start()
	if cw.Running() {
		t.Fatal("a closed watch started")
	}
	waitFIFOThreads(t, 0)
}

// The interval is the time the distance lasts at RampRate, halved, within
// [CloseWatchMin, CloseWatchMax].
func TestCloseWatchInterval(t *testing.T) {
	c := &CloseWatch{RampRate: 1 << 30}
	for _, tc := range []struct {
		distance int64
		want     time.Duration
	}{
		{0, CloseWatchMin},
		{64 << 10, CloseWatchMin},           // 30 µs at 1 GiB/s
		{2 << 20, 976562 * time.Nanosecond}, // 1.95 ms, halved
		{32 << 20, CloseWatchMax},           // 15.6 ms
		{-(1 << 20), CloseWatchMin},         // past the level: soonest
	} {
		if got := c.interval(tc.distance); got != tc.want {
			t.Errorf("interval(%d) = %s, want %s", tc.distance, got, tc.want)
		}
	}
}

// OnAbove runs on an upward crossing, before the wake-up is delivered, and
// not on the downward one (the v1 arming threshold starts its close watch
// so).
func TestMemcgThresholdOnAbove(t *testing.T) {
	s, c, _, w, m := newMemcgFixture(t)
	var above atomic.Int32
	m.OnAbove = func() { above.Add(1) }
	u := usage(t, s.Parent.Memory)
	if _, err := m.Update(time.Now(), u+32<<20, u); err != nil {
		t.Fatal(err)
	}
	h := startHog(t, "alloc 64Mi; sleep 300ms; crash", c)
	waitWake(t, w, 10*time.Second, "usage crossing the threshold upward")
	if n := above.Load(); n != 1 {
		t.Fatalf("OnAbove ran %d times by the upward crossing's wake-up, want 1", n)
	}
	<-h.done
	waitWake(t, w, 10*time.Second, "usage falling back below the threshold")
	if n := above.Load(); n != 1 {
		t.Errorf("OnAbove ran %d times in all, want 1 (not on the downward crossing)", n)
	}
}
