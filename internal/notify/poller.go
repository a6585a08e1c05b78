// Package notify turns kernel notifications into wake-ups for the eviction
// loop: cgroup v1 memcg usage thresholds (cgroup.event_control + eventfd), PSI
// triggers, memory.events changes on cgroup v2, and an adaptive fast poll.
//
// A wake-up only says "run the loop now"; it never decides anything, exactly as
// the kubelet's threshold handler only calls synchronize. A wake-up that is
// missed costs latency, never correctness, because the periodic timer runs too.
//
// All descriptors are watched by one epoll instance (Poller) that is closed
// through an eventfd, so Close never races a blocked epoll_wait.
package notify

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Wake is one wake-up: which notifier fired and when it was seen.
type Wake struct {
	Source string    // e.g. "memcg-threshold memory.available", "psi /proc/pressure/memory"
	At     time.Time // when the poller saw the event
	// Crossed names the threshold (policy.Threshold's String) that this
	// wake-up saw crossed towards met, when its source watches thresholds
	// the agent acts on at once (hard ones) and read the value that says
	// so: a memcg threshold, the fast poll; "" otherwise. The agent stops
	// the growth of the victim it has ready on such a wake-up, before the
	// synchronize (agent/earlystop.go).
	Crossed string
}

// Sink receives wake-ups. It must not block; Waker is the usual Sink.
type Sink interface {
	Wake(Wake)
}

// Waker is a Sink that coalesces wake-ups into a buffered channel: when the
// loop is busy, extra wake-ups are dropped because the next run sees the same
// kernel state anyway.
type Waker struct {
	ch   chan Wake
	hook atomic.Pointer[func(Wake)]
}

// wakeBuffer is how many wake-ups may queue while the loop is busy. A handful
// keeps the sources of a burst visible in the log without ever blocking a
// notifier.
const wakeBuffer = 8

// NewWaker returns a Waker with a small buffer.
func NewWaker() *Waker { return &Waker{ch: make(chan Wake, wakeBuffer)} }

// OnWake has f called with every wake-up, on the notifier's own
// goroutine, before it is queued, even when the loop is busy (nil: none).
// f must be quick and safe to call from several goroutines at once. The
// agent's early growth stop runs there (agent/earlystop.go).
func (w *Waker) OnWake(f func(Wake)) {
	if f == nil {
		w.hook.Store(nil)
		return
	}
	w.hook.Store(&f)
}

// Wake calls the OnWake hook, then queues x unless the buffer is full.
func (w *Waker) Wake(x Wake) {
	if f := w.hook.Load(); f != nil {
		(*f)(x)
	}
	select {
	case w.ch <- x:
	default:
	}
}

// C is the channel the loop selects on.
func (w *Waker) C() <-chan Wake { return w.ch }

// SinkFunc adapts a function to Sink.
type SinkFunc func(Wake)

// Wake calls f.
func (f SinkFunc) Wake(w Wake) { f(w) }

// ErrClosed is returned by Poller methods after Close.
var ErrClosed = errors.New("notify: poller closed")

// handler is called on the poller goroutine with the epoll event mask.
type handler func(events uint32)

// Poller is one epoll instance with its own goroutine. Registrations are
// keyed by a token (not by fd number) so that an event still in flight for a
// descriptor that was removed and closed is never delivered to a new
// descriptor that reused the number.
type Poller struct {
	epfd    int
	closefd int // eventfd: writing to it stops the loop

	mu       sync.Mutex
	handlers map[int32]handler
	next     int32
	closed   bool

	done    chan struct{}
	err     error         // the error that stopped the loop, if any
	started chan struct{} // closed once the loop's thread has its priority
	rtErr   error         // why the loop's thread is not real-time, when it was asked to be
}

// closeToken identifies the close eventfd in the epoll set.
const closeToken int32 = 0

// maxEvents is how many events one epoll_wait returns; more stay queued for
// the next call, so the number only bounds batching.
const maxEvents = 16

// NewPoller creates the epoll instance and starts its goroutine, at the
// ordinary priority.
func NewPoller() (*Poller, error) { return NewPollerAt(0) }

// NewPollerAt is NewPoller at SCHED_FIFO prio when prio > 0
// (RealtimePriority): the goroutine then has an OS thread of its own, on
// which the handlers, the Waker's OnWake hook among them, run. Where the
// kernel refuses the priority (ProbeRealtime) the thread runs at the
// ordinary one and RealtimeErr says why.
func NewPollerAt(prio int) (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	closefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, closefd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: closeToken}); err != nil {
		unix.Close(closefd)
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll_ctl add close eventfd: %w", err)
	}
	p := &Poller{epfd: epfd, closefd: closefd, handlers: map[int32]handler{}, next: 1, done: make(chan struct{}), started: make(chan struct{})}
	go p.loop(prio)
	<-p.started
	return p, nil
}

// add registers fd for events and returns the token to remove it with.
func (p *Poller) add(fd int, events uint32, h handler) (int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	tok := p.next
	p.next++
	if p.next <= 0 { // wrapped after 2^31 registrations; skip the close token
		p.next = 1
	}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: tok}); err != nil {
		return 0, fmt.Errorf("epoll_ctl add fd %d: %w", fd, err)
	}
	p.handlers[tok] = h
	return tok, nil
}

// remove unregisters fd (registered under tok). The caller closes fd after.
func (p *Poller) remove(fd int, tok int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.handlers, tok)
	if !p.closed {
		// ENOENT/EBADF only mean the fd is already gone from the set.
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

func (p *Poller) loop(prio int) {
	defer close(p.done)
	if prio > 0 {
		// Ends locked (the loop returns only when the poller ends): its
		// thread, real-time or not, ends with it.
		p.rtErr = realtime(prio)
		defer ordinary()
	}
	close(p.started)
	events := make([]unix.EpollEvent, maxEvents)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue // a signal is not a reason to stop watching
			}
			p.mu.Lock()
			p.err = fmt.Errorf("epoll_wait: %w", err)
			p.mu.Unlock()
			return
		}
		for i := 0; i < n; i++ {
			tok := events[i].Fd
			if tok == closeToken {
				return
			}
			p.mu.Lock()
			h := p.handlers[tok]
			p.mu.Unlock()
			if h != nil {
				h(events[i].Events)
			}
		}
	}
}

// RealtimeErr says why the poller's thread runs at the ordinary priority
// although NewPollerAt asked for a real-time one (nil otherwise).
func (p *Poller) RealtimeErr() error { return p.rtErr }

// Err returns the error that stopped the poller's loop, or nil.
func (p *Poller) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close stops the loop and closes the epoll and close descriptors. Notifiers
// registered on the poller must be closed by their owners (before or after).
func (p *Poller) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	var one [8]byte
	one[0] = 1 // any non-zero uint64 wakes, whatever the byte order
	if _, err := writeRetry(p.closefd, one[:]); err != nil {
		return fmt.Errorf("wake poller for close: %w", err)
	}
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	err := errors.Join(unix.Close(p.epfd), unix.Close(p.closefd))
	p.handlers = nil
	return err
}

// writeRetry writes b to fd, retrying EINTR.
func writeRetry(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err
	}
}

// drainEventfd reads an eventfd's counter so that it stops being readable.
// The descriptor is non-blocking, so a spurious event costs one EAGAIN.
func drainEventfd(fd int) {
	var buf [8]byte
	for {
		_, err := unix.Read(fd, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return
	}
}
