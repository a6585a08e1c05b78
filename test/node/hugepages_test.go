package node_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/test/node"
)

// hugePages2Mi is the default huge page pool on x86 (2 MiB pages).
const hugePages2Mi = "/proc/sys/vm/nr_hugepages"

// hugePagesReserved is how many 2 MiB pages the test adds: few, because on
// the v1 node the pool is this host's, shared by everyone on the machine
// (the test restores the count it found, and scripts/node.sh's teardown
// restores vm.nr_hugepages too, should the test binary be killed).
const hugePagesReserved = 16

// TestSummaryWithHugePages: with huge pages reserved before the kubelet
// starts (the kubelet reads the machine's huge page capacity only then, so
// the test restarts it), the v1.37 kubelet subtracts their capacity from
// the node's memory.available (HugepageAwareEviction, adjustForHugePages),
// and so does evictd's collector. The test compares the node's capacity as
// the eviction manager observes it, memory.available + working set, which
// on both sides is MemTotal less the huge page pools: it must be equal to
// the byte in `evictd stat --summary` and the kubelet's /stats/summary, and
// equal to the node's memory capacity less its hugepages-2Mi capacity. (The
// node's available memory itself moves with everything on the machine and
// the kubelet's figure is up to 10 s old, so it is only logged.) Without
// the adjustment evictd's capacity is larger by exactly the pools' size.
func TestSummaryWithHugePages(t *testing.T) {
	c := node.Get(t)
	orig := readHugePages(t)
	want := orig + hugePagesReserved
	t.Cleanup(func() {
		writeHugePages(t, orig)
		c.RestartKubelet(t)
		waitHugePageCapacity(t, c, orig)
		if got := readHugePages(t); got != orig {
			t.Errorf("vm.nr_hugepages is %d after the test, was %d", got, orig)
		}
	})
	writeHugePages(t, want)
	if got := readHugePages(t); got != want {
		t.Fatalf("vm.nr_hugepages: asked for %d, the kernel reserved %d (no 2 MiB of contiguous memory free?)", want, got)
	}
	c.RestartKubelet(t)
	capacity := waitHugePageCapacity(t, c, want)

	// A Summary of the kubelet's taken after its restart (its stats are
	// cAdvisor's, refreshed every 10 s).
	var kubelet statsapi.Summary
	restarted := time.Now()
	c.WaitFor(t, 2*time.Minute, "a /stats/summary of the restarted kubelet", func(ctx context.Context) (bool, error) {
		b, err := c.KubeletGet(ctx, "/stats/summary")
		if err != nil {
			return false, nil // the kubelet's port is not up yet
		}
		kubelet = statsapi.Summary{}
		if err := json.Unmarshal(b, &kubelet); err != nil {
			return false, err
		}
		m := kubelet.Node.Memory
		return m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil && m.Time.After(restarted), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), node.APITimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(c.Images, "bin", "evictd"), "stat", "--summary",
		"--kubelet-root", c.KubeletRoot, "--pod-logs", c.PodLogs).Output()
	if err != nil {
		t.Fatalf("evictd stat --summary: %v", err)
	}
	var ours statsapi.Summary
	if err := json.Unmarshal(out, &ours); err != nil {
		t.Fatalf("evictd stat --summary: %v\n%s", err, out)
	}
	k, o := kubelet.Node.Memory, ours.Node.Memory
	if o == nil || o.AvailableBytes == nil || o.WorkingSetBytes == nil {
		t.Fatalf("evictd's summary has no node memory: %+v", o)
	}
	hp := uint64(want) * 2 << 20
	kCap, oCap := *k.AvailableBytes+*k.WorkingSetBytes, *o.AvailableBytes+*o.WorkingSetBytes
	nodeMem := capacity[corev1.ResourceMemory]
	t.Logf("huge pages %d × 2 MiB = %d bytes (the node's hugepages-2Mi capacity); node memory capacity %d", want, hp, nodeMem.Value())
	t.Logf("memory.available + working set: kubelet %d, evictd %d; memory.available: kubelet %d, evictd %d (%+d)",
		kCap, oCap, *k.AvailableBytes, *o.AvailableBytes, int64(*o.AvailableBytes)-int64(*k.AvailableBytes))
	if oCap != kCap {
		t.Errorf("the node's observed capacity (available + working set): evictd %d, kubelet %d: differ by %d (the huge pages are %d)",
			oCap, kCap, int64(oCap)-int64(kCap), hp)
	}
	if uint64(nodeMem.Value())-hp != kCap {
		t.Errorf("the kubelet's observed capacity %d is not the node's memory capacity %d less its huge pages %d: HugepageAwareEviction off?",
			kCap, nodeMem.Value(), hp)
	}
	// The available figures themselves are read seconds apart (the
	// kubelet's from a cache refreshed every 10 s) while everything else on
	// the machine allocates and frees: their difference is load, not a
	// property of either side, so it is logged above and not judged (a
	// 256 MiB bound on it failed once in CI). The capacities are the proof.
}

func readHugePages(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(hugePages2Mi)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", hugePages2Mi, err)
	}
	return n
}

func writeHugePages(t testing.TB, n int) {
	t.Helper()
	if err := os.WriteFile(hugePages2Mi, []byte(strconv.Itoa(n)), 0o644); err != nil {
		t.Fatalf("%s = %d: %v", hugePages2Mi, n, err)
	}
}

// waitHugePageCapacity waits until the Node reports pages × 2 MiB of
// hugepages-2Mi capacity (what the restarted kubelet read) and returns the
// node's capacity.
func waitHugePageCapacity(t testing.TB, c *node.Cluster, pages int) corev1.ResourceList {
	t.Helper()
	var capacity corev1.ResourceList
	c.WaitFor(t, 2*time.Minute, "the node's hugepages-2Mi capacity "+strconv.Itoa(pages*2)+"Mi", func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		capacity = n.Status.Capacity
		q := capacity[corev1.ResourceName("hugepages-2Mi")]
		return q.Value() == int64(pages)*2<<20, nil
	})
	return capacity
}
