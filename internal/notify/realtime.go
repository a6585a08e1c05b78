package notify

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// RealtimePriority is the SCHED_FIFO priority the notifiers' threads ask
// for with real-time wake-ups on: the lowest real-time priority. Any
// real-time priority runs before every ordinary (SCHED_OTHER) thread the
// moment the kernel wakes it, the allocator evictd races included; the
// lowest stays below every thread that asked for real time on purpose (the
// kernel's threaded interrupt handlers run at 50).
//
// Why: the crossing's wake-up places the growth stop on the notifier's own
// thread (Waker.OnWake). At the ordinary priority that thread, woken by the
// memcg eventfd within 0.2 ms of the crossing, waited for a CPU behind the
// allocator's threads: the scheduler lets a running task finish its slice
// before a woken one of the same weight preempts it (EEVDF's run-to-parity,
// a few ms on 2 CPUs), and the wake-up p99 was 4.2 ms beside two hog
// threads (bench/latency.sh -oom, 2026-12-03) where its p50 was 0.1 ms.
const RealtimePriority = 1

// realtime locks the calling goroutine to its OS thread and, with prio > 0,
// makes that thread SCHED_FIFO at prio, reset on fork (a thread or process
// it clones starts ordinary). The goroutine must end still locked, with
// ordinary deferred: Go then ends the thread with it, so no thread of Go's
// pool keeps the policy. Go
// starts new threads from its template thread while the calling one is
// locked, so none inherits it either.
func realtime(prio int) error {
	runtime.LockOSThread()
	if prio <= 0 {
		return nil
	}
	err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO,
		Flags: unix.SCHED_FLAG_RESET_ON_FORK, Priority: uint32(prio)}, 0)
	if err != nil {
		return fmt.Errorf("sched_setattr SCHED_FIFO %d: %w", prio, err)
	}
	return nil
}

// ordinary puts the calling thread back at SCHED_NORMAL (SCHED_OTHER), which needs no
// privilege. A goroutine that called realtime defers it: a goroutine that
// ends locked ends its thread, except the process's main thread, which Go
// parks for good instead, and that one must not stay real-time.
func ordinary() {
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
}

// ProbeRealtime says whether a thread of this process may run at SCHED_FIFO
// prio: nil, or the kernel's refusal (EPERM without CAP_SYS_NICE or an
// RLIMIT_RTPRIO of prio; also with CAP_SYS_NICE in a cgroup v1 cpu cgroup
// whose cpu.rt_runtime_us is 0, as the kubelet's pod cgroups are on a
// kernel built with CONFIG_RT_GROUP_SCHED). The probe's thread ends with it.
func ProbeRealtime(prio int) error {
	errc := make(chan error, 1)
	go func() { // ends locked: the thread goes with it
		defer ordinary()
		errc <- realtime(prio)
	}()
	return <-errc
}

// waiter is a poll's sleep between reads: d, or until a kick, or until done
// is closed. At the ordinary priority it waits on a Go timer. At a
// real-time one (rt) it waits in the kernel on the calling thread, ppoll on
// an eventfd that a relay goroutine writes for a kick and for done: a Go
// timer fires on whichever thread runs Go's scheduler, at the ordinary
// priority, and would hand the real-time thread its wake-up only as late as
// that thread gets a CPU. Neither a kick nor done is in a hurry.
type waiter struct {
	done, kick <-chan struct{} // kick may be nil: none
	t          *time.Timer     // at the ordinary priority
	efd        int             // at a real-time one (-1 otherwise)
	quit       chan struct{}   // closed by close: the relay ends
	relayed    chan struct{}   // closed when the relay has ended
}

// newWaiter falls back to the timer when the eventfd cannot be made.
func newWaiter(rt bool, done, kick <-chan struct{}) *waiter {
	w := &waiter{done: done, kick: kick, efd: -1}
	if rt {
		if efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
			w.efd, w.quit, w.relayed = efd, make(chan struct{}), make(chan struct{})
			go w.relay()
			return w
		}
	}
	w.t = time.NewTimer(time.Hour)
	w.t.Stop()
	return w
}

func (w *waiter) relay() {
	defer close(w.relayed)
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	for {
		select {
		case <-w.quit:
			return
		case <-w.done:
			unix.Write(w.efd, one)
			return
		case <-w.kick:
			unix.Write(w.efd, one)
		}
	}
}

// wait waits d, or until a kick: false once done is closed.
func (w *waiter) wait(d time.Duration) bool {
	if w.t != nil {
		w.t.Reset(d)
		select {
		case <-w.done:
			return false
		case <-w.t.C:
		case <-w.kick:
			w.t.Stop() // Go 1.23 timers: a tick that fired meanwhile is dropped
		}
		return true
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	fds := []unix.PollFd{{Fd: int32(w.efd), Events: unix.POLLIN}}
	if n, _ := unix.Ppoll(fds, &ts, nil); n > 0 {
		drainEventfd(w.efd)
	} // else the time is up, or a signal came (EINTR): an early read does no harm
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// close releases the waiter, done closed or not (a watch also ends on its
// own): the relay has ended before the eventfd is closed, so no write of
// its can land on a reused descriptor.
func (w *waiter) close() {
	if w.t != nil {
		w.t.Stop()
		return
	}
	close(w.quit)
	<-w.relayed
	unix.Close(w.efd)
}
