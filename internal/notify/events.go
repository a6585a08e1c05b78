package notify

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup"
	v2 "github.com/evictd/evictd/internal/cgroup/v2"
)

// EventsWatch watches a cgroup v2 memory.events file with poll(POLLPRI): the
// kernel marks the file changed whenever a counter moves. It wakes the sink
// when high, max, oom or oom_kill increase.
type EventsWatch struct {
	path  string
	p     *Poller
	mu    sync.Mutex
	fd    int
	token int32
	last  v2.MemoryEvents
}

// NewEventsWatch opens path (a memory.events file) and watches it.
func NewEventsWatch(p *Poller, sink Sink, path string) (*EventsWatch, error) {
	fd, err := cgroup.OpenFd(path)
	if err != nil {
		return nil, fmt.Errorf("memory.events watch: %w", err)
	}
	w := &EventsWatch{path: path, p: p, fd: fd}
	// Reading once arms the kernfs change detection and sets the baseline.
	if w.last, err = w.readLocked(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	src := "memory.events " + path
	tok, err := p.add(fd, unix.EPOLLPRI, func(uint32) {
		w.mu.Lock()
		if w.fd < 0 {
			w.mu.Unlock()
			return
		}
		prev := w.last
		cur, err := w.readLocked()
		if err != nil {
			// The cgroup went away or the file is unreadable: stop
			// watching; a level-triggered error would spin otherwise.
			w.mu.Unlock()
			go w.Close()
			return
		}
		w.last = cur
		w.mu.Unlock()
		if cur.High > prev.High || cur.Max > prev.Max || cur.OOM > prev.OOM || cur.OOMKill > prev.OOMKill {
			sink.Wake(Wake{Source: src, At: time.Now()})
		}
	})
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	w.token = tok
	return w, nil
}

// readLocked re-reads the file from offset 0; reading also re-arms POLLPRI.
func (w *EventsWatch) readLocked() (v2.MemoryEvents, error) {
	return v2.ReadMemoryEventsFd(w.fd, w.path)
}

// Last returns the counters seen at the last read.
func (w *EventsWatch) Last() v2.MemoryEvents {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Close stops watching.
func (w *EventsWatch) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil
	}
	w.p.remove(w.fd, w.token)
	err := unix.Close(w.fd)
	w.fd = -1
	return err
}
