package hostmode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	hog.MaybeRun()
	maybeCrashAgent()
	os.Exit(m.Run())
}

// The whole host wiring on a real kernel (v1 here, v2 in the VM): a hog
// ramping in a 256Mi sandbox crosses the hard threshold (160Mi available,
// so at 96Mi used: far from the limit even when the ramp is fast); a kernel wake-up
// (v1 memcg eventfd, v2 fast poll or memory.events) runs the loop long
// before the 10 s timer, the hog is killed, the workload that stays under
// its request is left alone, and the kernel OOM killer never fires.
func TestHostEvictsOnWakeup(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 256<<20)
	keeper, err := sb.Child("keeper")
	if err != nil {
		t.Fatal(err)
	}
	leak, err := sb.Child("leak")
	if err != nil {
		t.Fatal(err)
	}
	wf, err := workload.Parse([]byte("workloads:\n- name: keeper\n  cgroup: keeper\n  requests: {memory: 64Mi}\n  priority: 100\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "160Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	recs := make(chan agent.Record, 100)
	h, err := New(Options{Options: agent.Options{Policy: cfg, Log: logTo(&logs),
		Wakeups: agent.WakeupOptions{MemcgNotification: agent.Auto, PSI: agent.Off, MemoryEvents: agent.Auto, FastPoll: agent.Auto}},
		WorkloadRoot: sb.Parent.Rel, Workloads: wf, GoneTimeout: 5 * time.Second,
		OnRecord: func(r agent.Record) { recs <- r }})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.StartHog(t, "alloc 32Mi; hold", keeper)
	h2 := sandboxtest.StartHog(t, "sleep 1500ms; ramp 200Mi 64Mi; hold", leak)
	// Generous: under the VM's software emulation touching pages is ~10×
	// slower, so the ramp takes tens of seconds there.
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	var evict, last *agent.Record
	for evict == nil {
		select {
		case r := <-recs:
			last = &r
			if len(r.Decision.Evictions) > 0 {
				evict = &r
			}
		case <-ctx.Done():
			ws, werr := h.Pods.Workloads()
			var names []string
			for _, w := range ws {
				names = append(names, w.Pod.Name)
			}
			diag := fmt.Sprintf("workloads %v (%v); wake-ups %v", names, werr, h.Wakeups.Active())
			if last != nil {
				diag += fmt.Sprintf("; last synchronize (%s): observations %+v, met %d, error %q, notes %v",
					last.Trigger.Reason, last.Decision.Observations, len(last.Decision.Met), last.Decision.Error, last.Decision.Notes)
			}
			t.Fatalf("no eviction within 120 s: %s; logs:\n%s", diag, logs.String())
		}
	}
	cancel()
	<-done
	if got := evict.Decision.Evictions[0].Pod.Name; got != "leak" {
		t.Fatalf("evicted %s, want leak", got)
	}
	if evict.Trigger.Reason != "wake" {
		t.Fatalf("eviction ran on %+v, want a kernel wake-up", evict.Trigger)
	}
	// On v1 the memcg path: the threshold's eventfd, or the close watch
	// its arming threshold started (notify.CloseWatch), whichever sees the
	// crossing first — the kernel checks the threshold only every 128 page
	// charges per CPU, so the watch wins some races (a fresh-clone run
	// of 2026-12-03 did). Not the fast poll, PSI or the tick.
	if src := evict.Trigger.Source; mode == sandbox.V1 && !strings.HasPrefix(src, "memcg-threshold ") && !strings.HasPrefix(src, "memcg-watch ") {
		t.Fatalf("v1 wake-up from %q, want the memcg threshold's eventfd or its close watch", src)
	}
	select {
	case <-h2.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("the evicted hog is still running")
	}
	if k, _ := sb.OOMKills(sb.Parent); k != 0 {
		t.Fatalf("kernel OOM kills: %d", k)
	}
	t.Logf("evicted on %s %s, %.1f ms from wake-up to decision", evict.Trigger.Reason, evict.Trigger.Source,
		float64(evict.TriggerToDecision.Microseconds())/1000)
}
