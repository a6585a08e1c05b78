package notify

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/host"
)

// PSI trigger limits. The kernel accepts windows of 500 ms … 10 s, but when
// the writer is not privileged for the pressure file (as on our hosts, even
// for root: see TESTING-REAL.md) only multiples of 2 s are accepted.
const (
	psiMinWindow        = 500 * time.Millisecond
	psiMaxWindow        = 10 * time.Second
	PSIUnprivilegedUnit = 2 * time.Second
)

// Default PSI trigger: 150 ms of "some" stall within a 2 s window, the
// smallest window an unprivileged trigger may use.
const (
	DefaultPSIStall  = 150 * time.Millisecond
	DefaultPSIWindow = 2 * time.Second
)

// PSITrigger is a pressure-stall trigger on a pressure file
// (/proc/pressure/memory or a cgroup v2 memory.pressure): the kernel wakes
// poll(POLLPRI) when tasks stalled for Stall within Window.
type PSITrigger struct {
	path  string
	p     *Poller
	mu    sync.Mutex
	fd    int
	token int32
}

// ValidatePSI checks a stall/window pair before it reaches the kernel, so a
// config error names the values rather than surfacing as EINVAL.
func ValidatePSI(stall, window time.Duration) error {
	if window < psiMinWindow || window > psiMaxWindow {
		return fmt.Errorf("psi window %s: must be between %s and %s", window, psiMinWindow, psiMaxWindow)
	}
	if window%PSIUnprivilegedUnit != 0 {
		return fmt.Errorf("psi window %s: must be a multiple of %s (the kernel refuses other windows for unprivileged triggers)", window, PSIUnprivilegedUnit)
	}
	if stall <= 0 || stall > window {
		return fmt.Errorf("psi stall %s: must be > 0 and at most the window %s", stall, window)
	}
	return nil
}

// NewPSITrigger writes "some <stall µs> <window µs>" to the pressure file at
// path and watches it. Every trigger event wakes sink.
func NewPSITrigger(p *Poller, sink Sink, path string, stall, window time.Duration) (*PSITrigger, error) {
	if err := ValidatePSI(stall, window); err != nil {
		return nil, err
	}
	fd, err := host.OpenPressureTrigger(path, stall, window)
	if err != nil {
		return nil, fmt.Errorf("psi trigger: %w", err)
	}
	t := &PSITrigger{path: path, p: p, fd: fd}
	src := "psi " + path
	tok, err := p.add(fd, unix.EPOLLPRI, func(ev uint32) {
		if ev&unix.EPOLLERR != 0 {
			// The pressure file went away (cgroup removed): stop watching
			// rather than spin on a level-triggered error.
			go t.Close()
			return
		}
		sink.Wake(Wake{Source: src, At: time.Now()})
	})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	t.token = tok
	return t, nil
}

// Path is the pressure file watched.
func (t *PSITrigger) Path() string { return t.path }

// Close removes the trigger.
func (t *PSITrigger) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return nil
	}
	t.p.remove(t.fd, t.token)
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}
