package node_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/test/node"
)

// A race against the kubelet's poll, run fairly. The kubelet's eviction
// manager observes the node once per synchronize and then waits 10 s
// (evictionMonitoringPeriod, a constant in pkg/kubelet/kubelet.go); on
// cgroup v2 nothing wakes it in between. evictd is woken by the crossing
// itself. Whether it acts before the kubelet's next observation is the
// claim these tests check, and it depends on where the crossing falls in
// the kubelet's period: on the v1 node evictd's crossing → eviction seen
// in the API is ≈ 0.1 s of the 10 s (0.094 s on 2026-12-02), but under the
// v2 node's software emulation it is ≈ 2–3 s (slow API server), so a
// crossing that happened to
// fall just before the kubelet's observation let the kubelet evict first in
// about one run of four, whatever evictd did.
//
// A gated hog removes that chance: it allocates to just short of the
// threshold, waits at its gate (the hog's "await FILE"), and the test opens
// the gate right after the kubelet ends a synchronize that found nothing
// starved (logged with --vmodule=eviction_manager=3, which both node
// scripts pass). The crossing then comes early in the kubelet's period, as
// a real one does on average at least half the time, and the next 10 s are
// evictd's to use.

// kubeletSyncDone is what the eviction manager logs (V(3)) when a
// synchronize found no signal over a threshold: its observation is made.
const kubeletSyncDone = "Eviction manager: no resources are starved"

// gateMargin is how far short of the threshold a gated hog waits: enough
// that the pods cgroup's own drift (evictd's pod, the pause containers)
// does not cross it first.
const gateMargin = 64 << 20 // bytes

// gatedHog is a hog script that allocates with step until the node has
// gateMargin bytes more than threshold available, waits for its gate, then
// allocates `over` bytes past the threshold with step and holds. prefix
// goes first ("ignore-term; threads 2; ", or ""). It returns the script and
// the gate's path in the container.
func gatedHog(t *testing.T, c *node.Cluster, threshold resource.Quantity, over int64, prefix string, step func(bytes int64) string) (script, gate string) {
	t.Helper()
	limit, ws := podsCgroupMemory(t, c)
	below := limit - threshold.Value() - gateMargin - ws
	if below <= 0 {
		t.Fatalf("the pods cgroup has %d bytes before the threshold: no room for a hog", limit-threshold.Value()-ws)
	}
	gate = fmt.Sprintf("/evictd-gate-%d", time.Now().UnixNano())
	return prefix + step(below) + "; await " + gate + "; " + step(gateMargin+over) + "; hold", gate
}

// ramp100 ramps at 100 MiB/s; allocAll allocates at the machine's speed.
func ramp100(n int64) string  { return fmt.Sprintf("ramp %d 100Mi", n) }
func allocAll(n int64) string { return fmt.Sprintf("alloc %d", n) }

// openGateAfterKubeletSync waits until the hog waiting at gate has its
// first allocation resident, then until the kubelet's eviction manager next
// ends a synchronize, and opens the gate (creates the file in the hog's
// root). It returns when the gate opened.
func openGateAfterKubeletSync(t *testing.T, c *node.Cluster, gate string) time.Time {
	t.Helper()
	scale := time.Duration(c.TimeoutScale)
	pid, err := waitGatedHog(gate, 120*scale*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(c.Dir, "logs", "kubelet.log")
	if err := waitLogLine(logPath, kubeletSyncDone, 60*scale*time.Second); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(fmt.Sprintf("/proc/%d/root%s", pid, gate))
	if err != nil {
		t.Fatalf("opening the hog's gate: %v", err)
	}
	f.Close()
	return time.Now()
}

// waitGatedHog finds the process whose command line names gate and waits
// until it is blocked at it: its resident memory stops growing (two reads
// of /proc/<pid>/status 200 ms apart agree within a MiB).
func waitGatedHog(gate string, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	var last uint64
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		pid := findArg(gate)
		if pid == 0 {
			continue
		}
		rss, err := vmRSS(pid)
		if err != nil {
			continue
		}
		if rss > 0 && last > 0 && max(rss, last)-min(rss, last) < 1<<20 {
			return pid, nil
		}
		last = rss
	}
	return 0, fmt.Errorf("no hog waiting at %s after %v", gate, timeout)
}

// findArg is the PID of a process with arg among its arguments, or 0.
func findArg(arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				return pid
			}
		}
	}
	return 0
}

// vmRSS reads VmRSS from /proc/<pid>/status, in bytes.
func vmRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// waitLogLine waits until a line containing s is appended to the log at
// path (lines already there do not count).
func waitLogLine(path, s string, timeout time.Duration) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	r := bufio.NewReader(f)
	deadline := time.Now().Add(timeout)
	var partial string
	for time.Now().Before(deadline) {
		l, err := r.ReadString('\n')
		partial += l
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if strings.Contains(partial, s) {
			return nil
		}
		partial = ""
	}
	return fmt.Errorf("%s: no %q after %v (the kubelet runs with --vmodule=eviction_manager=3?)", path, s, timeout)
}
