package notify

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// cgroup v2 (VM tier): a hog hitting memory.high raises the high counter,
// which wakes the watcher through POLLPRI.
func TestEventsWatchWakesOnHigh(t *testing.T) {
	needMode(t, sandbox.V2)
	s := newSandbox(t, 0)
	c, err := s.Child("hog")
	if err != nil {
		t.Fatal(err)
	}
	if err := cgroupv2.WriteMemoryHigh(c.Memory, 16<<20); err != nil {
		t.Fatal(err)
	}
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w := NewWaker()
	ew, err := NewEventsWatch(p, w, filepath.Join(c.Memory, "memory.events"))
	if err != nil {
		t.Fatal(err)
	}
	defer ew.Close()
	startHog(t, "alloc 32Mi; hold", c)
	x := waitWake(t, w, 20*time.Second, "memory.high being hit")
	if !strings.HasPrefix(x.Source, "memory.events ") {
		t.Fatalf("source %q", x.Source)
	}
	if ew.Last().High == 0 {
		t.Fatalf("high counter still 0 after the wake-up: %+v", ew.Last())
	}
}

// cgroup v2 (VM tier): a PSI trigger on a cgroup's own memory.pressure fires
// when that cgroup is throttled.
func TestPSITriggerCgroupV2(t *testing.T) {
	needMode(t, sandbox.V2)
	s := newSandbox(t, 0)
	c, err := s.Child("hog")
	if err != nil {
		t.Fatal(err)
	}
	if err := cgroupv2.WriteMemoryHigh(c.Memory, 16<<20); err != nil {
		t.Fatal(err)
	}
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w := NewWaker()
	tr, err := NewPSITrigger(p, w, filepath.Join(c.Memory, "memory.pressure"), 10*time.Millisecond, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	startHog(t, "alloc 64Mi; hold", c)
	x := waitWake(t, w, 20*time.Second, "throttling at memory.high")
	if !strings.HasPrefix(x.Source, "psi ") {
		t.Fatalf("source %q", x.Source)
	}
}
