package trial

import (
	"os"
	"os/exec"
	"time"

	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// Hog is a memory hog running in one of the trial's cgroups.
type Hog struct {
	Cmd    *exec.Cmd
	done   chan struct{}
	exited time.Time
	stderr syncbuf.Buffer
}

// StartHog starts Options.Exe as a hog following script (hog.ParseScript)
// in cgroup c. Close kills it and waits for it.
func (t *Trial) StartHog(script string, c sandbox.Cgroup) (*Hog, error) {
	h := &Hog{Cmd: hog.Command(t.o.Exe, script, c.Dirs()...), done: make(chan struct{})}
	h.Cmd.Stderr = &h.stderr
	if err := h.Cmd.Start(); err != nil {
		return nil, err
	}
	t.hogs = append(t.hogs, h)
	go func() {
		h.Cmd.Wait()
		h.exited = time.Now()
		close(h.done)
	}()
	return h, nil
}

// Done is closed once the hog has exited and been waited for.
func (h *Hog) Done() <-chan struct{} { return h.done }

// ExitedAt is when the wait for the hog returned (once Done is closed).
func (h *Hog) ExitedAt() time.Time { <-h.done; return h.exited }

// State is how the hog ended (once Done is closed).
func (h *Hog) State() *os.ProcessState { <-h.done; return h.Cmd.ProcessState }

// Stderr is what the hog has written to its standard error so far (a
// script error, a hog that exited by itself).
func (h *Hog) Stderr() string { return h.stderr.String() }
