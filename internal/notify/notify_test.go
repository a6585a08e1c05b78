package notify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

func TestPollerDeliversAndCloses(t *testing.T) {
	before := countFDs(t)
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 1)
	tok, err := p.add(efd, unix.EPOLLIN, func(uint32) { drainEventfd(efd); got <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	// Signals hitting the process while the poller sits in epoll_wait must
	// not stop it (EINTR is retried).
	for i := 0; i < 20; i++ {
		syscall.Kill(os.Getpid(), syscall.SIGURG)
	}
	unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("eventfd write not delivered")
	}
	if err := p.Err(); err != nil {
		t.Fatalf("poller stopped: %v", err)
	}
	p.remove(efd, tok)
	unix.Close(efd)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.add(0, unix.EPOLLIN, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after Close: got %v, want ErrClosed", err)
	}
	if after := countFDs(t); after != before {
		t.Fatalf("descriptors: %d before, %d after", before, after)
	}
}

func TestUsageThreshold(t *testing.T) {
	// capacity 8Gi, eviction threshold 100Mi, inactive_file 1Gi: the
	// working set hits 8Gi-100Mi when usage hits 8Gi-100Mi+1Gi.
	const mi, gi = 1 << 20, 1 << 30
	if got, want := UsageThreshold(8*gi, 100*mi, 1*gi), int64(9*gi-100*mi); got != want {
		t.Fatalf("UsageThreshold = %d, want %d", got, want)
	}
}

func TestFirstPageAbove(t *testing.T) {
	ps := pageSize
	for _, c := range []struct{ in, want int64 }{
		{0, ps}, {1, ps}, {ps - 1, ps}, {ps, 2 * ps}, {100*ps + 7, 101 * ps},
	} {
		if got := firstPageAbove(c.in); got != c.want {
			t.Errorf("firstPageAbove(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func usage(t *testing.T, dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newMemcgFixture makes a v1 sandbox with a "hog" child, a poller, a waker
// and an allocatableMemory.available notifier on the sandbox (unregistered),
// all closed at cleanup.
func newMemcgFixture(t *testing.T) (*sandbox.Sandbox, sandbox.Cgroup, *Poller, *Waker, *MemcgThreshold) {
	t.Helper()
	needMode(t, sandbox.V1)
	s := newSandbox(t, 0)
	c, err := s.Child("hog")
	if err != nil {
		t.Fatal(err)
	}
	p, w, m := newMemcgOn(t, s.Parent.Memory)
	return s, c, p, w, m
}

// newMemcgOn makes a poller, a waker and an unregistered
// allocatableMemory.available notifier on the cgroup at dir, closed at
// cleanup.
func newMemcgOn(t *testing.T, dir string) (*Poller, *Waker, *MemcgThreshold) {
	t.Helper()
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	w := NewWaker()
	m := NewMemcgThreshold(p, w, "allocatableMemory.available", dir)
	t.Cleanup(func() { m.Close() })
	return p, w, m
}

// A hog crossing the registered usage threshold wakes the waiter, and its
// exit (usage falling back below) wakes it again: crossings in both
// directions, the upward one named as the threshold crossed (Key), the
// downward one not.
func TestMemcgThresholdWakesBothWays(t *testing.T) {
	s, c, _, w, m := newMemcgFixture(t)
	m.Key = "allocatableMemory.available<100Mi"
	const mi = 1 << 20
	u := usage(t, s.Parent.Memory)
	thr := u + 50*mi
	if rebuilt, err := m.Update(time.Now(), thr, u); err != nil || !rebuilt {
		t.Fatalf("Update: rebuilt=%v err=%v", rebuilt, err)
	}
	h := startHog(t, "alloc 100Mi; sleep 300ms; crash", c)
	x := waitWake(t, w, 10*time.Second, "usage crossing the threshold upward")
	if x.Source != "memcg-threshold allocatableMemory.available" {
		t.Fatalf("source %q", x.Source)
	}
	if x.Crossed != m.Key {
		t.Errorf("upward crossing's Crossed %q, want %q", x.Crossed, m.Key)
	}
	<-h.done
	if x := waitWake(t, w, 10*time.Second, "usage falling back below the threshold"); x.Crossed != "" {
		t.Errorf("downward crossing's Crossed %q, want none", x.Crossed)
	}
}

// The registration is rebuilt at most every RefreshInterval, and rebuilding
// 1,000 times leaks no descriptor.
func TestMemcgThresholdRebuildNoLeak(t *testing.T) {
	needMode(t, sandbox.V1)
	s := newSandbox(t, 0)
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := NewMemcgThreshold(p, NewWaker(), "memory.available", s.Parent.Memory)
	defer m.Close()
	t0 := time.Unix(1000, 0)
	u := usage(t, s.Parent.Memory) // an empty cgroup: well below 1 GiB
	if rebuilt, err := m.Update(t0, 1<<30, u); err != nil || !rebuilt {
		t.Fatalf("first Update: rebuilt=%v err=%v", rebuilt, err)
	}
	if rebuilt, _ := m.Update(t0.Add(9*time.Second), 2<<30, u); rebuilt {
		t.Fatal("rebuilt within the 10 s refresh interval")
	}
	if rebuilt, _ := m.Update(t0.Add(11*time.Second), 2<<30, u); !rebuilt || m.Threshold() != 2<<30 {
		t.Fatalf("not rebuilt after the refresh interval (threshold %d)", m.Threshold())
	}
	before := countFDs(t)
	start := time.Now()
	for i := 0; i < 1000; i++ {
		if err := m.Rebuild(int64(1<<30+i*4096), u); err != nil {
			t.Fatal(err)
		}
	}
	if after := countFDs(t); after != before {
		t.Fatalf("descriptors after 1,000 rebuilds: %d, before: %d", after, before)
	}
	t.Logf("1,000 rebuilds took %s", time.Since(start))
}

// waitStableUsage waits until the cgroup's usage is at least min and has
// not moved for 200 ms, and returns it.
func waitStableUsage(t *testing.T, dir string, min int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := int64(-1), time.Now()
	for time.Now().Before(deadline) {
		u := usage(t, dir)
		if u != last {
			last, since = u, time.Now()
		} else if u >= min && time.Since(since) >= 200*time.Millisecond {
			return u
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("usage of %s never settled at or above %d (last %d)", dir, min, last)
	return 0
}

// The kubelet's threshold is strict (available < threshold, so usage must
// go above the usage threshold) while the kernel signals a registered value
// once usage reaches it. A usage sitting exactly on the threshold must not
// use up the crossing: the next page above it wakes.
func TestMemcgThresholdWakesAboveNotAt(t *testing.T) {
	s, c, _, w, m := newMemcgFixture(t)
	startHog(t, "alloc 32Mi; sleep 2s; alloc 1Mi; hold", c)
	u := waitStableUsage(t, s.Parent.Memory, 32<<20)
	// Exactly at the threshold: not met.
	if _, err := m.Update(time.Now(), u, u); err != nil {
		t.Fatal(err)
	}
	x := waitWake(t, w, 10*time.Second, "usage going above a usage threshold it sat on")
	if now := usage(t, s.Parent.Memory); now <= u {
		t.Fatalf("woke (%s) with usage %d, not above the threshold %d", x.Source, now, u)
	}
}

// A crossing between the Summary a threshold was computed from and its
// registration wakes at once: the kernel signals only crossings it sees.
func TestMemcgThresholdCrossedWhileRegistering(t *testing.T) {
	s, c, p, w, m := newMemcgFixture(t)
	empty := usage(t, s.Parent.Memory)
	startHog(t, "alloc 32Mi; hold", c)
	u := waitStableUsage(t, s.Parent.Memory, 32<<20)
	// The "Summary" saw the empty cgroup; the usage is now 16 MiB past
	// the threshold.
	if _, err := m.Update(time.Now(), u-16<<20, empty); err != nil {
		t.Fatal(err)
	}
	if x := waitWake(t, w, 2*time.Second, "a crossing that happened before the registration"); x.Source != m.Source() {
		t.Fatalf("source %q", x.Source)
	}
	// Registered with the usage already past it and seen so: no wake.
	m2 := NewMemcgThreshold(p, w, "memory.available", s.Parent.Memory)
	defer m2.Close()
	if err := m2.Rebuild(u-16<<20, u); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-w.C():
		t.Fatalf("woke (%s) although the Summary already saw the usage past the threshold", x.Source)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestMemcgThresholdNotV1(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := NewMemcgThreshold(p, NewWaker(), "memory.available", t.TempDir())
	err = m.Rebuild(1<<30, 0)
	if err == nil {
		t.Fatal("registration in a plain directory succeeded")
	}
}

func TestValidatePSI(t *testing.T) {
	for _, c := range []struct {
		stall, window time.Duration
		ok            bool
	}{
		{150 * time.Millisecond, 2 * time.Second, true},
		{time.Second, 10 * time.Second, true},
		{150 * time.Millisecond, time.Second, false}, // not a multiple of 2 s
		{150 * time.Millisecond, 3 * time.Second, false},
		{3 * time.Second, 2 * time.Second, false}, // stall > window
		{0, 2 * time.Second, false},
		{time.Second, 12 * time.Second, false}, // above the kernel's 10 s
	} {
		if err := ValidatePSI(c.stall, c.window); (err == nil) != c.ok {
			t.Errorf("ValidatePSI(%s, %s) = %v, want ok=%v", c.stall, c.window, err, c.ok)
		}
	}
}

// The system-wide pressure file accepts a trigger with a 2 s window, and a
// memcg that is driven into reclaim and the OOM killer produces a memory
// stall that fires it.
func TestPSITriggerFires(t *testing.T) {
	_, err := os.Stat("/proc/pressure/memory")
	cgrouptest.NeedReal(t, err == nil, "a kernel with PSI (/proc/pressure/memory: %v)", err)
	needRoot(t) // any cgroup version: the pressure is system-wide
	before := countFDs(t)
	// Registered first, so it runs after the hogs' cleanups have reaped them
	// (a running child holds a pidfd).
	t.Cleanup(func() {
		if after := countFDs(t); after != before {
			t.Errorf("descriptors: %d before, %d after", before, after)
		}
	})
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	w := NewWaker()
	tr, err := NewPSITrigger(p, w, "/proc/pressure/memory", time.Millisecond, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, 32<<20)
	c, err := s.Child("thrash")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wg.Add(1)
	go func() { // hogs that keep hitting the limit until the trigger fires
		defer wg.Done()
		for ctx.Err() == nil {
			h := startHog(t, "ramp 64Mi 512Mi; hold", c)
			select {
			case <-h.done:
			case <-ctx.Done():
			}
		}
	}()
	x := waitWake(t, w, 20*time.Second, "memory stall under a 32 MiB limit")
	cancel()
	wg.Wait()
	if x.Source != "psi /proc/pressure/memory" {
		t.Fatalf("source %q", x.Source)
	}
	tr.Close()
	p.Close()
}

// The registration reads the usage through the descriptor it registered on
// (the v1 reader), not -1.
func TestRegisterMemcgThresholdReadsUsage(t *testing.T) {
	needMode(t, sandbox.V1)
	s := newSandbox(t, 0)
	c, err := s.Child("reg")
	if err != nil {
		t.Fatal(err)
	}
	startHog(t, "alloc 4Mi; hold", c)
	for deadline := time.Now().Add(10 * time.Second); usage(t, c.Memory) < 4<<20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hog never charged 4 MiB")
		}
	}
	efd, got, err := registerMemcgThreshold(c.Memory, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(efd)
	if got < 4<<20 {
		t.Fatalf("usage read at registration %d, want ≥ 4 MiB", got)
	}
}
