package trial

import (
	"context"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// Measure is what a watcher reads of the sandbox.
type Measure int

const (
	// Usage is memory.usage_in_bytes (v1) or memory.current (v2): what a
	// v1 memcg threshold compares and what the limit is charged with.
	Usage Measure = iota
	// WorkingSet is the usage less the inactive file pages, what the
	// agent's allocatableMemory.available is made of. File pages the hog
	// faults in (its own binary) are charged to the sandbox too: the usage
	// alone would time the crossing early.
	WorkingSet
)

func (m Measure) String() string {
	if m == WorkingSet {
		return "working set"
	}
	return "usage"
}

// Watch says how a watcher reads the sandbox.
type Watch struct {
	Measure Measure
	// Every is the period of the reads: the precision of the crossing's
	// time.
	Every time.Duration
	// FIFO reads from a dedicated OS thread at SCHED_FIFO priority,
	// sleeping in the kernel: on a single (emulated) CPU an ordinary
	// goroutine waits behind the agent's synchronize and sees the crossing
	// late, which would make evictd look faster than it is. Its sleep is
	// not cut short: Close waits up to one Every for it.
	FIFO bool
	// FIFOFailed, when set, is told why the thread could not get its
	// real-time priority (it reads at the ordinary one).
	FIFOFailed func(error)
}

// fifoPriority is the watcher thread's SCHED_FIFO priority: above every
// ordinary thread (the agent's included), below the kernel's own threads.
const fifoPriority = 50

// Crossing watches the sandbox in the background and sends, once, the
// time its measure first reaches at. The watcher ends then, or when the
// trial's context does; Close waits for it. A sandbox that cannot be read
// sends nothing (Wait then reports that it never crossed).
func (t *Trial) Crossing(w Watch, at uint64) <-chan time.Time {
	crossed := make(chan time.Time, 1)
	// By value: Close clears the sandbox's Parent under a watcher still
	// running (see Close).
	memoryDir, mode := t.Sandbox.Parent.Memory, t.Sandbox.Mode
	t.watchers.Add(1)
	go func() {
		defer t.watchers.Done()
		r, err := openReader(memoryDir, mode, w.Measure)
		if err != nil {
			return
		}
		defer r.close()
		poll(t.ctx, r, at, w, false, func(now time.Time, v uint64, err error) bool {
			if err == nil && v >= at {
				crossed <- now
				return false
			}
			return true
		})
	}()
	return crossed
}

// Sample is one read of the sandbox's usage.
type Sample struct {
	At    time.Time
	Bytes int64
}

// Sample reads the sandbox's usage or working set (w.Measure) every w.Every
// from an OS thread of its own until done closes, and for linger after, to
// see it fall, or until limit has passed or the trial's context ends; it
// returns the reads.
func (t *Trial) Sample(w Watch, done <-chan struct{}, linger, limit time.Duration) []Sample {
	memoryDir, mode := t.Sandbox.Parent.Memory, t.Sandbox.Mode
	out := make(chan []Sample, 1)
	t.watchers.Add(1)
	// Its own goroutine: the thread it locks (and may make real-time)
	// ends with it, not with the caller's.
	go func() {
		defer t.watchers.Done()
		ss := make([]Sample, 0, 1<<16)
		defer func() { out <- ss }()
		r, err := openReader(memoryDir, mode, w.Measure)
		if err != nil {
			return
		}
		defer r.close()
		ctx, cancel := context.WithTimeout(t.ctx, limit)
		defer cancel()
		var until time.Time
		poll(ctx, r, 0, w, true, func(now time.Time, v uint64, err error) bool {
			select {
			case <-done:
				if until.IsZero() {
					until = now.Add(linger)
				}
			default:
			}
			if !until.IsZero() && now.After(until) {
				return false
			}
			if err == nil {
				ss = append(ss, Sample{now, int64(v)})
			}
			return true
		})
	}()
	return <-out
}

// poll reads r every w.Every and hands each read, with the time it was
// made, to fn until fn returns false or ctx ends. With w.FIFO or thread it
// runs on its own OS thread (never unlocked: the thread exits with the
// goroutine, and its real-time priority with it) and sleeps in the kernel.
func poll(ctx context.Context, r *reader, at uint64, w Watch, thread bool, fn func(time.Time, uint64, error) bool) {
	thread = thread || w.FIFO
	if thread {
		runtime.LockOSThread()
	}
	if w.FIFO {
		err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: fifoPriority}, 0)
		if err != nil && w.FIFOFailed != nil {
			w.FIFOFailed(err)
		}
	}
	ts := unix.NsecToTimespec(w.Every.Nanoseconds())
	for ctx.Err() == nil {
		v, err := r.read(at)
		if !fn(time.Now(), v, err) {
			return
		}
		if thread {
			unix.Nanosleep(&ts, nil)
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.Every):
		}
	}
}

// reader reads the sandbox's usage through a descriptor it holds open (one
// pread a read, not an open: the watcher reads every 100 µs), and for the
// working set the cgroup's memory.stat too.
type reader struct {
	fd   int
	path string
	v2   bool
	dir  *cgroup.Dir // WorkingSet only
}

func openReader(memoryDir string, mode sandbox.Mode, m Measure) (*reader, error) {
	r := &reader{v2: mode == sandbox.V2, path: filepath.Join(memoryDir, "memory.usage_in_bytes")}
	if r.v2 {
		r.path = filepath.Join(memoryDir, "memory.current")
	}
	var err error
	if r.fd, err = cgroup.OpenFd(r.path); err != nil {
		return nil, err
	}
	if m == WorkingSet {
		if r.dir, err = cgroup.OpenDir(memoryDir); err != nil {
			unix.Close(r.fd)
			return nil, err
		}
	}
	return r, nil
}

// read returns the usage, or with a memory.stat the working set. Below at
// it returns the usage alone: memory.stat cannot raise it.
func (r *reader) read(at uint64) (uint64, error) {
	var u uint64
	var err error
	if r.v2 {
		u, err = cgroupv2.ReadMemoryCurrentFd(r.fd, r.path)
	} else {
		u, err = cgroupv1.ReadMemoryUsageInBytesFd(r.fd, r.path)
	}
	if err != nil || r.dir == nil || u < at {
		return u, err
	}
	if r.v2 {
		st, err := cgroupv2.ReadMemoryStatAt(r.dir)
		return cgroupv2.WorkingSet(u, &st), err
	}
	st, err := cgroupv1.ReadMemoryStatAt(r.dir)
	return cgroupv1.WorkingSet(u, &st), err
}

func (r *reader) close() {
	unix.Close(r.fd)
	if r.dir != nil {
		r.dir.Close()
	}
}
