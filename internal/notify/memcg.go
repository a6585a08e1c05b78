package notify

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
)

// DefaultRefreshInterval is how often at most a memcg threshold registration
// is rebuilt: the kubelet's notifierRefreshInterval (10 s). A registration is
// one-shot in the kernel, so moving the threshold means a new eventfd.
const DefaultRefreshInterval = 10 * time.Second

// usageAttribute is the memcg v1 counter the kubelet watches.
const usageAttribute = "memory.usage_in_bytes"

// UsageThreshold converts a working-set eviction threshold into a usage
// threshold, as the kubelet's UpdateThreshold does:
//
//	capacity - evictionThreshold + inactiveFile
//
// where capacity = available + workingSet and inactiveFile = usage -
// workingSet of the watched cgroup. memcg counts reclaimable page cache in
// usage, so without the inactive_file term the notifier would fire on page
// cache churn instead of on working-set pressure.
//
// The eviction threshold is met when available < evictionThreshold, that
// is when usage goes *above* this value; MemcgThreshold wakes exactly then.
func UsageThreshold(capacity, evictionThreshold, inactiveFile int64) int64 {
	return capacity - evictionThreshold + inactiveFile
}

// MemcgThreshold is a cgroup v1 memory usage threshold notifier for one
// cgroup (the memory hierarchy root for memory.available, the pods' parent
// for allocatableMemory.available). It wakes the sink when
// memory.usage_in_bytes goes above the usage threshold, and again when it
// falls back to it or below.
//
// The kernel keeps a registered value in whole pages, rounded down, and
// signals it once usage reaches it, while the kubelet's threshold is strict
// (available < threshold). The kubelet registers UsageThreshold as it is,
// so its eventfd can fire up to a page before the threshold is met, and a
// usage that stops on that page wakes a synchronize that finds nothing met;
// no event follows until usage falls back, and the 10 s tick decides.
// evictd registers the first page above UsageThreshold, the first usage at
// which the threshold is met. (The benchmark's first trial landed on that
// page every time; a real ramp, checked every 128 page events, seldom does.)
type MemcgThreshold struct {
	name string // what the threshold stands for, e.g. "memory.available"
	dir  string // the memory cgroup directory
	p    *Poller
	sink Sink

	// RefreshInterval bounds how often Update rebuilds the registration.
	RefreshInterval time.Duration
	// Key, when set, is the threshold this notifier stands for: a wake-up
	// on which usage is above the registration carries it as Wake.Crossed.
	Key string
	// OnAbove, when set, is called on the poller's goroutine, before the
	// sink, for every wake-up that finds usage above the registration (the
	// v1 arming threshold starts its CloseWatch so). Set it before the
	// first Update.
	OnAbove func()

	mu        sync.Mutex
	eventfd   int // -1 when not registered
	token     int32
	threshold int64  // the usage threshold (the kernel holds firstPageAbove of it)
	ino       uint64 // inode of dir when registered: a new one means the cgroup was recreated
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

// Update registers usageThreshold, given usage, the cgroup's
// memory.usage_in_bytes in the Summary that usageThreshold was computed
// from (the one the caller just decided on). It does nothing and returns
// false when a registration was built less than RefreshInterval before now
// (the kubelet rate-limits the same way, so a loop woken often does not
// churn eventfds) unless that registration is stale (below), or when the
// threshold is unchanged.
//
// A crossing while registering is not lost: the usage is read again once
// the new registration is in place, and if it has crossed usageThreshold
// since the Summary the sink is woken at once, as the kernel would have.
//
// A registration goes stale when inactive_file changes after it was built.
// When it grows (page cache), usage passes the registration while the
// working set is still below the eviction threshold: the eventfd fires
// early, the synchronize it wakes finds nothing met, and as the kernel
// signals only crossings, the working set's real crossing later brings no
// event. The kubelet waits for its next rebuild (10 s); that cost a node
// benchmark trial its wake-up. So a stale registration (usage above it,
// threshold not met) is rebuilt at once, rate limit or not. It cannot
// churn: each such rebuild needs usage to cross a registration upward
// again. Decisions do not change, only when the next synchronize comes.
// When inactive_file shrinks instead, the registration is too high and the
// crossing's event comes late (once usage reaches it) or not at all; no
// event says so, and the periodic synchronize's rebuild covers that case.
func (m *MemcgThreshold) Update(now time.Time, usageThreshold, usage int64) (rebuilt bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	if m.eventfd >= 0 && m.ino != cgroup.DirInode(m.dir) {
		// The cgroup was removed (and perhaps created again): its
		// registration died with it and would never fire. Register on the
		// new one now, not after the rate limit.
		m.unregisterLocked()
	}
	// Usage above the registration (the kernel has signalled it) with the
	// threshold not met (usage at or below usageThreshold): stale.
	stale := m.eventfd >= 0 && usage > m.threshold && usage <= usageThreshold
	if m.eventfd >= 0 && !stale && now.Sub(m.lastBuilt) < m.RefreshInterval {
		return false, nil
	}
	m.lastBuilt = now
	if m.eventfd >= 0 && usageThreshold == m.threshold {
		return false, nil
	}
	if err := m.rebuildLocked(usageThreshold, usage); err != nil {
		return false, err
	}
	return true, nil
}

// Rebuild registers usageThreshold now, ignoring the rate limit; usage is
// as for Update.
func (m *MemcgThreshold) Rebuild(usageThreshold, usage int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return m.rebuildLocked(usageThreshold, usage)
}

func (m *MemcgThreshold) rebuildLocked(threshold, usage int64) error {
	if threshold <= 0 {
		return fmt.Errorf("memcg threshold for %s in %s: %d bytes is not positive", m.name, m.dir, threshold)
	}
	m.unregisterLocked()
	ino := cgroup.DirInode(m.dir)
	efd, now, err := registerMemcgThreshold(m.dir, firstPageAbove(threshold))
	if err != nil {
		return err
	}
	src, key, dir, onAbove := m.Source(), m.Key, m.dir, m.OnAbove
	tok, err := m.p.add(efd, unix.EPOLLIN, func(uint32) {
		drainEventfd(efd)
		w := Wake{Source: src, At: time.Now()}
		// The kernel signals crossings both ways; one read says which.
		// By path, not through a descriptor kept open: Close may close
		// one while this handler runs on the poller's goroutine.
		if key != "" || onAbove != nil {
			if u, err := cgroupv1.ReadMemoryUsageInBytes(dir); err == nil && u <= math.MaxInt64 && int64(u) > threshold {
				w.Crossed = key
				if onAbove != nil {
					onAbove()
				}
			}
		}
		m.sink.Wake(w)
	})
	if err != nil {
		unix.Close(efd)
		return err
	}
	m.eventfd, m.token, m.threshold, m.ino = efd, tok, threshold, ino
	if now >= 0 && (now > threshold) != (usage > threshold) {
		// Crossed between the Summary and the registration: the kernel
		// will not signal a crossing that happened before it knew the value.
		w := Wake{Source: src, At: time.Now()}
		if now > threshold {
			w.Crossed = key
			if onAbove != nil {
				onAbove()
			}
		}
		m.sink.Wake(w)
	}
	return nil
}

// pageSize is the unit the kernel counts memcg usage and thresholds in.
var pageSize = int64(unix.Getpagesize())

// firstPageAbove is the smallest whole number of pages, in bytes, above
// usageThreshold: the value the kernel must hold so that it signals exactly
// when usage > usageThreshold.
func firstPageAbove(usageThreshold int64) int64 {
	return (usageThreshold/pageSize + 1) * pageSize
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
// "<eventfd> <watchfd> <bytes>", and close everything but the eventfd. It
// returns the eventfd and the usage read once the registration is in place
// (-1 if that read failed: the caller then sees no crossing to report).
func registerMemcgThreshold(dir string, value int64) (efd int, usage int64, err error) {
	attr := filepath.Join(dir, usageAttribute)
	watchfd, err := cgroup.OpenFd(attr)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, 0, fmt.Errorf("memcg threshold: %s: %w", dir, ErrNoEventControl)
		}
		return -1, 0, fmt.Errorf("memcg threshold: open %s: %w", attr, err)
	}
	defer unix.Close(watchfd)
	efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, 0, fmt.Errorf("memcg threshold: eventfd: %w", err)
	}
	if err := cgroupv1.WriteCgroupEventControl(dir, efd, watchfd, value); err != nil {
		unix.Close(efd)
		if errors.Is(err, errors.ErrUnsupported) {
			return -1, 0, fmt.Errorf("memcg threshold: %s: %w", dir, ErrNoEventControl)
		}
		return -1, 0, fmt.Errorf("memcg threshold: %w", err)
	}
	return efd, preadUsage(watchfd, attr), nil
}

// preadUsage reads memory.usage_in_bytes (at path) through an open
// descriptor; -1 if it cannot.
func preadUsage(fd int, path string) int64 {
	v, err := cgroupv1.ReadMemoryUsageInBytesFd(fd, path)
	if err != nil || v > math.MaxInt64 {
		return -1
	}
	return int64(v)
}
