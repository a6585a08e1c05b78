package vmtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv names the helper a re-executed test binary runs instead of its
// tests.
const helperEnv = "EVICTD_VMTEST_HELPER"

// readyLine is what a helper prints once it has done its setup (e.g. touched
// all its memory).
const readyLine = "ready"

// Main replaces m.Run in a TestMain: it runs a helper when the binary was
// re-executed by StartHelper, and the tests otherwise.
func Main(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// Helpers a test can start in a cgroup:
//
//	hog <MiB> [<step MiB> <pause ms>]  maps and touches MiB of anonymous memory,
//	    step MiB at a time with a pause between steps (default: all at once),
//	    prints "ready" and then waits to be killed
//	sleep                            prints "ready" and waits to be killed
//	spin                             prints "ready" and burns CPU until killed
func runHelper(name string, args []string) int {
	switch name {
	case "hog":
		return hog(args)
	case "sleep":
		fmt.Println(readyLine)
		waitForever()
	case "spin":
		fmt.Println(readyLine)
		x := 0
		for {
			x++
		}
	}
	fmt.Fprintf(os.Stderr, "vmtest: unknown helper %q\n", name)
	return 2
}

func waitForever() {
	for {
		_ = unix.Pause()
	}
}

func hog(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "vmtest hog: usage: hog MiB [step-MiB pause-ms]")
		return 2
	}
	mib, err := strconv.Atoi(args[0])
	step, pause := mib, 0
	if err == nil && len(args) >= 3 {
		step, err = strconv.Atoi(args[1])
		if err == nil {
			pause, err = strconv.Atoi(args[2])
		}
	}
	if err != nil || mib <= 0 || step <= 0 {
		fmt.Fprintf(os.Stderr, "vmtest hog: bad arguments %q\n", args)
		return 2
	}
	const mebibyte = 1 << 20
	mem, err := unix.Mmap(-1, 0, mib*mebibyte, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmtest hog: mmap %d MiB: %v\n", mib, err)
		return 1
	}
	pageSize := os.Getpagesize()
	for off := 0; off < len(mem); off += pageSize {
		mem[off] = 1 // fault the page in: anonymous memory charged to the cgroup
		if pause > 0 && off > 0 && off%(step*mebibyte) == 0 {
			time.Sleep(time.Duration(pause) * time.Millisecond)
		}
	}
	fmt.Println(readyLine)
	waitForever()
	return 0
}

// Helper is a re-executed copy of the test binary running one of the helpers
// above inside a cgroup.
type Helper struct {
	Cmd   *exec.Cmd
	lines chan string
	done  chan struct{} // closed when the process has been waited for
	state *os.ProcessState
}

// StartHelper starts the helper name with args straight into the cgroup
// directory cg (clone3 with CLONE_INTO_CGROUP, so it never runs elsewhere).
// The test's TestMain must call Main. The helper is killed at cleanup.
func StartHelper(t testing.TB, cg, name string, args ...string) *Helper {
	t.Helper()
	h, err := startHelper(cg, name, args...)
	if err != nil {
		t.Fatalf("starting helper %s in %s: %v", name, cg, err)
	}
	t.Cleanup(func() {
		if h.Cmd.Process != nil {
			_ = h.Cmd.Process.Kill()
		}
		<-h.done
	})
	return h
}

// TryStartHelper is StartHelper that returns the error instead of failing,
// for tests that expect the start to be refused (e.g. by pids.max).
func TryStartHelper(t testing.TB, cg, name string, args ...string) (*Helper, error) {
	t.Helper()
	h, err := startHelper(cg, name, args...)
	if err == nil {
		t.Cleanup(func() {
			_ = h.Cmd.Process.Kill()
			<-h.done
		})
	}
	return h, err
}

func startHelper(cg, name string, args ...string) (*Helper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// O_PATH descriptors are refused by clone3: open the directory for reading.
	fd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &Helper{Cmd: cmd, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			default: // nobody is reading: drop rather than block the wait
			}
		}
		close(h.lines)
		_ = cmd.Wait()
		h.state = cmd.ProcessState
		close(h.done)
	}()
	return h, nil
}

// Pid is the helper's process ID.
func (h *Helper) Pid() int { return h.Cmd.Process.Pid }

// Ready waits until the helper has printed "ready", failing the test if it
// exits first or does not within limit.
func (h *Helper) Ready(t testing.TB, limit time.Duration) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				<-h.done
				t.Fatalf("helper %d exited before it was ready: %v", h.Pid(), h.state)
			}
			if strings.TrimSpace(l) == readyLine {
				return
			}
		case <-timer.C:
			t.Fatalf("helper %d not ready after %s", h.Pid(), limit)
		}
	}
}

// Wait waits for the helper to exit, failing the test after limit.
func (h *Helper) Wait(t testing.TB, limit time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-h.done:
		return h.state
	case <-time.After(limit):
		t.Fatalf("helper %d still running after %s", h.Pid(), limit)
		return nil
	}
}

// Exited reports whether the helper has exited, without waiting.
func (h *Helper) Exited() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// KilledBy reports the signal that ended a process, or 0.
func KilledBy(st *os.ProcessState) syscall.Signal {
	if st == nil {
		return 0
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// PollPri waits up to limit for POLLPRI on f: how the kernel signals a PSI
// trigger, and a change of a cgroup "events" file (after a first read).
// It reports whether the event came.
func PollPri(f *os.File, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, err
		}
		if n > 0 {
			if fds[0].Revents&unix.POLLPRI != 0 {
				return true, nil
			}
			return false, fmt.Errorf("poll: revents %#x without POLLPRI", fds[0].Revents)
		}
	}
}
