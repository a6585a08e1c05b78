package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
)

// slowWorld is world whose soft kills take their grace period: a kill with
// a grace above the hard one (1 s) blocks until the test releases it, the
// context ends, or a kill of the same pod with the hard grace comes in (the
// pod is gone then). Every kill is recorded with the fake time it started.
type slowWorld struct {
	*world
	mu       sync.Mutex
	calls    []string
	started  chan string
	released map[string]chan struct{}
}

func (s *slowWorld) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, ev policy.Eviction) (EvictResult, error) {
	at := s.clock.Now().Sub(t0)
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%s grace=%v at=%v", pod.Name, grace, at))
	rel := s.released[pod.Name]
	if rel == nil {
		rel = make(chan struct{})
		s.released[pod.Name] = rel
	}
	s.mu.Unlock()
	s.started <- pod.Name
	if grace > time.Second {
		select {
		case <-rel: // the pod ended after SIGTERM, within its grace period
		case <-ctx.Done():
			return EvictResult{Method: "SIGTERM (cancelled)"}, ctx.Err()
		}
	} else {
		s.release(pod.Name) // the hard kill ends any wait for the pod
	}
	if !s.listed(pod.Name) { // the other kill of the same pod ended it
		return EvictResult{Method: "fake (already gone)", Gone: true}, nil
	}
	return s.world.Evict(ctx, pod, grace, ev)
}

func (s *slowWorld) listed(name string) bool {
	s.world.mu.Lock()
	defer s.world.mu.Unlock()
	for _, p := range s.world.pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (s *slowWorld) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.released[name]; ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

func (s *slowWorld) kills() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *slowWorld) setClock(d time.Duration) {
	s.clock.mu.Lock()
	s.clock.now = t0.Add(d)
	s.clock.mu.Unlock()
}

// softThenHard sets w up for the scripts below and returns their engine: a
// hard threshold of 1Gi and a soft one of 2Gi (grace 30s,
// evictionMaxPodGracePeriod an hour) with profile prof; 1500Mi available,
// 500Mi once *hard is set. besteffort holds 400Mi: evicting it leaves
// 900Mi, still below the hard threshold, so the burstable pod goes next.
// The critical pod is left out: it only gets in the way here.
func softThenHard(t *testing.T, w *world, hard *bool, prof policy.Profile) *policy.Engine {
	t.Helper()
	w.ws["besteffort"] = 400 * mi
	w.pods = w.pods[:3]
	w.avail = func(time.Time) int64 {
		if *hard {
			return 500 * mi
		}
		return 1500 * mi
	}
	cfg := engine(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "30s"}, 3600).Config()
	cfg.Profile = prof
	eng, err := policy.NewEngine(cfg, policy.Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// kubernetes#123872, scripted: a soft threshold (2Gi, grace 30s) evicts the
// best-effort pod with its full termination grace period of an hour; five
// minutes later the node is below the hard threshold (1Gi). The kubelet's
// kill blocks its loop for that hour, so the hard threshold waits for it;
// with the profile's hard-preempts-soft the next synchronize escalates the
// kill to the hard grace period (1 s) and then evicts the next pod.
func TestHardPreemptsSoft(t *testing.T) {
	run := func(t *testing.T, prof policy.Profile) []string {
		clock := &fakeClock{now: t0, manual: true}
		w := &slowWorld{world: newWorld(clock), started: make(chan string, 8), released: map[string]chan struct{}{}}
		// besteffort holds 400Mi: escalating its kill leaves 900Mi, still
		// below the hard threshold, so the burstable pod goes next.
		w.pods[2] = mkPod("besteffort", 0, "", "", 3600, false)
		var hard bool
		eng := softThenHard(t, w.world, &hard, prof)
		waker := notify.NewWaker()
		var logs syncbuf.Buffer
		first := make(chan struct{})
		var once sync.Once
		a, err := New(Config{Engine: eng, Observer: sources{w, w}, Evictor: w, Clock: clock, Waker: waker,
			Log: slog.New(slog.NewTextHandler(&logs, nil)), StopTimeout: -1, OnRecord: func(Record) { once.Do(func() { close(first) }) }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { a.Run(ctx); close(ran) }()
		defer func() { cancel(); <-ran }()
		const guard = 30 * time.Second // hang guard only
		wake := func(at time.Duration) {
			w.setClock(at)
			waker.Wake(notify.Wake{Source: "test", At: clock.Now()})
		}
		waitKill := func(name string) {
			t.Helper()
			select {
			case got := <-w.started:
				if got != name {
					t.Fatalf("kill of %s, want %s; kills %v", got, name, w.kills())
				}
			case <-time.After(guard):
				t.Fatalf("no kill of %s within %v; kills %v\n%s", name, guard, w.kills(), logs.String())
			}
		}

		select { // the first synchronize: soft threshold met, in its grace period
		case <-first:
		case <-time.After(guard):
			t.Fatalf("no first synchronize within %v", guard)
		}
		wake(31 * time.Second)
		waitKill("besteffort") // the soft eviction: grace min(3600, 3600) s

		hard = true
		wake(5 * time.Minute)
		if prof.HardPreemptsSoft {
			waitKill("besteffort") // escalated: same pod, grace 1 s
			// 900Mi is still below 1Gi: the next tick (new stats) evicts
			// the next pod.
			wake(5*time.Minute + 10*time.Second)
			waitKill("burstable")
		} else {
			// The loop is inside the soft kill and cannot take the wake-up.
			// Give a loop that could the chance to act (this only makes a
			// wrong implementation fail; the right one waits regardless).
			select {
			case got := <-w.started:
				t.Fatalf("kill of %s while the soft kill still runs; kills %v", got, w.kills())
			case <-time.After(200 * time.Millisecond):
			}
			// The pod ends at the end of its hour.
			w.setClock(time.Hour + 31*time.Second)
			w.release("besteffort")
			waitKill("burstable")
		}
		return w.kills()
	}

	t.Run("kubelet", func(t *testing.T) {
		got := run(t, policy.Profile{})
		// Both thresholds are met after the hour; the kubelet's order lets
		// the soft one decide, so even then the grace is the soft one's
		// (min(3600, terminationGracePeriodSeconds 20) s).
		want := []string{"besteffort grace=1h0m0s at=31s", "burstable grace=20s at=1h0m31s"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("kills %q, want %q", got, want)
		}
	})
	t.Run("hard-preempts-soft", func(t *testing.T) {
		got := run(t, policy.Profile{HardPreemptsSoft: true})
		want := []string{"besteffort grace=1h0m0s at=31s", "besteffort grace=1s at=5m0s", "burstable grace=1s at=5m10s"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("kills %q, want %q", got, want)
		}
	})
}

// apiWorld is world whose kills return at once but whose pods stay listed
// until a kill with the hard grace: Kubernetes mode's evictor returns when
// the API server accepted the eviction, and the pod terminates for its
// grace period.
type apiWorld struct {
	*world
	mu    sync.Mutex
	calls []string
}

func (a *apiWorld) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, ev policy.Eviction) (EvictResult, error) {
	a.mu.Lock()
	a.calls = append(a.calls, fmt.Sprintf("%s grace=%v at=%v", pod.Name, grace, a.clock.Now().Sub(t0)))
	a.mu.Unlock()
	if grace > time.Second {
		return EvictResult{Method: "fake API (terminating)"}, nil
	}
	return a.world.Evict(ctx, pod, grace, ev)
}

func (a *apiWorld) kills() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.calls, "; ")
}

// With hard-preempts-soft, a soft eviction whose pod is still terminating
// is in progress: the next soft decision waits for it (no second eviction
// of the same pod), and a hard one is carried out at once, with the hard
// grace, on that pod.
func TestHardPreemptsSoftTerminatingPod(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := &apiWorld{world: newWorld(clock)}
	var hard bool
	eng := softThenHard(t, w.world, &hard, policy.Profile{HardPreemptsSoft: true})
	waker := notify.NewWaker()
	recs := make(chan Record, 64)
	a, err := New(Config{Engine: eng, Observer: sources{w, w}, Evictor: w, Clock: clock, Waker: waker, Log: logTo(&bytes.Buffer{}),
		OnRecord: func(r Record) { recs <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { a.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	next := func() Record {
		t.Helper()
		select {
		case r := <-recs:
			return r
		case <-time.After(30 * time.Second): // hang guard only
			t.Fatalf("no synchronize; kills %s", w.kills())
		}
		return Record{}
	}
	wake := func(at time.Duration) {
		clock.mu.Lock()
		clock.now = t0.Add(at)
		clock.mu.Unlock()
		waker.Wake(notify.Wake{Source: "test", At: clock.Now()})
	}
	next() // soft met, in grace
	wake(31 * time.Second)
	if r := next(); len(r.Actions) != 1 || !r.Actions[0].Background {
		t.Fatalf("soft eviction: %+v", r.Actions)
	}
	// After the kill returned: the same stats, not acted on twice (the
	// kubelet's stale-stats rule), and no wait for the pod's cleanup.
	if r := next(); r.Trigger.Reason != "after-eviction" || len(r.Actions) != 0 {
		t.Fatalf("after the soft kill returned: %s, %+v", r.Trigger.Reason, r.Actions)
	}
	wake(41 * time.Second) // fresh stats: the pod still terminates
	if r := next(); len(r.Actions) != 1 || r.Actions[0].Deferred == "" {
		t.Fatalf("the next soft decision on the terminating pod: %+v", r.Actions)
	}
	hard = true
	wake(51 * time.Second)
	r := next()
	if len(r.Actions) != 1 || !r.Actions[0].Escalated || r.Actions[0].Grace != time.Second {
		t.Fatalf("hard decision: %+v", r.Actions)
	}
	if got, want := w.kills(), "besteffort grace=10s at=31s; besteffort grace=1s at=51s"; got != want {
		t.Fatalf("kills %q, want %q", got, want)
	}
}

// A stop while a background soft kill waits out its grace period treats it
// as any eviction in progress (issue 23's rule): within the stop timeout it
// finishes; with no stop timeout it is cut, and stays in the state for the
// next start.
func TestHardPreemptsSoftStop(t *testing.T) {
	for _, c := range []struct {
		name     string
		timeout  time.Duration
		finished bool
	}{{"finishes within the stop timeout", time.Minute, true}, {"cut without one", -1, false}} {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{now: t0, manual: true}
			w := &slowWorld{world: newWorld(clock), started: make(chan string, 8), released: map[string]chan struct{}{}}
			w.pods[2] = mkPod("besteffort", 0, "", "", 3600, false)
			var hard bool
			eng := softThenHard(t, w.world, &hard, policy.Profile{HardPreemptsSoft: true})
			waker := notify.NewWaker()
			first := make(chan struct{})
			var once sync.Once
			state := filepath.Join(t.TempDir(), "state.json")
			a, err := New(Config{Engine: eng, Observer: sources{w, w}, Evictor: w, Clock: clock, Waker: waker, Log: logTo(&bytes.Buffer{}),
				StopTimeout: c.timeout, StateFile: state, OnRecord: func(Record) { once.Do(func() { close(first) }) }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() { a.Run(ctx); close(ran) }()
			<-first
			w.setClock(31 * time.Second)
			waker.Wake(notify.Wake{Source: "test", At: clock.Now()})
			select {
			case <-w.started: // the soft kill waits in the background
			case <-time.After(30 * time.Second):
				t.Fatal("no soft kill")
			}
			cancel()
			if c.finished {
				w.release("besteffort") // the workload exits within its grace period
			}
			select {
			case <-ran:
			case <-time.After(30 * time.Second): // hang guard only
				t.Fatal("Run did not return after the stop")
			}
			if got := strings.Join(w.world.evicted, ","); (got == "besteffort") != c.finished {
				t.Fatalf("evicted %q, want the kill finished: %v", got, c.finished)
			}
			b, _ := os.ReadFile(state)
			if left := strings.Contains(string(b), `"evicting"`); left == c.finished {
				t.Fatalf("state file after the stop (eviction left for the next start: %v):\n%s", left, b)
			}
		})
	}
}
