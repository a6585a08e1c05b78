package hostmode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// Pods keeps its list of cgroups while the inotify watch on the root is
// quiet, and must still see, on the very next call, a cgroup created or
// removed (also one replaced by another, which keeps the root's link count),
// and a workload that gains or loses its processes without any directory
// changing. On a real kernel: v1 here, v2 in the VM tier.
func TestHostPodsSeesChangesOnTheNextCall(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	hp := &Pods{Root: sb.Parent.Memory, V2: mode == sandbox.V2}
	t.Cleanup(func() { hp.Close() })

	mk := func(name string) sandbox.Cgroup {
		t.Helper()
		dir := filepath.Join(sb.Parent.Memory, name)
		if err := cgroup.Mkdir(dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rmdirRetry(t, dir) })
		return sandbox.Cgroup{Name: name, Memory: dir}
	}
	names := func() []string {
		t.Helper()
		ws, err := hp.Workloads()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range ws {
			out = append(out, w.Rel)
		}
		return out
	}
	// A hog joins its cgroup itself after it starts: wait for it.
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := names()
			if slices.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("active workloads %v, want %v", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	a := mk("a")
	hogA := sandboxtest.StartHog(t, "hold", a)
	waitFor("a")
	before := hp.discoveries
	if got := names(); !slices.Equal(got, []string{"a"}) || hp.discoveries != before {
		t.Fatalf("unchanged root: workloads %v, listed the root %d more times (want 0: the watch said nothing changed)", got, hp.discoveries-before)
	}

	// A new cgroup: seen by the next call, without waiting.
	b := mk("b")
	mk("idle") // no process: listed as a cgroup, not active
	sandboxtest.StartHog(t, "hold", b)
	waitFor("a", "b")
	if hp.discoveries == before {
		t.Fatal("a cgroup was created but the root was not listed again")
	}

	// One cgroup replaced by another between two calls: the root's link
	// count is the same, the watch still tells.
	syncHog(t, hogA)
	rmdirRetry(t, a.Memory)
	c := mk("c")
	if got := names(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after removing a: %v, want [b]", got)
	}
	sandboxtest.StartHog(t, "hold", c)
	waitFor("b", "c")

	// A process joining a cgroup changes no directory: seen anyway.
	before = hp.discoveries
	sandboxtest.StartHog(t, "hold", sandbox.Cgroup{Name: "idle", Memory: filepath.Join(sb.Parent.Memory, "idle")})
	waitFor("b", "c", "idle")
	if hp.discoveries != before {
		t.Errorf("a process joining a cgroup listed the root again (%d times)", hp.discoveries-before)
	}

	// The agent's stats: only the active workloads, with the numbers a
	// full Summary has for them.
	mk("spare") // no process
	waitFor("b", "c", "idle")
	col, err := collect.New(collect.Config{WorkloadRoot: sb.Parent.Rel, EvictionOnly: true, KubeletRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	obs := &Observer{Workloads: hp, Stats: &Stats{Collector: col, RootRel: sb.Parent.Rel}}
	o := obs.Observe(context.Background())
	if o.PodsErr != nil || o.SummaryErr != nil {
		t.Fatalf("observe: pods %v, stats %v", o.PodsErr, o.SummaryErr)
	}
	got := o.Summary
	var listed []string
	for _, p := range o.Pods {
		listed = append(listed, p.Name)
	}
	slices.Sort(listed)
	all, err := col.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]statsapi.PodStats{}
	for _, p := range all.Pods {
		byName[p.PodRef.Name] = p
	}
	if _, ok := byName["spare"]; !ok || len(all.Pods) != 4 {
		t.Fatalf("full Summary pods %d, want b, c, idle and spare", len(all.Pods))
	}
	var gotNames []string
	for _, p := range got.Pods {
		gotNames = append(gotNames, p.PodRef.Name)
		f := byName[p.PodRef.Name]
		if d := int64(*p.Memory.WorkingSetBytes) - int64(*f.Memory.WorkingSetBytes); d > 1<<20 || d < -(1<<20) ||
			*p.ProcessStats.ProcessCount != *f.ProcessStats.ProcessCount || p.PodRef != f.PodRef {
			t.Errorf("pod %s: agent stats %+v / %d processes, full Summary %+v / %d", p.PodRef.Name, p.Memory, *p.ProcessStats.ProcessCount, f.Memory, *f.ProcessStats.ProcessCount)
		}
	}
	if !slices.Equal(gotNames, []string{"b", "c", "idle"}) || !slices.Equal(listed, gotNames) {
		t.Errorf("agent stats for %v, pods %v; want the active [b c idle] in both", gotNames, listed)
	}

	// After Close every call lists the root; results stay right.
	hp.Close()
	before = hp.discoveries
	if got := names(); !slices.Equal(got, []string{"b", "c", "idle"}) || hp.discoveries != before+1 {
		t.Errorf("after Close: %v, listed %d times", got, hp.discoveries-before)
	}
}

// syncHog kills a hog and waits until it has exited.
func syncHog(t *testing.T, h *sandboxtest.Hog) {
	t.Helper()
	p, err := os.FindProcess(h.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	select {
	case <-h.Done:
	case <-time.After(10 * time.Second):
		t.Fatalf("hog %d did not exit", h.Pid)
	}
}

func rmdirRetry(t testing.TB, dir string) {
	t.Helper()
	if err := cgroup.RemoveAll([]string{dir}, 2*time.Second); err != nil {
		t.Errorf("rmdir %s: %v", dir, err)
	}
}
