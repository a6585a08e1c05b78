package notify

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
)

// memcgState reads what a synchronize sees of a v1 memory cgroup: usage and
// working set (usage − total_inactive_file), as the kubelet computes them.
func memcgState(t *testing.T, dir string) (usage, workingSet int64) {
	t.Helper()
	u, err := cgroupv1.ReadMemoryUsageInBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cgroupv1.ReadMemoryStat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return int64(u), int64(cgroupv1.WorkingSet(u, &st))
}

// writePageCache writes mib MiB to a new file from a process in the memory
// cgroup dir, so that the cgroup is charged that much page cache
// (inactive_file: usage grows, the working set does not).
func writePageCache(t *testing.T, dir string, mib int) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cache")
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && exec dd if=/dev/zero of=%s bs=1M count=%d status=none", dir, f, mib)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("writing %d MiB of page cache in %s: %v: %s", mib, dir, err, out)
	}
}

// A registration built with little page cache goes stale when page cache
// grows: usage passes it while the working set is still far below the
// eviction threshold, so the eventfd fires early and the synchronize it wakes
// finds nothing met. The registration is then below the usage, and the
// kernel signals only crossings, so the working set's real crossing later
// brings no event. (This is the node benchmark's one missed crossing in 30;
// the kubelet has the same gap.) Update must rebuild such a registration at
// once, rate limit or not, so that the crossing wakes.
func TestMemcgThresholdStaleFireRebuilds(t *testing.T) {
	s, c, _, w, m := newMemcgFixture(t)
	const mi = 1 << 20
	// An arbitrary capacity; the eviction threshold is met once the working
	// set has grown by 64 MiB from now.
	const capacity = 1 << 40
	u0, ws0 := memcgState(t, s.Parent.Memory)
	evictionThreshold := capacity - (ws0 + 64*mi)
	t0 := time.Unix(1000, 0) // Update's clock: every later call is within the rate limit
	if rebuilt, err := m.Update(t0, UsageThreshold(capacity, evictionThreshold, u0-ws0), u0); err != nil || !rebuilt {
		t.Fatalf("first Update: rebuilt=%v err=%v", rebuilt, err)
	}

	// 128 MiB of page cache: usage passes the registration, the working
	// set does not move.
	writePageCache(t, c.Memory, 128)
	waitWake(t, w, 10*time.Second, "usage passing the registration on page cache growth")
	u1, ws1 := memcgState(t, s.Parent.Memory)
	usageThr := UsageThreshold(capacity, evictionThreshold, u1-ws1)
	if u1 > usageThr || ws1 >= ws0+64*mi {
		t.Fatalf("page cache alone met the threshold (usage %d, working set %d, usage threshold %d): the test cannot tell", u1, ws1, usageThr)
	}
	if u1 <= m.Threshold() {
		t.Fatalf("usage %d did not pass the registered %d: the early fire did not happen", u1, m.Threshold())
	}
	// The synchronize the early fire woke: nothing met; told about it.
	if _, err := m.Update(t0.Add(time.Second), usageThr, u1); err != nil {
		t.Fatal(err)
	}
	drain(w)

	// Now the working set crosses: 96 MiB of anonymous memory.
	startHog(t, "alloc 96Mi; hold", c)
	u2 := waitStableUsage(t, s.Parent.Memory, u1+88*mi) // the hog's 96 MiB, less a little page cache the kernel may move
	_, ws2 := memcgState(t, s.Parent.Memory)
	if ws2 < ws0+64*mi {
		t.Fatalf("working set %d did not cross %d", ws2, ws0+64*mi)
	}
	t.Logf("usage threshold %d, usage %d -> %d, working set %d -> %d -> %d", usageThr, u0, u2, ws0, ws1, ws2)
	// The kernel signals a threshold while charging, so the crossing's
	// event is already on the eventfd; the wait covers only the poller's
	// delivery.
	waitWake(t, w, DefaultRefreshInterval, "the working set crossing the eviction threshold after a stale registration fired early")
}

// Only a stale registration (usage above it, threshold not met) bypasses
// the rate limit: usage above it with the threshold met is the crossing the
// registration is for, and usage below it is no fire at all.
func TestMemcgThresholdStaleOnlyBypassesRateLimit(t *testing.T) {
	s, _, _, _, m := newMemcgFixture(t)
	const gi = 1 << 30
	t0 := time.Unix(1000, 0)
	u := usage(t, s.Parent.Memory) // an empty cgroup: well below 1 GiB
	if rebuilt, err := m.Update(t0, 1*gi, u); err != nil || !rebuilt {
		t.Fatalf("first Update: rebuilt=%v err=%v", rebuilt, err)
	}
	for _, c := range []struct {
		what            string
		threshold, used int64
		want            bool
	}{
		{"usage below the registration", 2 * gi, u, false},
		{"usage above the registration, threshold met", 2 * gi, 3 * gi, false},
		{"usage above the registration, threshold not met (stale)", 4 * gi, 3 * gi, true},
		{"usage below the new registration", 5 * gi, 3 * gi, false},
	} {
		rebuilt, err := m.Update(t0.Add(time.Second), c.threshold, c.used)
		if err != nil {
			t.Fatal(err)
		}
		if rebuilt != c.want {
			t.Errorf("%s: rebuilt=%v within the rate limit, want %v", c.what, rebuilt, c.want)
		}
	}
	if got := m.Threshold(); got != 4*gi {
		t.Fatalf("registered %d, want the stale rebuild's %d", got, 4*gi)
	}
}
