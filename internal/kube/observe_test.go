package kube

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/policy"
)

// countingCache counts the listings of a real pod cache.
type countingCache struct {
	*Pods
	lists int
}

func (c *countingCache) active() []*v1.Pod {
	c.lists++
	return c.Pods.active()
}

// cachedPods is a pod source whose informer cache holds pods (the
// informer is not started: no API server, the cache as a synced one is).
func cachedPods(t *testing.T, pods ...*v1.Pod) *Pods {
	t.Helper()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	for _, p := range pods {
		if err := inf.GetStore().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return &Pods{Node: "node-a", informer: inf, stop: make(chan struct{})}
}

// noEvictor fails the test if the agent evicts.
type noEvictor struct{ t *testing.T }

func (e noEvictor) Evict(_ context.Context, pod *v1.Pod, _ time.Duration, _ policy.Eviction) (agent.EvictResult, error) {
	e.t.Errorf("evicted %s/%s", pod.Namespace, pod.Name)
	return agent.EvictResult{}, agent.ErrUntouched
}

func TestRealObserveOneListingV1(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	testObserveOneListing(t, cgrouptest.V1Memory, false)
}

func TestRealObserveOneListingV2(t *testing.T) {
	testObserveOneListing(t, cgrouptest.RequireV2Memory(t), true)
}

// testObserveOneListing: each synchronize of the agent on the Kubernetes
// wiring lists the informer's cache once; the pod whose cgroup is gone is
// left out of that listing (one log line, the first time) and so of the
// Summary, whose pods are exactly the listing's that have a cgroup.
func testObserveOneListing(t *testing.T, root string, v2 bool) {
	podsRel := kubepodsTree(t, root, v2, "cgroupfs")
	a := runningPod("ns1", "a", uidA, map[string]string{"main": cidMain, "side": cidSide})
	b := runningPod("ns1", "b", uidB, map[string]string{"main": cidB})
	c := runningPod("ns1", "c", uidC, map[string]string{"main": "4444"}) // started, no cgroup: vanished
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st := &Stats{Log: log}
	if _, err := st.NewCollector(collect.Config{NodeName: "node-a", PodsCgroup: podsRel}); err != nil {
		t.Fatal(err)
	}
	pc := &countingCache{Pods: cachedPods(t, a, b, c)}
	obs := &Observer{pods: pc, stats: st}
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Ki"}})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{Engine: eng, Observer: obs, OOM: obs, Evictor: noEvictor{t}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		rec := ag.Sync(ctx, agent.Trigger{Reason: "timer", At: time.Now()})
		if rec.Decision.Error != "" {
			t.Fatalf("synchronize %d: %s", i, rec.Decision.Error)
		}
		if pc.lists != i {
			t.Fatalf("after %d synchronizes the pod cache was listed %d times, want %d", i, pc.lists, i)
		}
	}
	if n := strings.Count(logs.String(), "has no cgroup on this node any more"); n != 1 {
		t.Errorf("%d vanished-pod log lines, want 1 (pod c, the first time):\n%s", n, logs.String())
	}

	o := obs.Observe(ctx)
	if pc.lists != 4 {
		t.Errorf("one Observe listed the cache %d times, want 1", pc.lists-3)
	}
	if o.PodsErr != nil || o.SummaryErr != nil {
		t.Fatalf("observe: pods %v, summary %v", o.PodsErr, o.SummaryErr)
	}
	var listed, summed []string
	for _, p := range o.Pods {
		listed = append(listed, p.Name)
	}
	for _, p := range o.Summary.Pods {
		summed = append(summed, p.PodRef.Name)
	}
	slices.Sort(summed)
	if !slices.Equal(listed, []string{"a", "b"}) || !slices.Equal(summed, listed) {
		t.Errorf("listed %v, Summary of %v; want a and b in both (c vanished)", listed, summed)
	}
	again, err := o.Restat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pc.lists != 4 || len(again.Pods) != 2 {
		t.Errorf("the second look listed the cache again (%d) or lost pods (%d in its Summary)", pc.lists-4, len(again.Pods))
	}
}
