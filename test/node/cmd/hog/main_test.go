package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envRunMain makes the test binary run main() (the hog) instead of tests.
const envRunMain = "EVICTD_TEST_HOG_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// HOG_ON_TERM decides how the hog answers SIGTERM: killed by it, exit 0,
// or ignore it (only SIGKILL ends it).
func TestSIGTERM(t *testing.T) {
	for _, c := range []struct {
		mode string
		want string // "signal", "exit0" or "alive"
	}{{"", "signal"}, {"die", "signal"}, {"exit0", "exit0"}, {"ignore", "alive"}} {
		t.Run("HOG_ON_TERM="+c.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "alloc", "1Mi", ";", "hold")
			cmd.Env = append(os.Environ(), envRunMain+"=1", "HOG_ON_TERM="+c.mode)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			time.Sleep(300 * time.Millisecond) // the handler is set before the script starts
			cmd.Process.Signal(syscall.SIGTERM)
			var err error
			select {
			case err = <-done:
			case <-time.After(2 * time.Second):
				if c.want != "alive" {
					t.Fatalf("still running 2 s after SIGTERM")
				}
				cmd.Process.Kill()
				<-done
				return
			}
			var ee *exec.ExitError
			switch {
			case c.want == "alive":
				t.Fatalf("ended on SIGTERM (%v), want it ignored", err)
			case c.want == "exit0" && err != nil:
				t.Fatalf("SIGTERM: %v, want exit 0", err)
			case c.want == "signal" && !(errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM):
				t.Fatalf("SIGTERM: %v, want killed by the signal", err)
			}
		})
	}
}

func TestBadOnTerm(t *testing.T) {
	cmd := exec.Command(os.Args[0], "hold")
	cmd.Env = append(os.Environ(), envRunMain+"=1", "HOG_ON_TERM=later")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `HOG_ON_TERM="later": want die, exit0 or ignore`) {
		t.Fatalf("got %v, %s", err, out)
	}
}
