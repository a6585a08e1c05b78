package agent

import (
	"sync"
	"time"
)

// latestFile writes one file off the eviction loop, the newest content
// winning: content handed over while an older one is being written replaces
// the one waiting, so a slow disk costs writes, never a synchronize. The
// state file and the growth stops file are written this way.
type latestFile struct {
	// write writes b (nil: removes the file). result, when set, is told
	// each write's outcome, and whether newer content is already waiting.
	write  func(b []byte) error
	result func(err error, newer bool)

	mu      sync.Mutex
	next    []byte // waiting to be written (with pending)
	pending bool
	busy    bool // a write runs
	idle    *sync.Cond
	wake    chan struct{}
	closed  bool
	done    chan struct{}
}

func newLatestFile(write func([]byte) error, result func(error, bool)) *latestFile {
	l := &latestFile{write: write, result: result, wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.idle = sync.NewCond(&l.mu)
	go l.run()
	return l
}

// set hands b over to be written (nil: the file is to be removed).
func (l *latestFile) set(b []byte) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.next, l.pending = b, true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *latestFile) run() {
	defer close(l.done)
	for range l.wake {
		l.mu.Lock()
		b, todo := l.next, l.pending
		l.next, l.pending, l.busy = nil, false, todo
		l.mu.Unlock()
		if !todo {
			continue
		}
		err := l.write(b)
		// The outcome is told before the write counts as done, so that
		// what flush waits for includes it (its log line).
		if l.result != nil {
			l.mu.Lock()
			newer := l.pending
			l.mu.Unlock()
			l.result(err, newer)
		}
		l.mu.Lock()
		l.busy = false
		l.idle.Broadcast()
		l.mu.Unlock()
	}
}

// flush waits at most wait for what was handed over to be written.
func (l *latestFile) flush(wait time.Duration) bool {
	done := make(chan struct{})
	go func() {
		l.mu.Lock()
		for l.pending || l.busy {
			l.idle.Wait()
		}
		l.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// close writes what is waiting and stops the writer.
func (l *latestFile) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	close(l.wake)
	<-l.done
}
