package notify

import (
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// A watched cgroup removed and created again (rmdir, mkdir of the workload
// root while evictd runs) loses its kernel registration; the next Update
// registers on the new cgroup at once, not after the rate limit, so the
// next crossing still wakes through the eventfd.
func TestMemcgThresholdSurvivesRecreatedCgroup(t *testing.T) {
	needMode(t, sandbox.V1)
	s := newSandbox(t, 0)
	c, err := s.Child("root")
	if err != nil {
		t.Fatal(err)
	}
	_, w, m := newMemcgOn(t, c.Memory)
	const mi = 1 << 20
	start := time.Now()
	u := usage(t, c.Memory)
	if rebuilt, err := m.Update(start, u+50*mi, u); err != nil || !rebuilt {
		t.Fatalf("Update: rebuilt=%v err=%v", rebuilt, err)
	}
	if err := cgroup.Rmdir(c.Memory); err != nil {
		t.Fatal(err)
	}
	if err := cgroup.Mkdir(c.Memory); err != nil {
		t.Fatal(err)
	}
	drain(w)
	// One second later: well within the 10 s rate limit.
	u = usage(t, c.Memory)
	if rebuilt, err := m.Update(start.Add(time.Second), u+50*mi, u); err != nil || !rebuilt {
		t.Fatalf("Update after the cgroup was recreated: rebuilt=%v err=%v, want a new registration", rebuilt, err)
	}
	startHog(t, "alloc 100Mi; hold", c)
	if x := waitWake(t, w, 10*time.Second, "a crossing in the recreated cgroup"); x.Source != m.Source() {
		t.Fatalf("source %q", x.Source)
	}
}

func drain(w *Waker) {
	for {
		select {
		case <-w.C():
		case <-time.After(100 * time.Millisecond):
			return
		}
	}
}
