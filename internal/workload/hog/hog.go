// Package hog is a scripted memory hog: the evictd binary (or a test binary)
// re-executes itself with EnvScript set, and the child joins the cgroups named
// in EnvCgroups, then follows the script. The demo and the real-cgroup tests
// use it as their workloads.
//
// A script is a list of steps separated by ";":
//
//	alloc 64Mi         allocate and touch 64 MiB at once
//	ramp 256Mi 100Mi   allocate 256 MiB at 100 MiB per second
//	sleep 2s           wait
//	hold               wait forever (until killed)
//	crash              exit with status 3 (a hog that dies by itself)
//	ignore-term        ignore SIGTERM from now on (forces the SIGKILL path)
//	forkloop           keep starting child hogs that hold, forever
//	free               release everything allocated so far
//	threads 4          alloc and ramp steps after it touch memory from 4
//	                   threads at once (each a quarter of the size, at a
//	                   quarter of the rate): "threads 2; alloc 4Gi" is a
//	                   two-thread allocator at the machine's full speed
//	await FILE         wait until FILE exists (a test's gate)
//	cache /path 64Mi   write a 64 MiB file, sync it, and read it twice: 64 MiB
//	                   of clean, active page cache charged to the hog's cgroup
//	                   (reclaimable only on a filesystem with a device)
//	leader-exit        the main thread exits alone (SYS_exit), leaving a
//	                   zombie thread-group leader while the rest of the
//	                   script goes on in another thread, as a process looks
//	                   during a slow exit or after pthread_exit in main
//
// Memory is anonymous mmap touched page by page, so it is charged at once
// and is invisible to the Go garbage collector.
package hog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/host"
)

// Environment variables that turn a re-executed binary into a hog.
const (
	EnvScript  = "EVICTD_HOG_SCRIPT"
	EnvCgroups = "EVICTD_HOG_CGROUPS" // ":"-separated cgroup directories to join first
	// EnvLifeline names the descriptor of the read end of a pipe whose
	// write end only the starting process holds: EOF on it means that
	// process has exited, and the hog exits too.
	EnvLifeline = "EVICTD_HOG_LIFELINE"
)

// lifelineFD is where the child finds the lifeline's read end: the first
// of exec.Cmd.ExtraFiles.
const lifelineFD = 3

// lifeline is this process's pipe: it holds the write end until it exits,
// so every hog it started reads EOF exactly when the process (not one of
// its threads) is gone.
var lifeline struct {
	once sync.Once
	r, w *os.File
	err  error
}

// Step is one parsed script step.
type Step struct {
	Op    string // alloc, ramp, sleep, hold, crash, ignore-term, forkloop, free, threads, leader-exit, await, cache
	Bytes int64
	N     int   // threads
	Rate  int64 // bytes per second (ramp)
	Dur   time.Duration
	Path  string // await, cache
}

// ParseScript parses a script; errors name the step and the value.
func ParseScript(s string) ([]Step, error) {
	var steps []Step
	for i, raw := range strings.Split(s, ";") {
		f := strings.Fields(raw)
		if len(f) == 0 {
			continue
		}
		st := Step{Op: f[0]}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("hog script step %d %q: %s", i+1, strings.TrimSpace(raw), fmt.Sprintf(format, a...))
		}
		want := map[string]int{"alloc": 1, "ramp": 2, "sleep": 1, "hold": 0, "crash": 0, "ignore-term": 0, "forkloop": 0, "free": 0, "threads": 1, "leader-exit": 0, "await": 1, "cache": 2}
		n, ok := want[st.Op]
		if !ok {
			return nil, bad("unknown step")
		}
		if len(f)-1 != n {
			return nil, bad("want %d argument(s), got %d", n, len(f)-1)
		}
		switch st.Op {
		case "alloc", "ramp":
			q, err := resource.ParseQuantity(f[1])
			if err != nil || q.Value() <= 0 {
				return nil, bad("size %q is not a positive quantity", f[1])
			}
			st.Bytes = q.Value()
			if st.Op == "ramp" {
				r, err := resource.ParseQuantity(f[2])
				if err != nil || r.Value() <= 0 {
					return nil, bad("rate %q is not a positive quantity per second", f[2])
				}
				st.Rate = r.Value()
			}
		case "await":
			st.Path = f[1]
		case "cache":
			if !filepath.IsAbs(f[1]) {
				return nil, bad("path %q is not absolute", f[1])
			}
			q, err := resource.ParseQuantity(f[2])
			if err != nil || q.Value() <= 0 {
				return nil, bad("size %q is not a positive quantity", f[2])
			}
			st.Path, st.Bytes = f[1], q.Value()
		case "threads":
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 || n > maxThreads {
				return nil, bad("thread count %q is not between 1 and %d", f[1], maxThreads)
			}
			st.N = n
		case "sleep":
			d, err := time.ParseDuration(f[1])
			if err != nil || d < 0 {
				return nil, bad("duration %q is not a non-negative duration", f[1])
			}
			st.Dur = d
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// Command returns a command that runs exe as a hog in the given cgroup
// directories. exe is usually os.Executable(). The hog exits when the
// process that started it exits, however it ends (a crash or SIGKILL
// included), so a demo or test that dies leaves no hog behind.
//
// That is done with a pipe, not Pdeathsig: the kernel sends the parent-death
// signal when the *thread* that forked the child exits, and the Go runtime
// ends a thread whenever a goroutine locked to it returns (go.dev/issue/27505).
// The benchmark's real-time watcher did exactly that, and its hogs were
// SIGKILLed mid-trial with no OOM kill and no eviction to explain it.
func Command(exe, script string, cgroupDirs ...string) *exec.Cmd {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvScript+"="+script, EnvCgroups+"="+strings.Join(cgroupDirs, ":"))
	lifeline.once.Do(func() { lifeline.r, lifeline.w, lifeline.err = os.Pipe() })
	if lifeline.err == nil {
		// os.Pipe's descriptors are close-on-exec: the child gets only the
		// read end, as fd 3, and no other child gets either end.
		cmd.ExtraFiles = []*os.File{lifeline.r}
		cmd.Env = append(cmd.Env, EnvLifeline+"="+strconv.Itoa(lifelineFD))
	}
	// Its own process group, so that a Ctrl-C on the terminal reaches the
	// parent only and the parent decides how the hogs end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// watchLifeline exits the hog once the lifeline's write end is closed,
// that is, once the process that started it has exited. It returns the
// lifeline, for the hog's own children (forkloop) to watch too.
func watchLifeline(fd string) *os.File {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "hog: %s=%q is not a descriptor\n", EnvLifeline, fd)
		os.Exit(2)
	}
	f := os.NewFile(uintptr(n), "lifeline")
	go func() {
		var b [1]byte
		for {
			// Nothing is ever written: a read returns only at EOF, or
			// with an error if the descriptor is not a pipe after all.
			if _, err := f.Read(b[:]); err != nil {
				fmt.Fprintln(os.Stderr, "hog: the process that started me has exited; exiting")
				os.Exit(4)
			}
		}
	}()
	return f
}

// resetNice puts every thread of the hog at the ordinary scheduling
// policy and nice 0: a hog is an ordinary workload, whatever the priority
// of the agent or benchmark that started it (threads inherit their
// creator's policy and nice value).
func resetNice() {
	tids, err := host.ReadTaskIDs("/proc", "self")
	if err != nil {
		return
	}
	for _, tid := range tids {
		unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
		unix.Setpriority(unix.PRIO_PROCESS, tid, 0)
	}
}

// MaybeRun runs the hog and exits if EnvScript is set; otherwise it returns.
// Call it first thing in main (or TestMain).
func MaybeRun() {
	script, ok := os.LookupEnv(EnvScript)
	if !ok {
		return
	}
	resetNice()
	var life *os.File
	if fd, ok := os.LookupEnv(EnvLifeline); ok {
		life = watchLifeline(fd)
	}
	if err := run(script, os.Getenv(EnvCgroups), life); err != nil {
		fmt.Fprintln(os.Stderr, "hog:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

const pageSize = 4096

// maxThreads bounds the threads step: more would only measure the
// scheduler of a small test machine.
const maxThreads = 64

// init keeps a hog's main goroutine on the process's main thread, so that
// leader-exit ends the thread-group leader and not some other thread.
func init() {
	if _, ok := os.LookupEnv(EnvScript); ok {
		runtime.LockOSThread()
	}
}

func run(script, cgroups string, life *os.File) error {
	steps, err := ParseScript(script)
	if err != nil {
		return err
	}
	for _, dir := range strings.Split(cgroups, ":") {
		if dir == "" {
			continue
		}
		// 0 moves the writing process (its whole thread group).
		if err := cgroup.WriteCgroupProcs(dir, 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	spareThreads(spareOSThreads)
	h := &hogState{life: life}
	return h.run(steps)
}

// spareOSThreads is how many idle OS threads a hog keeps in the Go
// runtime's pool before its script runs. A hog held at its cgroup's memory
// limit cannot create a thread: the kernel charges the new thread's stack
// to the cgroup (v1 fails the clone with ENOMEM at the limit), and the Go
// runtime then dies ("failed to create new OS thread", errno 12), which a
// test took for the hog's exit on SIGTERM (TestHoldMemory at load 3, 1 run
// of 12). The runtime makes threads on demand (the locked main goroutine
// hands its P to another thread whenever it blocks) and keeps idle ones for
// good; with the script's allocating threads, four spares were never used
// up. A real Go workload held so can die the same way (docs/agent.md).
const spareOSThreads = 4

// spareThreads leaves n idle OS threads in the runtime's pool.
func spareThreads(n int) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			runtime.LockOSThread() // each on a thread of its own, all at once
			wg.Done()
			<-release
			runtime.UnlockOSThread() // back to the pool, not ended
		}()
	}
	wg.Wait()
	close(release)
}

// hogState is a running script: what it has allocated, and how many
// threads its allocations use.
type hogState struct {
	life    *os.File
	mu      sync.Mutex
	maps    [][]byte
	threads int
}

// parallel runs f(i) on each of the script's threads (at least one), each
// locked to an OS thread of its own, and returns the first error.
func (h *hogState) parallel(f func(i, n int) error) error {
	n := max(h.threads, 1)
	if n == 1 {
		return f(0, 1)
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			runtime.LockOSThread()
			// Unlocked at the end, its thread goes back to the pool
			// instead of ending with the goroutine (spareThreads).
			defer runtime.UnlockOSThread()
			errs <- f(i, n)
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// mapChunk bounds one mmap: under the kernel's heuristic overcommit a single
// mapping larger than the machine's memory fails, and a hog's job is to
// run into the cgroup's limit, not into mmap's.
const mapChunk = 64 << 20

func (h *hogState) touch(n int64) error {
	for n > 0 {
		c := min(n, mapChunk)
		b, err := unix.Mmap(-1, 0, int(c), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("mmap %d bytes: %w", c, err)
		}
		for i := 0; i < len(b); i += pageSize {
			b[i] = 1
		}
		h.mu.Lock()
		h.maps = append(h.maps, b)
		h.mu.Unlock()
		n -= c
	}
	return nil
}

// share is thread i's part of total bytes (the first threads take the
// remainder's pages).
func share(total int64, i, n int) int64 {
	pages := total / pageSize
	part := pages / int64(n)
	if int64(i) < pages%int64(n) {
		part++
	}
	if i == n-1 {
		part = part*pageSize + total%pageSize
		return part
	}
	return part * pageSize
}

func (h *hogState) run(steps []Step) error {
	for i, st := range steps {
		switch st.Op {
		case "alloc":
			if err := h.parallel(func(i, n int) error { return h.touch(share(st.Bytes, i, n)) }); err != nil {
				return err
			}
		case "ramp":
			err := h.parallel(func(i, n int) error {
				return h.ramp(share(st.Bytes, i, n), max(st.Rate/int64(n), 1))
			})
			if err != nil {
				return err
			}
		case "threads":
			h.threads = st.N
		case "cache":
			if err := cacheFile(st.Path, st.Bytes); err != nil {
				return err
			}
		case "leader-exit":
			// The rest of the script runs on another thread; this one,
			// the thread-group leader, exits alone. syscall.Syscall, not
			// RawSyscall: the runtime then sees the goroutine in a system
			// call (which never returns) and does not wait for it to stop
			// at a garbage collection.
			rest := steps[i+1:]
			go func() {
				runtime.LockOSThread()
				if err := h.run(rest); err != nil {
					fmt.Fprintln(os.Stderr, "hog:", err)
					os.Exit(2)
				}
				os.Exit(0)
			}()
			syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0)
		case "sleep":
			time.Sleep(st.Dur)
		case "await":
			for {
				if _, err := os.Stat(st.Path); err == nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
		case "hold":
			for { // a sleeping timer, not select{}: the runtime calls that a deadlock
				time.Sleep(time.Hour)
			}
		case "crash":
			os.Exit(3)
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
		case "free":
			h.mu.Lock()
			for _, b := range h.maps {
				unix.Munmap(b)
			}
			h.maps = nil
			h.mu.Unlock()
		case "forkloop":
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			for {
				c := exec.Command(exe)
				c.Env = append(os.Environ(), EnvScript+"=hold", EnvCgroups+"=")
				if h.life != nil {
					c.ExtraFiles = []*os.File{h.life} // the same fd number, as EnvLifeline says
				}
				if err := c.Start(); err != nil {
					time.Sleep(time.Millisecond) // killed or out of pids: keep trying
					continue
				}
				go c.Wait()
			}
		}
	}
	return nil
}

// ramp allocates total bytes at rate bytes per second on this thread, in
// 10 ms slices: smooth enough for the fast poll to see a ramp.
func (h *hogState) ramp(total, rate int64) error {
	const slice = 10 * time.Millisecond
	chunk := rate / int64(time.Second/slice)
	if chunk < pageSize {
		chunk = pageSize
	}
	start := time.Now()
	for done := int64(0); done < total; {
		n := min(chunk, total-done)
		if err := h.touch(n); err != nil {
			return err
		}
		done += n
		due := start.Add(time.Duration(float64(done) / float64(rate) * float64(time.Second)))
		time.Sleep(time.Until(due))
	}
	return nil
}

// cacheFile writes n bytes to path, syncs them (clean pages can be dropped
// without writeback) and reads the file twice: the second access moves the
// pages to the active file list, the part of the page cache the kubelet
// counts in the working set (kubernetes#43916).
func cacheFile(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i) // not all zero: a filesystem may not store zero pages
	}
	for done := int64(0); done < n; {
		m, err := f.Write(buf[:min(int64(len(buf)), n-done)])
		if err != nil {
			return fmt.Errorf("cache: writing %s: %w", path, err)
		}
		done += int64(m)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	for pass := 0; pass < 2; pass++ {
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		for {
			_, err := f.Read(buf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("cache: reading %s: %w", path, err)
			}
		}
	}
	return nil
}
