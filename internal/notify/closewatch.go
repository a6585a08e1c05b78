package notify

import (
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup"
)

// Close-watch bounds. The kernel checks a v1 memcg threshold only while it
// charges pages, every 128 page events per CPU (THRESHOLDS_EVENTS_TARGET in
// mm/memcontrol-v1.c): an allocator that crosses late in a burst and then
// pauses is signalled at its next burst, a whole pause later (a hog paced
// at 500 MiB/s in 10 ms slices, bench/latency -oom: 3 of 40 slices that
// ended just past the threshold brought no eventfd, the 10 ms fast poll
// woke them 2.8–6.5 ms after the crossing; with the watch the slowest of
// 40 came 0.8 ms after it). The watch reads
// the usage itself over the last stretch before the crossing, so that the
// crossing is seen within an interval whether the allocator pauses or not.
const (
	// CloseWatchMin is the shortest interval: a read of
	// memory.usage_in_bytes through a held descriptor and a timer wake-up
	// cost ≈ 10 µs of CPU, 5 % of a core at this rate.
	CloseWatchMin = 200 * time.Microsecond
	// CloseWatchMax is the longest: the watch starts ArmAhead (64 MiB)
	// below the threshold, which a 5 GiB/s ramp covers in 12 ms.
	CloseWatchMax = 5 * time.Millisecond
	// CloseWatchFor bounds one watch: a node whose usage stays between the
	// arming level and the threshold is then left to the memcg eventfd
	// until the next synchronize, which starts another watch (the agent
	// does so whenever a Summary finds usage there: an eventfd's edge may
	// be spent). A node parked 1 MiB below its threshold pays a read every
	// 0.25 ms (≈ 10 µs each) for 2 s of each 10 s period, ≈ 0.8 % of a
	// core on average; parked 64 MiB below, a read every 5 ms.
	CloseWatchFor = 2 * time.Second
)

// CloseWatch carries a v1 memcg threshold over its last stretch. Between
// the arming threshold's wake-up (Start, usage above the arming level) and
// the crossing (usage above the threshold's level) it reads the cgroup's
// memory.usage_in_bytes at an interval sized, as the fast poll's, by the
// distance left at RampRate, and wakes the sink the moment it sees the
// crossing, with Crossed set, as the threshold's own eventfd would. It
// stops at the crossing, when usage falls back to the arming level or
// below, after CloseWatchFor, or at Close; it never logs.
type CloseWatch struct {
	name, dir, key string
	sink           Sink
	// RampRate is the allocation rate the interval is sized for (0:
	// DefaultRampRate).
	RampRate int64
	// Priority, when > 0, runs each watch on an OS thread of its own at
	// SCHED_FIFO Priority, sleeping in the kernel between reads (waiter), so that
	// neither its reads nor the wake-up it sends wait behind the allocator
	// (RealtimePriority; set it only after ProbeRealtime succeeded: a
	// refused priority leaves the watch at the ordinary one).
	Priority int

	mu         sync.Mutex
	level, arm int64 // usage thresholds: crossed above level; the watch ends at arm or below
	running    bool
	closed     bool
	stop       chan struct{}
	runs       int // watches started, for tests
}

// NewCloseWatch returns a watch of the v1 memory cgroup at dir for the
// threshold named key (Wake.Crossed); name labels its wake-ups as the
// threshold's own are labelled. Set gives it its levels.
func NewCloseWatch(sink Sink, name, dir, key string) *CloseWatch {
	return &CloseWatch{name: name, dir: dir, key: key, sink: sink, stop: make(chan struct{})}
}

// Source is the label of this watch's wake-ups.
func (c *CloseWatch) Source() string { return "memcg-watch " + c.name }

// Set moves the watch's levels: usage above level is the crossing, usage at
// or below arm ends the watch. A running watch uses them from its next read.
func (c *CloseWatch) Set(level, arm int64) {
	c.mu.Lock()
	c.level, c.arm = level, arm
	c.mu.Unlock()
}

// Levels returns the levels Set gave (0, 0 before).
func (c *CloseWatch) Levels() (level, arm int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.level, c.arm
}

// Start begins a watch unless one is running, the watch is closed or it has
// no levels yet. It returns at once (the poller's goroutine calls it).
func (c *CloseWatch) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running || c.closed || c.level <= 0 {
		return
	}
	c.running = true
	c.runs++
	go c.run()
}

// Running says whether a watch is under way.
func (c *CloseWatch) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// Close ends a running watch and refuses new ones.
func (c *CloseWatch) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	return nil
}

func (c *CloseWatch) run() {
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()
	attr := filepath.Join(c.dir, usageAttribute)
	fd, err := cgroup.OpenFd(attr)
	if err != nil {
		return // the cgroup is gone: nothing left to watch, the next synchronize sees why
	}
	defer unix.Close(fd)
	rt := false
	if c.Priority > 0 {
		rt = realtime(c.Priority) == nil // ends locked: the thread goes with the watch
		defer ordinary()
	}
	w := newWaiter(rt, c.stop, nil)
	defer w.close()
	end := time.Now().Add(CloseWatchFor)
	for {
		u := preadUsage(fd, attr)
		now := time.Now()
		c.mu.Lock()
		level, arm := c.level, c.arm
		c.mu.Unlock()
		switch {
		case u < 0:
			return
		case u > level:
			c.sink.Wake(Wake{Source: c.Source(), At: now, Crossed: c.key})
			return
		case u <= arm, now.After(end):
			return
		}
		if !w.wait(c.interval(level - u)) {
			return
		}
	}
}

// interval is the time distance bytes last at RampRate, halved, clamped to
// [CloseWatchMin, CloseWatchMax].
func (c *CloseWatch) interval(distance int64) time.Duration {
	rate := c.RampRate
	if rate <= 0 {
		rate = DefaultRampRate
	}
	d := time.Duration(float64(distance) / float64(rate) / 2 * float64(time.Second))
	return min(max(d, CloseWatchMin), CloseWatchMax)
}
