package node_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/test/node"
)

// growthRamp and growthOver: the hog of TestGrowthStopOnNode ramps this fast
// to this far past the threshold (below the kubepods limit: the headroom is
// the threshold, 300 MiB), so that between evictd's decision and the
// kubelet's kill — an API round trip and the kubelet's watch, seconds under
// emulation — it would add up to that much more memory if nothing stopped it.
const (
	growthRamp = 200 << 20
	growthOver = 240 << 20
	// growthSlack: how far past the stop's limit the pod may still be seen
	// (memory.high throttles rather than refuses, and the sampler's read
	// races the kernel's reclaim).
	growthSlack = 16 << 20
)

// TestGrowthStopOnNode: issue 18's growth stop beside the real kubelet. A
// pod ramps past the hard threshold at 200 MiB/s; evictd, installed from
// deploy/kubernetes/, decides to evict it and first stops its growth on the
// node (memory.high at its usage on the pod cgroup on cgroup v2; the OOM
// killer off and memory.limit_in_bytes just above it on v1), then evicts it
// through the API. The pod's memory, sampled every 20 ms until its cgroup
// is gone, never grows past the stop's limit (plus a slack): without the
// stop it would have ramped on for as long as the API and the kubelet take
// to kill it. No kernel OOM kill, and the eviction is evictd's.
func TestGrowthStopOnNode(t *testing.T) {
	c := node.Get(t)
	logFile := installEvictd(t, c)
	ns := c.Namespace(t, "kube-growth")
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		t.Fatal(err)
	}
	threshold := resource.MustParse(c.Threshold)
	script := fmt.Sprintf("ramp %d %d; hold", hogTarget(t, c, threshold, growthOver), growthRamp)
	hog := c.RunPod(t, ns, node.HogPod("hog", script, "64Mi", ""))
	w := workloadOf(t, col, hog)

	// The pod cgroup's usage, its peak, and the peak after the stop's limit
	// was first seen in its memory.high (v2).
	var mu sync.Mutex
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			m, err := col.ReadCgroupMemory(w.Cgroup, false)
			if err != nil {
				continue // gone
			}
			mu.Lock()
			peak = max(peak, m.Usage)
			mu.Unlock()
		}
	}()
	c.WaitFor(t, 120*time.Second, "the hog's eviction and its cgroup gone", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err == nil && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
			return false, nil
		}
		_, ok := podCgroups(t, col)[string(hog.UID)]
		return !ok, nil
	})
	close(stop)
	<-done

	var line string
	c.WaitFor(t, 30*time.Second, "evictd's log of the eviction", func(context.Context) (bool, error) {
		for _, l := range evictdLog(t, logFile, "msg=evicted") {
			if strings.Contains(l, "pod="+ns+"/hog") {
				line = l
			}
		}
		return line != "", nil
	})
	t.Logf("evictd: %s", line)
	mech, limit := logField(line, "growth_stopped"), logField(line, "stop_limit")
	if mech == "" {
		t.Fatalf("evictd's eviction did not stop the pod's growth first (growth_stopped missing; growth_stop_failed=%q)", logField(line, "growth_stop_failed"))
	}
	wantMech := "memory.high"
	if _, v := col.MemoryRoot(); v == 1 {
		wantMech = "memory.limit_in_bytes"
	}
	if mech != wantMech {
		t.Errorf("growth stopped with %s, want %s on this cgroup version", mech, wantMech)
	}
	lim, err := strconv.ParseUint(limit, 10, 64)
	if err != nil {
		t.Fatalf("stop_limit=%q: %v", limit, err)
	}
	target := uint64(hogTarget(t, c, threshold, growthOver))
	t.Logf("growth stopped by %s at %d MiB (%s after the trigger); the pod's peak usage %d MiB; unstopped it would have ramped to ≈ %d MiB more than it held at the crossing",
		mech, lim>>20, logField(line, "stop_after_trigger"), peak>>20, (growthOver+threshold.Value())>>20)
	if peak > lim+growthSlack {
		t.Errorf("the pod grew to %d bytes past the stop's limit %d (slack %d)", peak, lim, uint64(growthSlack))
	}
	if lim >= target {
		t.Errorf("the stop's limit %d is not below what the hog was ramping to (%d): nothing was stopped", lim, target)
	}
	for _, e := range evictedEvents(t, c, ns) {
		if e.Source.Component != "evictd" {
			t.Errorf("the %s evicted the hog (%q), not evictd", e.Source.Component, e.Message)
		}
	}
	for _, reason := range []string{"SystemOOM", "OOMKilling"} {
		for _, nsName := range []string{ns, "default"} {
			l, err := c.Client.CoreV1().Events(nsName).List(node.Ctx(t), metav1.ListOptions{FieldSelector: "reason=" + reason})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range l.Items {
				t.Errorf("%s event: %s %q", reason, x.InvolvedObject.Name, x.Message)
			}
		}
	}
}
