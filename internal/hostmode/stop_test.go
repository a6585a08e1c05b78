package hostmode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// A stop during a grace period (real cgroups: v1 here, v2 in the VM tier)
// shortens nothing: with a stop timeout shorter than the grace period the
// agent leaves the SIGTERM-ignoring workload running, keeps the eviction
// and its deadline in the state file, and the next start is healthy while
// it finishes the eviction at that deadline, not earlier and without a new
// grace period. (The stop used to hard-kill the workload at once.)
func TestStopKeepsGracePeriodAcrossRestart(t *testing.T) {
	sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	victim, err := sb.Child("victim")
	if err != nil {
		t.Fatal(err)
	}
	h := sandboxtest.StartHog(t, "ignore-term; hold", victim)
	waitProcs(t, victim.Memory, h.Pid)
	sandboxtest.WaitIgnoresTerm(t, h.Pid)
	const grace = 4
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{
		EvictionSoft:              map[string]string{"memory.available": "1Pi"}, // met on any host
		EvictionSoftGracePeriod:   map[string]string{"memory.available": "1s"},
		EvictionMaxPodGracePeriod: grace,
	})
	if err != nil {
		t.Fatal(err)
	}
	tgps := int64(grace)
	var logs syncbuf.Buffer
	o := hostOptions(t, sb.Parent.Rel, &logs)
	o.Policy = cfg
	o.Workloads = &workload.File{Workloads: []workload.Spec{{Name: "victim", Cgroup: "victim", TerminationGracePeriodSeconds: &tgps}}}
	o.StateFile = filepath.Join(t.TempDir(), "state.json")
	o.StopTimeout = 300 * time.Millisecond
	started := make(chan struct{}, 1)
	o.BeforeEvict = func(agent.Trigger, policy.Decision, agent.Action) { started <- struct{}{} }
	first, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("no eviction started in 60 s:\n%s", logs.String())
	}
	cancel() // SIGTERM to evictd, in the middle of the 4 s grace period
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not stop after its stop timeout")
	}
	select {
	case <-h.Done:
		t.Fatalf("the stop killed the workload during its grace period:\n%s", logs.String())
	default:
	}
	b, err := os.ReadFile(o.StateFile)
	if err != nil || !strings.Contains(string(b), `"evicting"`) {
		t.Fatalf("state file without the eviction in progress (%v):\n%s", err, b)
	}

	logs.Reset()
	o.BeforeEvict = nil
	second, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Healthy(); err != nil {
		t.Errorf("restarted in the middle of an eviction, /healthz says: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := make(chan error, 1)
	go func() { done2 <- second.Run(ctx2) }()
	select {
	case <-h.Done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the restarted agent did not finish the eviction:\n%s", logs.String())
	}
	killed := time.Now()
	cancel2()
	<-done2
	if !strings.Contains(logs.String(), "resuming an eviction interrupted by the last stop") {
		t.Errorf("no resume logged:\n%s", logs.String())
	}
	dl := deadlineLogged(t, logs.String())
	if killed.Before(dl) {
		t.Errorf("killed at %s, %s before the grace period's deadline %s", killed.Format(time.StampMilli), dl.Sub(killed), dl.Format(time.StampMilli))
	}
	if strings.Count(logs.String(), "eviction started") != 0 {
		t.Errorf("the restart began a new eviction (a new grace period):\n%s", logs.String())
	}
	if b, _ := os.ReadFile(o.StateFile); strings.Contains(string(b), `"evicting"`) {
		t.Errorf("the finished eviction is still in the state file:\n%s", b)
	}
}

// deadlineLogged finds the deadline= of the resume line.
func deadlineLogged(t *testing.T, logs string) time.Time {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, "resuming an eviction") {
			continue
		}
		_, v, ok := strings.Cut(l, "deadline=")
		if !ok {
			break
		}
		v, _, _ = strings.Cut(v, " ")
		d, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatalf("deadline %q: %v", v, err)
		}
		return d
	}
	t.Fatalf("no deadline logged:\n%s", logs)
	return time.Time{}
}

// A workload cgroup left frozen by a kill that a crash interrupted is
// thawed when the agent starts, and the log says so (it used to stay
// frozen, holding its memory, until something thawed it).
func TestStartThawsWorkloadLeftFrozen(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 0)
	c, err := sb.Child("frozen")
	if err != nil {
		t.Fatal(err)
	}
	h := sandboxtest.StartHog(t, "hold", c)
	waitProcs(t, c.Memory, h.Pid)
	file, frozen, thawed := filepath.Join(c.Freezer, "freezer.state"), "FROZEN", "THAWED"
	freeze := func(on bool) error {
		if on {
			return cgroupv1.WriteFreezerState(c.Freezer, cgroupv1.Frozen)
		}
		return cgroupv1.WriteFreezerState(c.Freezer, cgroupv1.Thawed)
	}
	if mode == sandbox.V2 {
		file, frozen, thawed = filepath.Join(c.Memory, "cgroup.freeze"), "1", "0"
		freeze = func(on bool) error { return cgroupv2.WriteCgroupFreeze(c.Memory, on) }
	}
	if err := freeze(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { freeze(false) })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) == frozen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never froze")
		}
	}
	var logs syncbuf.Buffer
	host, err := New(hostOptions(t, sb.Parent.Rel, &logs))
	if err != nil {
		t.Fatal(err)
	}
	stopHost(host)
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != thawed {
		t.Fatalf("%s reads %q after the start, want %s", file, b, thawed)
	}
	if !strings.Contains(logs.String(), "thawed a workload cgroup left frozen") {
		t.Fatalf("the thaw is not logged:\n%s", logs.String())
	}
}
