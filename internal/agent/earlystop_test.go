package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/syncbuf"
)

// recHolder is a Holder that changes nothing and records whom it held.
type recHolder struct {
	mu   sync.Mutex
	held []string
}

func (h *recHolder) Hold(pod *v1.Pod, r actuate.Resource) (*actuate.Hold, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, pod.Name)
	return &actuate.Hold{Target: actuate.Target{Name: pod.Name}, Resource: r, Mechanism: "test"}, nil
}

func (h *recHolder) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.held...)
}

// earlyRig runs an agent with a hard memory.available<1Gi threshold, a
// waker and a recording holder, on newWorld's pods (the memory ranking's
// first pod that is not critical: besteffort), and returns it once the
// start synchronize has armed it.
type earlyRig struct {
	w      *world
	clock  *fakeClock
	waker  *notify.Waker
	holder *recHolder
	recs   chan Record
	logs   *syncbuf.Buffer // written by the loop while the test reads it
}

func newEarlyRig(t *testing.T) *earlyRig {
	t.Helper()
	h := &recHolder{}
	r := newEarlyRigHolder(t, h)
	r.holder = h
	return r
}

// newEarlyRigHolder is newEarlyRig with holder as the agent's Holder
// (earlyRig.holder stays nil).
func newEarlyRigHolder(t *testing.T, holder Holder) *earlyRig {
	t.Helper()
	// Ticking: a synchronize's stats are newer than the last one's (the
	// engine acts on nothing else), and it begins after the wake-up's stop.
	clock := &fakeClock{now: t0, manual: true, tick: time.Millisecond}
	r := &earlyRig{w: newWorld(clock), clock: clock, waker: notify.NewWaker(), recs: make(chan Record, 8), logs: &syncbuf.Buffer{}}
	r.w.avail = func(time.Time) int64 { return 3 * gi }
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "1m"}, 0),
		Observer: sources{r.w, r.w}, Evictor: r.w, Holder: holder, Clock: clock, Waker: r.waker,
		Log:      slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnRecord: func(rec Record) { r.recs <- rec }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	r.next(t) // the start synchronize, which arms
	return r
}

func (r *earlyRig) next(t *testing.T) Record {
	t.Helper()
	select {
	case rec := <-r.recs:
		return rec
	case <-time.After(5 * time.Second):
		t.Fatalf("no synchronize; log:\n%s", r.logs)
		return Record{}
	}
}

// wake delivers a wake-up the way a notifier does: the hook runs first, on
// the caller's goroutine, so what it held is known when Wake returns.
func (r *earlyRig) wake(crossed string) {
	r.waker.Wake(notify.Wake{Source: "memcg-threshold memory.available", At: r.clock.Now(), Crossed: crossed})
}

func (r *earlyRig) setAvail(b int64) {
	r.w.mu.Lock()
	r.w.avail = func(time.Time) int64 { return b }
	r.w.mu.Unlock()
}

// The crossing's wake-up stops the armed pod's growth before any
// synchronize, and the synchronize that evicts it records that stop as
// early, timed from the wake-up.
func TestEarlyStopConfirmed(t *testing.T) {
	r := newEarlyRig(t)
	r.setAvail(512 * mi)
	r.wake("memory.available<1Gi")
	if got := r.holder.names(); len(got) != 1 || got[0] != "besteffort" {
		t.Fatalf("held before the synchronize: %v, want [besteffort] (critical ranks first but is never taken)", got)
	}
	rec := r.next(t)
	if len(rec.Actions) != 1 || rec.Actions[0].Pod.Name != "besteffort" {
		t.Fatalf("actions %+v, want besteffort evicted", rec.Actions)
	}
	gs := rec.Actions[0].Stop
	if gs == nil || !gs.Early || gs.Error != "" || gs.Released != "" {
		t.Fatalf("victim's stop %+v, want the early one, in force", gs)
	}
	if gs.AfterTrigger < 0 || gs.At.Before(rec.Trigger.At) {
		t.Errorf("early stop at %v, %v after the trigger at %v", gs.At, gs.AfterTrigger, rec.Trigger.At)
	}
	if got := r.holder.names(); len(got) != 1 {
		t.Errorf("holds %v: the synchronize held the victim again", got)
	}
	if rec.EarlyStopUndone != nil {
		t.Errorf("undone %+v", rec.EarlyStopUndone)
	}
	if !strings.Contains(r.logs.String(), "stop_early=true") {
		t.Errorf("the eviction's log line does not say the stop was early:\n%s", r.logs)
	}
}

// An early stop on a pod the synchronize does not evict is undone by it,
// before any eviction, and the record says whom and why: here the
// threshold turned out not met.
func TestEarlyStopUndoneWithoutEviction(t *testing.T) {
	r := newEarlyRig(t)
	r.wake("memory.available<1Gi") // available is still 3Gi
	if got := r.holder.names(); len(got) != 1 {
		t.Fatalf("held %v, want the armed pod", got)
	}
	rec := r.next(t)
	if len(rec.Actions) != 0 {
		t.Fatalf("actions %+v with the threshold not met", rec.Actions)
	}
	u := rec.EarlyStopUndone
	if u == nil || u.Pod == nil || u.Pod.Name != "besteffort" || !u.Early || !strings.HasPrefix(u.Released, "not the victim") {
		t.Fatalf("undone %+v, want besteffort's early stop released", u)
	}
	if !strings.Contains(r.logs.String(), "early growth stop undone") {
		t.Errorf("no log line for the undo:\n%s", r.logs)
	}
}

// When the ranking changed since the arming, the synchronize evicts its own
// victim with a stop of its own and undoes the armed pod's.
func TestEarlyStopUndoneForAnotherVictim(t *testing.T) {
	r := newEarlyRig(t)
	r.w.mu.Lock()
	r.w.ws["besteffort"] = 0 // no longer above its request: burstable ranks first
	r.w.mu.Unlock()
	r.setAvail(512 * mi)
	r.wake("memory.available<1Gi")
	rec := r.next(t)
	if len(rec.Actions) != 1 || rec.Actions[0].Pod.Name != "burstable" {
		t.Fatalf("actions %+v, want burstable evicted", rec.Actions)
	}
	if gs := rec.Actions[0].Stop; gs == nil || gs.Early || gs.Error != "" {
		t.Errorf("victim's stop %+v, want the synchronize's own", gs)
	}
	if u := rec.EarlyStopUndone; u == nil || u.Pod == nil || u.Pod.Name != "besteffort" {
		t.Errorf("undone %+v, want besteffort's", u)
	}
	if got := r.holder.names(); len(got) != 2 || got[0] != "besteffort" || got[1] != "burstable" {
		t.Errorf("holds %v, want [besteffort burstable]", got)
	}
}

// Only a hard memory threshold's crossing stops growth early: a wake-up
// that names no crossing, or a soft threshold's, runs the synchronize alone.
func TestEarlyStopOnlyOnHardCrossing(t *testing.T) {
	r := newEarlyRig(t)
	for _, crossed := range []string{"", "memory.available<2Gi (soft, grace 1m0s)", "nodefs.available<10%"} {
		r.wake(crossed)
		r.next(t)
		if got := r.holder.names(); len(got) != 0 {
			t.Fatalf("wake-up with Crossed %q held %v", crossed, got)
		}
	}
}

// cgroupHolder holds every pod at one real v1 memory cgroup, through
// actuate's Killer: what a move writes is the kernel's file.
type cgroupHolder struct {
	k   *actuate.Killer
	dir string
}

func (h *cgroupHolder) Hold(pod *v1.Pod, r actuate.Resource) (*actuate.Hold, error) {
	return h.k.Hold(actuate.Target{Name: pod.Name, Cgroup: h.dir}, r)
}

// An early stop that its synchronize finds just short of the threshold
// (the wake-up's usage level was off by the page cache that moved since)
// is moved up by the shortfall, not undone: the pod may grow until the
// threshold is met, and no further. The next crossing's synchronize
// confirms it as the victim's stop; a moved stop that the next
// synchronize does not confirm is undone, once. On a real v1 memory
// cgroup (the move is a write of memory.limit_in_bytes).
func TestEarlyStopMovedWhenJustShort(t *testing.T) {
	cgrouptest.RequireV1Memory(t)
	dir := cgrouptest.Mkdirs(t, cgrouptest.V1Memory, cgrouptest.UniqueName(t))
	limit := func() uint64 {
		t.Helper()
		v, err := cgroupv1.ReadMemoryLimitInBytes(dir)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const short = 3 << 20 // under earlyMoveMax
	for _, confirm := range []bool{true, false} {
		t.Run(map[bool]string{true: "confirmed", false: "undone"}[confirm], func(t *testing.T) {
			r := newEarlyRigHolder(t, &cgroupHolder{k: &actuate.Killer{Mode: actuate.V1, MemoryRoot: cgrouptest.V1Memory}, dir: dir})
			r.setAvail(1*gi + short)
			r.wake("memory.available<1Gi")
			rec := r.next(t)
			m := rec.EarlyStopMoved
			if m == nil || m.Pod == nil || m.Pod.Name != "besteffort" || !m.Early || rec.EarlyStopUndone != nil || len(rec.Actions) != 0 {
				t.Fatalf("moved %+v, undone %+v, actions %+v: want besteffort's stop moved", m, rec.EarlyStopUndone, rec.Actions)
			}
			if got := limit(); got != short+earlyMoveSlack || m.Limit != got {
				t.Fatalf("memory.limit_in_bytes %d (record %d) after the move, want %d + %d above the empty cgroup's usage", got, m.Limit, short, earlyMoveSlack)
			}
			if !strings.Contains(r.logs.String(), "early growth stop moved") {
				t.Errorf("no log line for the move:\n%s", r.logs)
			}
			if confirm {
				r.setAvail(1*gi - mi)
				r.wake("memory.available<1Gi")
				rec = r.next(t)
				if len(rec.Actions) != 1 || rec.Actions[0].Pod.Name != "besteffort" {
					t.Fatalf("actions %+v, want besteffort evicted", rec.Actions)
				}
				if gs := rec.Actions[0].Stop; gs == nil || !gs.Early || !gs.Moved || gs.Limit != short+earlyMoveSlack {
					t.Fatalf("victim's stop %+v, want the early one as moved", gs)
				}
				return
			}
			r.wake("memory.available<1Gi") // still short: the moved stop is not moved again
			rec = r.next(t)
			if u := rec.EarlyStopUndone; u == nil || u.Pod == nil || u.Pod.Name != "besteffort" || rec.EarlyStopMoved != nil {
				t.Fatalf("undone %+v, moved %+v: want the moved stop undone", u, rec.EarlyStopMoved)
			}
			if got := limit(); got < 1<<40 {
				t.Fatalf("memory.limit_in_bytes %d after the undo, want unlimited again", got)
			}
		})
	}
}
