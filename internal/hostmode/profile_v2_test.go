package hostmode

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
	"github.com/evictd/evictd/test/vm/vmtest"
)

// The profile behaviours that need the kernel, on cgroup v2 in the VM tier:
// each builds the host wiring twice on the same workloads, once with the
// kubelet profile (a dry run: it decides and kills nothing) and once with
// the behaviour, and runs one synchronize with each.

// readStat is a test-side reader of a flat keyed cgroup file (memory.stat),
// independent of the readers it helps to test.
func readStat(t *testing.T, dir, name string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = v
		}
	}
	return out
}

func readInt(t *testing.T, dir, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// waitFor polls cond every 200 ms; the guard only bounds a hang (the VM is
// emulated and may run several times slower on a busy machine).
func waitFor(t *testing.T, guard time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%s)", what, guard, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// syncOnce wires the host with cfg on the sandbox and runs one synchronize.
func syncOnce(t *testing.T, sb *sandbox.Sandbox, cfg policy.Config, dryRun bool) agent.Record {
	t.Helper()
	var logs syncbuf.Buffer
	h, err := New(Options{Options: agent.Options{Policy: cfg, DryRun: dryRun, Log: logTo(&logs), Wakeups: agent.NoWakeups}, WorkloadRoot: sb.Parent.Rel,
		GoneTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		h.Wakeups.Close()
		h.Pods.Close()
		h.lock.release()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := h.Sync(ctx, agent.Trigger{Reason: "test", At: time.Now()})
	t.Logf("profile %s: met %d, evictions %+v, actions %+v, notes %q\n%s", cfg.Profile, len(rec.Decision.Met),
		rec.Decision.Evictions, rec.Actions, rec.Decision.Notes, logs.String())
	return rec
}

func evictedNames(r agent.Record) []string {
	var out []string
	for _, e := range r.Decision.Evictions {
		out = append(out, e.Pod.Name)
	}
	return out
}

func hardConfig(t *testing.T, memoryAvailable string) policy.Config {
	t.Helper()
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": memoryAvailable}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// reclaim-first (kubernetes#43916). A workload holds 128Mi of clean page
// cache it has read twice (active file pages: the working set counts them)
// and another 24Mi of anonymous memory, in a 224Mi workload root with the
// kubelet's memory.available<100Mi (so allocatableMemory.available<100Mi on
// the root). The kubelet profile sees about 70Mi available and evicts the
// cache holder. The profile writes memory.reclaim on the workload root,
// reads the Summary again, finds the threshold no longer met and evicts
// nothing; the page cache is what went.
func TestReclaimFirstV2(t *testing.T) {
	sandboxtest.NeedMode(t, sandbox.V2)
	mnt := vmtest.FileFS(t, "192M")
	sb := sandboxtest.New(t, 224<<20)
	cache, err := sb.Child("cache")
	if err != nil {
		t.Fatal(err)
	}
	anon, err := sb.Child("anon")
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.StartHog(t, "cache "+mnt+"/data 128Mi; hold", cache)
	sandboxtest.StartHog(t, "alloc 24Mi; hold", anon)
	waitFor(t, 90*time.Second, "128Mi of active page cache in the cache workload", func() (bool, string) {
		st := readStat(t, cache.Memory, "memory.stat")
		return st["active_file"] >= 110<<20 && readInt(t, anon.Memory, "memory.current") >= 24<<20,
			fmt.Sprintf("active_file %d, inactive_file %d, anon cgroup %d", st["active_file"], st["inactive_file"], readInt(t, anon.Memory, "memory.current"))
	})

	cfg := hardConfig(t, "100Mi")
	kubelet := syncOnce(t, sb, cfg, true)
	if got := evictedNames(kubelet); len(got) != 1 || got[0] != "cache" {
		t.Fatalf("kubelet profile evicts %v, want [cache] (its working set counts the active page cache)", got)
	}
	// The whole root's file pages: memory.reclaim is written there, and
	// the kernel takes page cache from any workload under it (the other
	// hog's text among it: the VM tier once saw the cache workload alone
	// give 0.6 MiB less than asked).
	before := readStat(t, sb.Parent.Memory, "memory.stat")

	cfg.Profile = policy.Profile{ReclaimFirst: true}
	rec := syncOnce(t, sb, cfg, false)
	if len(rec.Actions) == 0 || rec.Actions[0].Kind != "reclaim" || rec.Actions[0].Error != "" ||
		!strings.Contains(rec.Actions[0].Message, "asked") || rec.Decision.MemoryReclaim == nil {
		t.Fatalf("reclaim-first: actions %+v, memory reclaim %+v", rec.Actions, rec.Decision.MemoryReclaim)
	}
	if !rec.Decision.ReclaimSufficient || len(rec.Decision.Evictions) != 0 {
		t.Fatalf("reclaim-first: reclaim sufficient %v, evictions %v, after reclaim %+v",
			rec.Decision.ReclaimSufficient, evictedNames(rec), rec.Decision.AfterReclaim)
	}
	// The page cache is what went: at least what the working set had to
	// shrink by (the kernel reclaims in batches, often more).
	after := readStat(t, sb.Parent.Memory, "memory.stat")
	fileBefore, fileAfter := before["active_file"]+before["inactive_file"], after["active_file"]+after["inactive_file"]
	if fileBefore-fileAfter < rec.Decision.MemoryReclaim.Bytes {
		t.Fatalf("file pages %d → %d: less than the %d the working set had to shrink by", fileBefore, fileAfter, rec.Decision.MemoryReclaim.Bytes)
	}
	if a := readInt(t, anon.Memory, "memory.current"); a < 20<<20 {
		t.Fatalf("the anonymous workload went from 24Mi to %d: reclaim should take page cache, not push anon out", a)
	}
	t.Logf("file pages %d → %d (the shortfall was %d); %s", fileBefore, fileAfter, rec.Decision.MemoryReclaim.Bytes, rec.Actions[0].Message)
}

// swap-aware (kubernetes/enhancements#2400; kubernetes#128137, #129578). With
// zram swap on, "swapper" is held to 24Mi of RAM by memory.high and has the
// rest of its 90Mi in swap; "steady" has 80Mi in RAM. The kubelet profile
// counts neither free swap nor swap use: it evicts steady, the larger
// working set. With swap-aware, (1) a threshold that free swap covers is not
// met, so nothing is evicted, and (2) past it the ranking counts swap:
// swapper (24Mi + its swap) goes first.
func TestSwapAwareV2(t *testing.T) {
	sandboxtest.NeedMode(t, sandbox.V2)
	vmtest.Swap(t, "256M")
	sb := sandboxtest.New(t, 320<<20)
	steady, err := sb.Child("steady")
	if err != nil {
		t.Fatal(err)
	}
	swapper, err := sb.Child("swapper")
	if err != nil {
		t.Fatal(err)
	}
	vmtest.WriteFile(t, swapper.Memory, "memory.high", strconv.Itoa(24<<20))
	sandboxtest.StartHog(t, "alloc 80Mi; hold", steady)
	sandboxtest.StartHog(t, "alloc 90Mi; hold", swapper)
	waitFor(t, 120*time.Second, "swapper mostly in swap, steady in RAM", func() (bool, string) {
		sw := readInt(t, swapper.Memory, "memory.swap.current")
		cur, st := readInt(t, swapper.Memory, "memory.current"), readInt(t, steady.Memory, "memory.current")
		return sw >= 56<<20 && st >= 78<<20, fmt.Sprintf("swapper RAM %d swap %d, steady RAM %d", cur, sw, st)
	})

	// The numbers the thresholds are placed around, from the profile's own
	// Summary of the workload root (the kubelet profile's eviction-only
	// Summary has no swap): what is available without swap, and the free
	// swap it adds.
	probe := syncOnce(t, sb, func() policy.Config {
		c := hardConfig(t, "1Mi")
		c.Profile = policy.Profile{SwapAware: true}
		return c
	}(), true)
	var alloc int64 = -1
	for _, o := range probe.Decision.Observations {
		if o.Signal == policy.SignalAllocatableMemoryAvailable {
			alloc = o.Available.Value()
		}
	}
	nm := probe.Decision.NodeMemory
	if alloc < 0 || nm == nil || nm.SwapAvailable == nil || nm.Used != "working set + free swap" {
		t.Fatalf("no allocatable observation or node swap: %+v, %+v", probe.Decision.Observations, nm)
	}
	swapFree := nm.SwapAvailable.Value()
	alloc -= swapFree // the workload root has no memory.swap.max: the node's free swap was added
	t.Logf("allocatable available %d without swap, node swap free %d", alloc, swapFree)

	// (1) Inside what free swap covers.
	cfg := hardConfig(t, strconv.FormatInt(alloc+swapFree/2, 10))
	if got := evictedNames(syncOnce(t, sb, cfg, true)); len(got) != 1 || got[0] != "steady" {
		t.Fatalf("kubelet profile evicts %v, want [steady] (the larger working set)", got)
	}
	cfg.Profile = policy.Profile{SwapAware: true}
	if rec := syncOnce(t, sb, cfg, true); len(rec.Decision.Met) != 0 || len(rec.Decision.Evictions) != 0 {
		t.Fatalf("swap-aware: met %+v, evicted %v; free swap should cover the threshold", rec.Decision.Met, evictedNames(rec))
	}

	// (2) Past free swap too: the ranking decides.
	cfg = hardConfig(t, strconv.FormatInt(alloc+swapFree+32<<20, 10))
	if got := evictedNames(syncOnce(t, sb, cfg, true)); len(got) != 1 || got[0] != "steady" {
		t.Fatalf("kubelet profile evicts %v, want [steady]", got)
	}
	cfg.Profile = policy.Profile{SwapAware: true}
	rec := syncOnce(t, sb, cfg, true)
	if got := evictedNames(rec); len(got) != 1 || got[0] != "swapper" {
		t.Fatalf("swap-aware evicts %v, want [swapper] (working set + swap); candidates %+v", got, rec.Decision.Candidates)
	}
	for _, c := range rec.Decision.Candidates {
		if c.Pod.Name == "swapper" && (c.Swap == nil || c.Swap.Value() < 56<<20) {
			t.Fatalf("swapper's candidate has swap %v", c.Swap)
		}
	}
}
