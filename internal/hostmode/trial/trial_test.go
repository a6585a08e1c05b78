package trial

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	hog.MaybeRun() // the trials' hogs are this test binary re-executed
	os.Exit(m.Run())
}

// wakeups are the ones evictd run has by default; noWakeups leave the
// agent its first synchronize and a timer that never fires in a test.
var (
	wakeups   = agent.WakeupOptions{MemcgNotification: agent.Auto, PSI: agent.Auto, MemoryEvents: agent.Auto, FastPoll: agent.Auto}
	noWakeups = agent.WakeupOptions{MemcgNotification: agent.Off, PSI: agent.Off, MemoryEvents: agent.Off, FastPoll: agent.Off}
)

// start makes a trial of limit bytes on the real kernel (skipping without
// root or a memory controller), its one child cgroup and its agent, with a
// hard memory.available threshold at avail and the wake-ups w; Close is
// the test's cleanup too.
func start(t *testing.T, ctx context.Context, limit int64, timeout time.Duration, avail string, w agent.WakeupOptions) (*Trial, *Agent) {
	t.Helper()
	sandboxtest.NeedRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(ctx, Options{Name: fmt.Sprintf("/evictd-trial-test-%d-%s", os.Getpid(), strconv.FormatInt(time.Now().UnixNano(), 36)),
		Limit: limit, Timeout: timeout, Exe: exe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": avail}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := tr.NewAgent(AgentOptions{Options: hostmode.Options{
		Options:     agent.Options{Policy: cfg, Wakeups: w, Interval: time.Hour},
		GoneTimeout: 5 * time.Second}, Keep: EvictionDecided})
	if err != nil {
		t.Fatal(err)
	}
	return tr, a
}

// startHog makes the trial's child cgroup, starts the agent a (nil: none)
// and a hog following script in the child.
func startHog(t *testing.T, tr *Trial, a *Agent, script string) *Hog {
	t.Helper()
	c, err := tr.Child("hog")
	if err != nil {
		t.Fatal(err)
	}
	if a != nil {
		a.Start()
	}
	h, err := tr.StartHog(script, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// closeAndCheck closes tr and fails when any of its cgroups or a hog's
// process is left.
func closeAndCheck(t *testing.T, tr *Trial, hogs ...*Hog) {
	t.Helper()
	dirs := tr.Sandbox.Parent.Dirs()
	for _, c := range tr.Sandbox.Children() {
		dirs = append(dirs, c.Dirs()...)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind (%v)", d, err)
		}
	}
	for _, h := range hogs {
		if cgrouptest.Alive(h.Cmd.Process.Pid) {
			t.Errorf("hog %d still running", h.Cmd.Process.Pid)
		}
	}
}

// A hog ramping through the threshold is evicted by the real agent: Wait
// returns its record, after the crossing the watcher saw (or Early, with
// the kill before the watcher's next read), with no OOM kill; Close
// leaves nothing. Once with the working-set watcher, once with the usage
// watcher on its own real-time thread.
func TestEvicted(t *testing.T) {
	for _, w := range []Watch{
		{Measure: WorkingSet, Every: 250 * time.Microsecond},
		{Measure: Usage, Every: 100 * time.Microsecond, FIFO: true},
	} {
		t.Run(fmt.Sprintf("%s fifo %v", w.Measure, w.FIFO), func(t *testing.T) {
			tr, a := start(t, context.Background(), 128<<20, time.Minute, "64Mi", wakeups)
			h := startHog(t, tr, a, "sleep 300ms; alloc 32Mi; ramp 64Mi 128Mi; hold")
			w.FIFOFailed = func(err error) { t.Logf("no real-time priority here: %v", err) }
			out, err := tr.Wait(tr.Crossing(w, 64<<20), h, 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, early %v, crossed %s, trigger %s", out.Kind, out.Early, out.Crossed.Format(time.StampMicro), out.Record.Trigger.Reason)
			if out.Kind != Evicted || !EvictionDecided(out.Record) || out.OOM.Struck() {
				t.Fatalf("want an eviction and no OOM kill: %+v", out)
			}
			if out.Early == !out.Crossed.IsZero() {
				t.Errorf("early %v with crossing %v", out.Early, out.Crossed)
			}
			gone := false
			for _, act := range out.Record.Actions {
				gone = gone || act.Kind == "evict" && act.Error == "" && act.Result != nil && act.Result.Gone
			}
			if !gone {
				t.Errorf("the record's eviction did not end the hog: %+v", out.Record.Actions)
			}
			closeAndCheck(t, tr, h)
		})
	}
}

// evictd woken by the kernel can kill the hog before the watcher's next
// read: an eviction, Early, not a hog that ended before the crossing. A
// watcher that reads once and then sleeps for an hour makes that happen
// every time.
func TestEvictedBeforeTheWatcherSaw(t *testing.T) {
	tr, a := start(t, context.Background(), 128<<20, time.Minute, "64Mi", wakeups)
	h := startHog(t, tr, a, "sleep 300ms; ramp 96Mi 128Mi; hold")
	out, err := tr.Wait(tr.Crossing(Watch{Measure: WorkingSet, Every: time.Hour}, 64<<20), h, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != Evicted || !out.Early || !out.Crossed.IsZero() {
		t.Fatalf("want an early eviction: %+v", out)
	}
	closeAndCheck(t, tr, h)
}

// A hog that jumps past the limit in one step, with an agent that is never
// woken: the kernel OOM killer, reported as OOMKilled with its count.
func TestOOMKilled(t *testing.T) {
	tr, a := start(t, context.Background(), 64<<20, time.Minute, "1Mi", noWakeups)
	h := startHog(t, tr, a, "sleep 300ms; alloc 256Mi; hold")
	out, err := tr.Wait(tr.Crossing(Watch{Measure: Usage, Every: time.Millisecond}, 1<<40), h, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != OOMKilled || !out.OOM.Struck() {
		t.Fatalf("want an OOM kill: %+v", out)
	}
	closeAndCheck(t, tr, h)
}

// A hog that crashes (exit 3) with no eviction: before the crossing and
// after it, each its own Failure, with how it ended. The second hog
// crashes only once Wait has the crossing (await: no race with the
// watcher).
func TestEndedByItself(t *testing.T) {
	for _, c := range []struct {
		script string
		want   Reason
		text   string
	}{
		{"alloc 4Mi; crash", EndedBeforeCrossing, "the workload ended before it reached the threshold (exit status 3;"},
		{"alloc 48Mi; await GATE; crash", ExitedByItself, "the workload exited by itself (exit status 3;"},
	} {
		t.Run(c.want.String(), func(t *testing.T) {
			tr, a := start(t, context.Background(), 128<<20, time.Minute, "1Mi", noWakeups)
			gate := filepath.Join(t.TempDir(), "gate")
			h := startHog(t, tr, a, strings.ReplaceAll(c.script, "GATE", gate))
			// The working set: the usage counts the hog's binary too.
			crossed := relay(tr.Crossing(Watch{Measure: WorkingSet, Every: time.Millisecond}, 32<<20), func() {
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Error(err)
				}
			})
			out, err := tr.Wait(crossed, h, 100*time.Millisecond)
			var f *Failure
			if !errors.As(err, &f) || f.Reason != c.want || f.State.ExitCode() != 3 || !strings.HasPrefix(err.Error(), c.text) {
				t.Fatalf("Wait = %+v, %v; want reason %s, exit 3, %q…", out, err, c.want, c.text)
			}
			closeAndCheck(t, tr, h)
		})
	}
}

// relay hands on the crossing unbuffered, so that after runs once Wait
// has taken it.
func relay(crossed <-chan time.Time, after func()) <-chan time.Time {
	out := make(chan time.Time)
	go func() {
		if at, ok := <-crossed; ok {
			out <- at
			after()
		}
	}()
	return out
}

// The trial's end before the crossing is NeverCrossed (its timeout here);
// after it with no eviction, NoEviction (its context cancelled here, once
// Wait has the crossing).
func TestNoCrossingNoEviction(t *testing.T) {
	tr, a := start(t, context.Background(), 128<<20, 1500*time.Millisecond, "1Mi", noWakeups)
	h := startHog(t, tr, a, "alloc 16Mi; hold")
	_, err := tr.Wait(tr.Crossing(Watch{Measure: WorkingSet, Every: time.Millisecond}, 1<<40), h, time.Second)
	var f *Failure
	if !errors.As(err, &f) || f.Reason != NeverCrossed || err.Error() != "the workload never reached the threshold" {
		t.Fatalf("Wait = %v; want NeverCrossed", err)
	}
	closeAndCheck(t, tr, h)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, a = start(t, ctx, 128<<20, time.Minute, "1Mi", noWakeups)
	h = startHog(t, tr, a, "alloc 16Mi; hold")
	_, err = tr.Wait(relay(tr.Crossing(Watch{Measure: WorkingSet, Every: time.Millisecond}, 8<<20), cancel), h, time.Second)
	if !errors.As(err, &f) || f.Reason != NoEviction || f.Timeout != 0 || !strings.HasPrefix(err.Error(), "no eviction before the trial was cancelled; agent log: ") {
		t.Fatalf("Wait = %v; want NoEviction, cancelled", err)
	}
	closeAndCheck(t, tr, h)
}

// The failures' texts, which evictd selftest prints and reports in its
// JSON.
func TestFailureText(t *testing.T) {
	for _, c := range []struct {
		f    Failure
		want string
	}{
		{Failure{Reason: NeverCrossed}, "the workload never reached the threshold"},
		{Failure{Reason: NoEviction, Timeout: time.Minute, AgentLog: "L"}, "no eviction within 1m0s; agent log: L"},
		{Failure{Reason: EndedBeforeCrossing, Said: "x", AgentLog: "L"}, `the workload ended before it reached the threshold (<nil>; no OOM kill, no eviction; it said "x"); agent log: L`},
		{Failure{Reason: ExitedByItself, AgentLog: "L"}, `the workload exited by itself (<nil>; no OOM kill, no eviction; it said ""); agent log: L`},
	} {
		if got := c.f.Error(); got != c.want {
			t.Errorf("%s: %q, want %q", c.f.Reason, got, c.want)
		}
	}
}

// A cancelled context (Ctrl-C) ends Wait, and Close removes the sandbox
// with its hog still holding memory, its watcher and its sampler still
// reading and its agent running; a panic in the caller's goroutine with
// Close deferred does the same. Under the race detector this is also the
// check that the watchers do not read the sandbox Close clears.
func TestCloseOnCancelAndPanic(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr, a := start(t, ctx, 128<<20, time.Minute, "1Mi", wakeups)
	h := startHog(t, tr, a, "alloc 16Mi; hold")
	crossed := tr.Crossing(Watch{Measure: WorkingSet, Every: time.Millisecond}, 1<<40)
	time.AfterFunc(300*time.Millisecond, cancel)
	tr.Sample(Watch{Every: time.Millisecond}, nil, 0, time.Hour) // returns at the cancel
	_, err := tr.Wait(crossed, h, time.Second)
	var f *Failure
	if !errors.As(err, &f) || f.Reason != NeverCrossed {
		t.Fatalf("Wait after cancel = %v, want NeverCrossed", err)
	}
	closeAndCheck(t, tr, h)

	tr, _ = start(t, context.Background(), 128<<20, time.Minute, "1Mi", wakeups) // its agent never starts
	c, err := tr.Child("hog")
	if err != nil {
		t.Fatal(err)
	}
	var h2 *Hog
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v", p)
			}
		}()
		defer tr.Close()
		if h2, err = tr.StartHog("alloc 16Mi; hold", c); err != nil {
			t.Fatal(err)
		}
		tr.Crossing(Watch{Measure: Usage, Every: time.Millisecond}, 1<<40)
		panic("boom")
	}()
	closeAndCheck(t, tr, h2)
}

// Sample reads the usage until done closes (here: once the watcher has
// seen the hog's 32Mi, which it holds) and a little after: the reads are
// in order, the read that saw done is among them, so the 32Mi is too.
func TestSample(t *testing.T) {
	tr, _ := start(t, context.Background(), 128<<20, time.Minute, "1Mi", noWakeups)
	h := startHog(t, tr, nil, "sleep 100ms; alloc 32Mi; hold")
	done := make(chan struct{})
	var closed time.Time
	crossed := tr.Crossing(Watch{Measure: Usage, Every: time.Millisecond}, 32<<20)
	go func() {
		<-crossed
		closed = time.Now()
		close(done)
	}()
	ss := tr.Sample(Watch{Every: time.Millisecond}, done, 20*time.Millisecond, time.Minute)
	if len(ss) == 0 {
		t.Fatal("no samples")
	}
	var peak int64
	for i, s := range ss {
		peak = max(peak, s.Bytes)
		if i > 0 && s.At.Before(ss[i-1].At) {
			t.Fatalf("sample %d at %v before the one before it", i, s.At)
		}
	}
	if peak < 32<<20 {
		t.Errorf("peak %d bytes, below the hog's 32Mi", peak)
	}
	if last := ss[len(ss)-1].At; last.Before(closed) {
		t.Errorf("last sample at %v, before done closed at %v", last, closed)
	}
	closeAndCheck(t, tr, h)
}
