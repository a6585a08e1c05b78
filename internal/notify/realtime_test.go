package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// fifoThreads counts this process's threads whose policy is SCHED_FIFO
// (/proc/self/task/<tid>/stat, field 41).
func fifoThreads(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "stat"))
		if err != nil {
			continue // the thread ended between the listing and the read
		}
		// The command, field 2, may hold spaces: count from its closing ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 38 && f[38] == fmt.Sprint(unix.SCHED_FIFO) { // field 41 is f[41-3]
			n++
		}
	}
	return n
}

// waitFIFOThreads waits for the count of SCHED_FIFO threads to become want:
// a thread ends shortly after its goroutine returns, not at once.
func waitFIFOThreads(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fifoThreads(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("SCHED_FIFO threads: %d, want %d", fifoThreads(t), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPollerRealtime: the handlers run on a SCHED_FIFO thread of the
// poller's own, and no thread keeps the policy once the poller ends (the
// thread ends, or, when it was the main thread, which Go parks instead of
// ending, goes back to SCHED_OTHER: seen in the VM tier's one-CPU guest).
func TestPollerRealtime(t *testing.T) {
	needRoot(t)
	waitFIFOThreads(t, 0)
	p, err := NewPollerAt(RealtimePriority)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RealtimeErr(); err != nil {
		// Root in a cpu cgroup with real-time runtime (this machine's
		// cpu:/ has 950 ms of 1 s): the kernel has no reason to refuse.
		t.Fatalf("real-time poller refused: %v", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	policy := make(chan int, 1)
	tok, err := p.add(efd, unix.EPOLLIN, func(uint32) {
		drainEventfd(efd)
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			policy <- -1
			return
		}
		policy <- int(a.Policy)
	})
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	select {
	case got := <-policy:
		if got != unix.SCHED_FIFO {
			t.Fatalf("handler's thread policy %d, want SCHED_FIFO (%d)", got, unix.SCHED_FIFO)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("eventfd write not delivered")
	}
	if n := fifoThreads(t); n != 1 {
		t.Fatalf("SCHED_FIFO threads with the poller running: %d, want 1", n)
	}
	p.remove(efd, tok)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitFIFOThreads(t, 0)
}

// TestRealtimeRefusedWithoutRTRuntime: in a cgroup v1 cpu cgroup whose
// cpu.rt_runtime_us is 0, as the kubelet's pod cgroups are, the kernel
// refuses SCHED_FIFO even to root, and the refusal comes back as an error
// (what --realtime-wakeups=auto falls back on, and =on fails the start on).
func TestRealtimeRefusedWithoutRTRuntime(t *testing.T) {
	needRoot(t)
	cpu := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(filepath.Join(cpu, "cpu.rt_runtime_us")); err != nil {
		t.Skipf("no cgroup v1 cpu controller with real-time group scheduling (CONFIG_RT_GROUP_SCHED) at %s: %v", cpu, err)
	}
	dir := cgrouptest.Mkdirs(t, cpu, cgrouptest.UniqueName(t))
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.rt_runtime_us")); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("a new cpu cgroup's cpu.rt_runtime_us: %q, %v; want 0", b, err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // ends locked: the thread, moved, goes with it
		tid := unix.Gettid()
		if err := cgroup.WriteTasks(dir, tid); err != nil {
			errc <- fmt.Errorf("move thread: %w", err)
			return
		}
		rtErr := realtime(RealtimePriority)
		// Back to the root before the thread ends, so the cgroup can go.
		if err := cgroup.WriteTasks(cpu, tid); err != nil {
			errc <- fmt.Errorf("move thread back: %w", err)
			return
		}
		errc <- rtErr
	}()
	err := <-errc
	if err == nil {
		t.Fatal("SCHED_FIFO granted in a cpu cgroup without real-time runtime")
	}
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("refusal: %v, want EPERM", err)
	}
}

// TestFastPollRealtime: at a real-time priority the poll reads (and wakes
// the sink) on a SCHED_FIFO thread, sleeping in the kernel; a Rebase still
// cuts its sleep short and the end of its context still ends it, and no
// thread keeps the policy afterwards.
func TestFastPollRealtime(t *testing.T) {
	needRoot(t)
	if err := ProbeRealtime(RealtimePriority); err != nil {
		t.Fatalf("real-time refused to root in a cpu cgroup with real-time runtime: %v", err)
	}
	waitFIFOThreads(t, 0)
	policies := make(chan int, 16)
	f := &FastPoll{Min: time.Hour, Max: time.Hour, Sink: NewWaker(), Priority: RealtimePriority,
		Headroom: func() ([]int64, error) {
			a, err := unix.SchedGetAttr(0, 0)
			if err != nil {
				return nil, err
			}
			policies <- int(a.Policy)
			return []int64{1 << 40}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() { f.Run(ctx); close(ended) }()
	read := func(what string) {
		t.Helper()
		select {
		case p := <-policies:
			if p != unix.SCHED_FIFO {
				t.Fatalf("%s: the poll's thread policy %d, want SCHED_FIFO (%d)", what, p, unix.SCHED_FIFO)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no read within 5 s (the poll sleeps an hour)", what)
		}
	}
	read("the first read")
	f.Rebase([]int64{1 << 40}, nil)
	read("the read a Rebase asks for")
	cancel()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5 s after its context ended")
	}
	waitFIFOThreads(t, 0)
}
