package hostmode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// The hostile but fair workload: it ignores SIGTERM and touches
// memory from two threads at the machine's full speed, wanting 2 GiB in a
// workload root with headroom under a hard threshold: 384 of 512 MiB here
// (75–190 ms at 2–5 GiB/s, room for a loaded machine's scheduling; the
// 64 MiB case is bench/latency.sh -oom's), 128 of 256 MiB in the VM, whose
// emulated allocator is ten times slower.
// Left alone, the kernel OOM-kills it (the control). The kubelet gives a
// hard threshold's victim a 1 s grace period; with the growth stop, its
// growth stops at the decision (the kernel says it held it back: v1
// memory.failcnt, v2 memory.events high), the grace period passes,
// evictd's hard kill ends it, the kernel OOM killer never fires, and its
// cgroup gets its limits back once it is empty. (Whether evictd would have
// won without the stop is a race of speeds, measured by bench/latency.sh
// -oom, not asserted here.)
func TestHostGrowthStop(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	const script = "ignore-term; threads 2; alloc 2Gi; hold"
	limit, headroom := int64(512<<20), "384Mi"
	if mode == sandbox.V2 {
		limit, headroom = 256<<20, "128Mi"
	}
	t.Run("alone-oom-kill", func(t *testing.T) {
		sb := sandboxtest.New(t, limit)
		c, _ := sb.Child("hog")
		hg := sandboxtest.StartHog(t, script, c)
		select {
		case <-hg.Done:
		case <-time.After(120 * time.Second):
			t.Fatal("the hog was not OOM-killed within 120 s")
		}
		if oom, _ := sb.OOM(); oom.Kills == 0 {
			t.Fatalf("the hog ended with no kernel OOM kill: %v", hg.Err)
		}
	})
	t.Run("evictd", func(t *testing.T) {
		sb := sandboxtest.New(t, limit)
		c, err := sb.Child("hog")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": headroom}})
		if err != nil {
			t.Fatal(err)
		}
		var logs syncbuf.Buffer
		recs := make(chan agent.Record, 100)
		h, err := New(Options{Options: agent.Options{Policy: cfg, Log: logTo(&logs), NoGrowthStop: false,
			Wakeups: agent.WakeupOptions{MemcgNotification: agent.Auto, PSI: agent.Off, MemoryEvents: agent.Auto, FastPoll: agent.Auto}},
			WorkloadRoot: sb.Parent.Rel, GoneTimeout: 10 * time.Second,
			OnRecord: func(r agent.Record) { recs <- r }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		// The first synchronize has run before the hog starts.
		<-recs
		hg := sandboxtest.StartHog(t, script, c)
		// The eviction's record comes once the kill is over, at about
		// the time the hog's exit is seen: wait for both.
		var evict *agent.Record
		var armedAt time.Time // when a synchronize woken to arm ended, the hog running
		hogDone := hg.Done
		for evict == nil || hogDone != nil {
			select {
			case r := <-recs:
				if evict == nil && strings.HasSuffix(r.Trigger.Source, " arming") {
					armedAt = time.Now()
				}
				for _, a := range r.Actions {
					if a.Kind == "evict" && evict == nil {
						evict = &r
					}
				}
			case <-hogDone:
				hogDone = nil
			case <-ctx.Done():
				t.Fatalf("no eviction within 120 s; logs:\n%s", logs.String())
			}
		}
		oom, _ := sb.OOM()
		act := evict.Actions[0]
		want := map[sandbox.Mode]string{sandbox.V1: actuate.MechMemoryLimit, sandbox.V2: actuate.MechMemoryHigh}[mode]
		if act.Stop == nil || act.Stop.Mechanism != want || act.Stop.Error != "" || act.Stop.Limit == 0 {
			t.Fatalf("growth stop %+v, want %s", act.Stop, want)
		}
		if act.Error != "" || act.Result == nil || !act.Result.Gone {
			t.Fatalf("eviction %+v: want the hog killed by evictd", act)
		}
		if oom.Kills != 0 {
			t.Fatalf("kernel OOM kills with the growth stop: %+v; logs:\n%s", oom, logs.String())
		}
		if n := heldBack(t, mode, c.Memory); n == 0 {
			t.Fatal("the kernel never held the hog back: the stop was not what kept the OOM killer away")
		}
		t.Logf("stopped by %s at %d bytes, %s after the %s trigger (%s), early %v (armed %v before it); evicted by %s",
			act.Stop.Mechanism, act.Stop.Limit, act.Stop.AfterTrigger, evict.Trigger.Reason, evict.Trigger.Source, act.Stop.Early,
			evict.Trigger.At.Sub(armedAt), act.Result.Method)
		// The early stop: a synchronize that the arming wake-up ran had
		// ranked the hog before the crossing's wake-up came, so that
		// wake-up stopped it before its own synchronize. (A loaded machine
		// may still be inside the arming synchronize at the crossing: then
		// the synchronize after it stops the hog, as it would without.)
		if !armedAt.IsZero() && armedAt.Before(evict.Trigger.At) && !act.Stop.Early {
			t.Errorf("armed %v before the crossing's wake-up, yet the stop was the synchronize's (%+v); logs:\n%s",
				evict.Trigger.At.Sub(armedAt), act.Stop, logs.String())
		}

		// The agent's next synchronize finds the workload gone and
		// gives its cgroup its limits back.
		for deadline := time.Now().Add(30 * time.Second); !released(mode, c.Memory); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the emptied workload cgroup kept its growth stop; logs:\n%s", logs.String())
			}
		}
	})
}

// heldBack is the kernel's count of the workload's allocations held back
// by a limit: v1 memory.failcnt, v2 memory.events high.
func heldBack(t *testing.T, mode sandbox.Mode, dir string) uint64 {
	t.Helper()
	if mode == sandbox.V2 {
		ev, err := cgroupv2.ReadMemoryEvents(dir)
		if err != nil {
			t.Fatal(err)
		}
		return ev.High
	}
	n, err := cgroupv1.ReadMemoryFailcnt(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func released(mode sandbox.Mode, dir string) bool {
	if mode == sandbox.V2 {
		v, err := cgroupv2.ReadMemoryHigh(dir)
		return err == nil && v == cgroup.Max
	}
	oc, err := cgroupv1.ReadMemoryOOMControl(dir)
	lim, lerr := cgroupv1.ReadMemoryLimitInBytes(dir)
	return err == nil && lerr == nil && !oc.OOMKillDisable && lim > 1<<40
}

// envCrashAgent makes the test binary an agent that stops its victim's
// growth, says so on stdout and then hangs before the kill, for the parent
// test to SIGKILL it: "STATEFILE:ROOT".
const envCrashAgent = "EVICTD_TEST_CRASH_AGENT"

func maybeCrashAgent() {
	v, ok := os.LookupEnv(envCrashAgent)
	if !ok {
		return
	}
	state, root, _ := strings.Cut(v, ":")
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "64Mi"}})
	if err != nil {
		panic(err)
	}
	h, err := New(Options{Options: agent.Options{Policy: cfg, StateFile: state, Wakeups: agent.NoWakeups}, WorkloadRoot: root,
		BeforeEvict: func(agent.Trigger, policy.Decision, agent.Action) {
			// The stop is in force; wait for it to reach the holds file.
			for {
				if _, err := os.Stat(agent.HoldsPath(state)); err == nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
			fmt.Println("held")
			select {} // SIGKILL comes here
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	h.Sync(context.Background(), agent.Trigger{Reason: "test"})
	fmt.Fprintln(os.Stderr, "no eviction")
	os.Exit(3)
}

// A growth stop in force when evictd is killed (a crash, an OOM kill of
// evictd, kill -9 between the stop and the victim's kill) is undone by the
// next start: otherwise the victim stays at its limit with nothing to end
// it, on v1 asleep at the limit for good.
func TestHostUndoesGrowthStopLeftByCrash(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	sb := sandboxtest.New(t, 256<<20)
	c, _ := sb.Child("victim")
	sandboxtest.StartHog(t, "ignore-term; alloc 200Mi; hold", c)
	for deadline := time.Now().Add(60 * time.Second); usage(sb, c.Memory) < 200<<20; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hog never used 200 MiB")
		}
	}
	state := filepath.Join(t.TempDir(), "state.json")
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashAgent+"="+state+":"+sb.Parent.Rel)
	var out bytes.Buffer
	cmd.Stderr = &out
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the agent did not stop the victim: %q %v; stderr:\n%s", line, err, out.String())
	}
	if released(mode, c.Memory) {
		t.Fatal("the victim is not held")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if released(mode, c.Memory) {
		t.Fatal("the killed agent's stop was undone by something else: the test shows nothing")
	}
	var logs syncbuf.Buffer
	cfg := memoryOnly(t)
	h, err := New(Options{Options: agent.Options{Policy: cfg, StateFile: state, Log: logTo(&logs), Wakeups: agent.NoWakeups}, WorkloadRoot: sb.Parent.Rel})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Wakeups.Close()
	if !released(mode, c.Memory) {
		t.Fatalf("the next start left the dead agent's growth stop in force; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "undid a growth stop a previous run of evictd left in force") {
		t.Fatalf("no log line says so:\n%s", logs.String())
	}
	if _, err := os.Stat(agent.HoldsPath(state)); !os.IsNotExist(err) {
		t.Fatalf("holds file left after the undo: %v", err)
	}
}
