package hog

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// envStarter turns the test binary into a process that starts one holding
// hog, prints its pid and waits to be killed.
const envStarter = "EVICTD_HOG_TEST_STARTER"

func TestMain(m *testing.M) {
	MaybeRun()
	if os.Getenv(envStarter) == "1" {
		exe, _ := os.Executable()
		cmd := Command(exe, "hold")
		if err := cmd.Start(); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		select {}
	}
	os.Exit(m.Run())
}

// The kernel's parent-death signal follows the thread that forked, and a Go
// thread ends when a goroutine locked to it returns: a hog must not die
// with that thread (it did, in 9 of 50 benchmark trials on one CPU).
func TestHogOutlivesTheThreadThatStartedIt(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan *exec.Cmd, 1)
	release := make(chan struct{})
	defer close(release)
	var start func()
	start = func() {
		runtime.LockOSThread() // never unlocked: this thread exits with the goroutine
		if unix.Gettid() == os.Getpid() {
			// The main thread is never ended, only parked: hold it
			// and try again from another thread.
			go start()
			<-release
			return
		}
		cmd := Command(exe, "hold")
		if err := cmd.Start(); err != nil {
			t.Error(err)
			started <- nil
			return
		}
		started <- cmd
	}
	go start()
	cmd := <-started
	if cmd == nil {
		return
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	select {
	case <-done:
		t.Fatalf("the hog ended when the thread that started it did: %v", waitErr)
	case <-time.After(500 * time.Millisecond):
	}
}

// A hog ends with the process that started it, even when that process is
// SIGKILLed and cleans nothing up.
func TestHogExitsWhenItsStarterDies(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starter := exec.Command(exe, "-test.run=^$")
	starter.Env = append(os.Environ(), envStarter+"=1")
	out, err := starter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		starter.Process.Kill()
		starter.Wait()
		t.Fatalf("the starter printed no hog pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if !cgrouptest.Alive(pid) {
		t.Fatalf("hog %d is not running while its starter is", pid)
	}
	starter.Process.Kill()
	var ee *exec.ExitError
	if err := starter.Wait(); !errors.As(err, &ee) {
		t.Fatalf("starter: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cgrouptest.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("hog %d still runs 10 s after its starter was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// threads and leader-exit do what they say on a real process: the memory
// is touched from four threads, then the thread-group leader is a zombie
// while the other threads hold the memory.
func TestLeaderExit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := Command(exe, "threads 4; alloc 32Mi; leader-exit; hold")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader never became a zombie: %s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads left after leader-exit: %d (%v); want the leader and more", len(tasks), err)
	}
	// The process (its live threads) still holds the 32 MiB: status of a
	// live thread, since the zombie leader's own shows no memory.
	for _, e := range tasks {
		if e.Name() == strconv.Itoa(pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				if kb, _ := strconv.Atoi(f[1]); kb < 32<<10 {
					t.Fatalf("live thread %s: VmRSS %s kB, want ≥ 32 MiB", e.Name(), f[1])
				}
				return
			}
		}
	}
	t.Fatal("no live thread reported VmRSS")
}
