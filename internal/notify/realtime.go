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

// sleepOn sleeps d in the kernel on the calling thread (clock_nanosleep),
// not on a Go timer: a timer fires on whichever thread runs Go's scheduler,
// at the ordinary priority, and would hand a real-time thread its wake-up
// only as late as that thread gets a CPU.
func sleepOn(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, &ts)
		if err != unix.EINTR {
			return
		}
	}
}
