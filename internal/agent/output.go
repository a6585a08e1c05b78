package agent

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Output I/O (the decision log, the state file, Kubernetes Events, the log
// lines themselves) never runs on the eviction loop: the loop hands each
// write to a Queue and goes on, and one goroutine per output does the
// write. A slow or full disk, or a pipe nobody reads, then fills the queue
// instead of stalling a decision, a kill or a stop; what does not fit is
// dropped and counted (evictd_output_dropped_total{output}).

// DefaultFlushTimeout bounds how long a stopping agent waits for its outputs
// to write what is queued: a pipe nobody reads must not keep evictd from
// exiting.
const DefaultFlushTimeout = 2 * time.Second

// Queue runs writes of T on a goroutine of its own, through a bounded
// queue. Put never blocks.
type Queue[T any] struct {
	write func(T) error
	// result, when set, sees the outcome of every write (nil: it worked).
	result func(error)
	// dropped, when set, is called for every item that did not fit.
	dropped func()

	mu      sync.RWMutex // held for reading by Put, for writing by Close
	closed  bool
	ch      chan queueItem[T]
	done    chan struct{} // closed when the worker has returned
	drops   atomic.Uint64
	written atomic.Uint64
}

type queueItem[T any] struct {
	v    T
	ctl  func()        // a control step (reopen, barrier) instead of a write
	done chan struct{} // closed after the item was handled
}

// NewQueue starts a queue of size items whose worker calls write.
func NewQueue[T any](size int, write func(T) error) *Queue[T] {
	q := &Queue[T]{write: write, ch: make(chan queueItem[T], size), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *Queue[T]) run() {
	defer close(q.done)
	for it := range q.ch {
		if it.ctl != nil {
			it.ctl()
		} else {
			err := q.write(it.v)
			if err == nil {
				q.written.Add(1)
			}
			if f := q.result; f != nil {
				f(err)
			}
		}
		if it.done != nil {
			close(it.done)
		}
	}
}

// SetResult sets what sees the outcome of every write. Call it before the
// first Put (the worker reads it unlocked).
func (q *Queue[T]) SetResult(f func(error)) { q.result = f }

// SetDropped sets what is called for every item dropped (a metric); it may
// be set at any time.
func (q *Queue[T]) SetDropped(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropped = f
}

// Put queues v and reports whether it fit; a full or closed queue drops it
// and counts the drop.
func (q *Queue[T]) Put(v T) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if !q.closed {
		select {
		case q.ch <- queueItem[T]{v: v}:
			return true
		default:
		}
	}
	q.countDrop()
	return false
}

// countDrop counts an item dropped before it reached the queue.
func (q *Queue[T]) countDrop() {
	q.drops.Add(1)
	if q.dropped != nil {
		q.dropped()
	}
}

// Dropped is how many items did not fit so far.
func (q *Queue[T]) Dropped() uint64 { return q.drops.Load() }

// Written is how many writes succeeded so far.
func (q *Queue[T]) Written() uint64 { return q.written.Load() }

// Do runs ctl on the worker after what is queued now, waiting at most wait
// for it to be queued and run; it reports whether it ran in time.
func (q *Queue[T]) Do(ctl func(), wait time.Duration) bool {
	it := queueItem[T]{ctl: ctl, done: make(chan struct{})}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	q.mu.RLock()
	if q.closed {
		q.mu.RUnlock()
		return false
	}
	select {
	case q.ch <- it:
		q.mu.RUnlock()
	case <-timer.C:
		q.mu.RUnlock()
		return false
	}
	select {
	case <-it.done:
		return true
	case <-timer.C:
		return false
	}
}

// Flush waits at most wait for everything queued now to be written.
func (q *Queue[T]) Flush(wait time.Duration) bool { return q.Do(func() {}, wait) }

// Close stops taking items and waits at most wait for the queued ones to be
// written; it reports whether they were. A worker stuck in a write (a pipe
// nobody reads) is left behind: the process is about to exit.
func (q *Queue[T]) Close(wait time.Duration) bool {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return true
	case <-time.After(wait):
		return false
	}
}

// Pending is how many items wait in the queue.
func (q *Queue[T]) Pending() int { return len(q.ch) }

// AsyncWriter is an io.Writer that queues every Write (a copy of it) for a
// goroutine that writes it to w: slog's handlers write each log line with
// one Write, so a line is never split, and a log sink that stalls (a pipe
// nobody reads, a journal that blocks) drops lines instead of stalling the
// loop.
type AsyncWriter struct {
	q *Queue[[]byte]
}

// DefaultLogQueue is how many log lines may wait for a stalled sink.
const DefaultLogQueue = 1024

// NewAsyncWriter writes to w through a queue of size lines (0:
// DefaultLogQueue).
func NewAsyncWriter(w io.Writer, size int) *AsyncWriter {
	if size <= 0 {
		size = DefaultLogQueue
	}
	return &AsyncWriter{q: NewQueue(size, func(b []byte) error {
		_, err := w.Write(b)
		return err
	})}
}

// Write implements io.Writer; it never blocks and never fails (a line that
// does not fit is dropped and counted).
func (w *AsyncWriter) Write(p []byte) (int, error) {
	w.q.Put(append([]byte(nil), p...))
	return len(p), nil
}

// OnDrop sets what is called for every dropped line (a metric).
func (w *AsyncWriter) OnDrop(f func()) { w.q.SetDropped(f) }

// Dropped is how many lines were dropped.
func (w *AsyncWriter) Dropped() uint64 { return w.q.Dropped() }

// Close writes what is queued, waiting at most wait.
func (w *AsyncWriter) Close(wait time.Duration) bool { return w.q.Close(wait) }
