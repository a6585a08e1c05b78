package notify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MemoryEvents are the counters of a cgroup v2 memory.events file that matter
// for eviction: high (throttled), max (hit the limit), oom and oom_kill.
type MemoryEvents struct {
	Low, High, Max, OOM, OOMKill, OOMGroupKill uint64
}

// parseMemoryEvents parses memory.events ("key value" lines). Unknown keys
// are ignored (kernels add them); a malformed value is an error.
func parseMemoryEvents(r io.Reader) (MemoryEvents, error) {
	var ev MemoryEvents
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return ev, fmt.Errorf("memory.events: malformed line %q", sc.Text())
		}
		var dst *uint64
		switch string(f[0]) {
		case "low":
			dst = &ev.Low
		case "high":
			dst = &ev.High
		case "max":
			dst = &ev.Max
		case "oom":
			dst = &ev.OOM
		case "oom_kill":
			dst = &ev.OOMKill
		case "oom_group_kill":
			dst = &ev.OOMGroupKill
		default:
			continue
		}
		v, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return ev, fmt.Errorf("memory.events: key %s: value %q: %w", f[0], f[1], err)
		}
		*dst = v
	}
	return ev, sc.Err()
}

// EventsWatch watches a cgroup v2 memory.events file with poll(POLLPRI): the
// kernel marks the file changed whenever a counter moves. It wakes the sink
// when high, max, oom or oom_kill increase.
type EventsWatch struct {
	path  string
	p     *Poller
	mu    sync.Mutex
	fd    int
	token int32
	last  MemoryEvents
}

// NewEventsWatch opens path (a memory.events file) and watches it.
func NewEventsWatch(p *Poller, sink Sink, path string) (*EventsWatch, error) {
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC)
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
func (w *EventsWatch) readLocked() (MemoryEvents, error) {
	buf := make([]byte, 512)
	n, err := preadRetry(w.fd, buf, 0)
	if err != nil {
		return MemoryEvents{}, fmt.Errorf("read %s: %w", w.path, err)
	}
	ev, err := parseMemoryEvents(bytes.NewReader(buf[:n]))
	if err != nil {
		return ev, fmt.Errorf("%s: %w", w.path, err)
	}
	return ev, nil
}

// Last returns the counters seen at the last read.
func (w *EventsWatch) Last() MemoryEvents {
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

func preadRetry(fd int, b []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, b, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err
	}
}
