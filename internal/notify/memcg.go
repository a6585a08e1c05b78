package notify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRefreshInterval is how often at most a memcg threshold registration
// is rebuilt: the kubelet's notifierRefreshInterval (10 s). A registration is
// one-shot in the kernel, so moving the threshold means a new eventfd.
const DefaultRefreshInterval = 10 * time.Second

// usageAttribute is the memcg v1 counter the kubelet watches.
const usageAttribute = "memory.usage_in_bytes"

// UsageThreshold converts a working-set eviction threshold into the usage
// threshold registered with the kernel, as the kubelet's UpdateThreshold does:
//
//	capacity - evictionThreshold + inactiveFile
//
// where capacity = available + workingSet and inactiveFile = usage -
// workingSet of the watched cgroup. memcg counts reclaimable page cache in
// usage, so without the inactive_file term the notifier would fire on page
// cache churn instead of on working-set pressure.
func UsageThreshold(capacity, evictionThreshold, inactiveFile int64) int64 {
	return capacity - evictionThreshold + inactiveFile
}

// MemcgThreshold is a cgroup v1 memory usage threshold notifier for one
// cgroup (the memory hierarchy root for memory.available, the pods' parent
// for allocatableMemory.available). The kernel signals its eventfd every time
// memory.usage_in_bytes crosses the threshold, in either direction.
type MemcgThreshold struct {
	name string // what the threshold stands for, e.g. "memory.available"
	dir  string // the memory cgroup directory
	p    *Poller
	sink Sink

	// RefreshInterval bounds how often Update rebuilds the registration.
	RefreshInterval time.Duration

	mu        sync.Mutex
	eventfd   int // -1 when not registered
	token     int32
	threshold int64
	lastBuilt time.Time
	closed    bool
}

// NewMemcgThreshold returns an unregistered notifier for the cgroup at dir;
// Update registers it. name labels its wake-ups.
func NewMemcgThreshold(p *Poller, sink Sink, name, dir string) *MemcgThreshold {
	return &MemcgThreshold{name: name, dir: dir, p: p, sink: sink, RefreshInterval: DefaultRefreshInterval, eventfd: -1}
}

// Source is the label of this notifier's wake-ups.
func (m *MemcgThreshold) Source() string { return "memcg-threshold " + m.name }

// Threshold returns the usage threshold currently registered (0 if none).
func (m *MemcgThreshold) Threshold() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.threshold
}

// Update registers usageThreshold unless a registration was built less than
// RefreshInterval before now (then it does nothing and returns false). The
// kubelet rate-limits the same way, so a loop woken often does not churn
// eventfds. A threshold equal to the registered one is kept.
func (m *MemcgThreshold) Update(now time.Time, usageThreshold int64) (rebuilt bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	if m.eventfd >= 0 && now.Sub(m.lastBuilt) < m.RefreshInterval {
		return false, nil
	}
	m.lastBuilt = now
	if m.eventfd >= 0 && usageThreshold == m.threshold {
		return false, nil
	}
	if err := m.rebuildLocked(usageThreshold); err != nil {
		return false, err
	}
	return true, nil
}

// Rebuild registers usageThreshold now, ignoring the rate limit.
func (m *MemcgThreshold) Rebuild(usageThreshold int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return m.rebuildLocked(usageThreshold)
}

func (m *MemcgThreshold) rebuildLocked(threshold int64) error {
	if threshold <= 0 {
		return fmt.Errorf("memcg threshold for %s in %s: %d bytes is not positive", m.name, m.dir, threshold)
	}
	m.unregisterLocked()
	efd, err := registerMemcgThreshold(m.dir, threshold)
	if err != nil {
		return err
	}
	src := m.Source()
	tok, err := m.p.add(efd, unix.EPOLLIN, func(uint32) {
		drainEventfd(efd)
		m.sink.Wake(Wake{Source: src, At: time.Now()})
	})
	if err != nil {
		unix.Close(efd)
		return err
	}
	m.eventfd, m.token, m.threshold = efd, tok, threshold
	return nil
}

func (m *MemcgThreshold) unregisterLocked() {
	if m.eventfd < 0 {
		return
	}
	m.p.remove(m.eventfd, m.token)
	// Closing the eventfd makes the kernel drop the memcg event registration.
	unix.Close(m.eventfd)
	m.eventfd, m.threshold = -1, 0
}

// Close unregisters the threshold and closes its descriptor.
func (m *MemcgThreshold) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unregisterLocked()
	m.closed = true
	return nil
}

// ErrNoEventControl means the cgroup has no cgroup.event_control: it is not a
// cgroup v1 memory cgroup (cgroup v2 has no usage thresholds; kubernetes#106331).
var ErrNoEventControl = errors.New("no cgroup.event_control (not a cgroup v1 memory cgroup)")

// registerMemcgThreshold performs the kernel protocol: open the watched
// attribute and cgroup.event_control, create an eventfd, write
// "<eventfd> <watchfd> <bytes>", and close everything but the eventfd.
func registerMemcgThreshold(dir string, threshold int64) (int, error) {
	control := filepath.Join(dir, "cgroup.event_control")
	watchfd, err := openRetry(filepath.Join(dir, usageAttribute), unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("memcg threshold: open %s: %w", filepath.Join(dir, usageAttribute), err)
	}
	defer unix.Close(watchfd)
	controlfd, err := openRetry(control, unix.O_WRONLY|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, fmt.Errorf("memcg threshold: %s: %w", dir, ErrNoEventControl)
		}
		return -1, fmt.Errorf("memcg threshold: open %s: %w", control, err)
	}
	defer unix.Close(controlfd)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("memcg threshold: eventfd: %w", err)
	}
	line := strconv.Itoa(efd) + " " + strconv.Itoa(watchfd) + " " + strconv.FormatInt(threshold, 10)
	if _, err := writeRetry(controlfd, []byte(line)); err != nil {
		unix.Close(efd)
		return -1, fmt.Errorf("memcg threshold: write %q to %s: %w", line, control, err)
	}
	return efd, nil
}

func openRetry(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}
