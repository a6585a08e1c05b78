package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/notify"
	"github.com/evictd/evictd/internal/policy"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock advances by d on every After (auto mode), so a whole scripted
// scenario runs instantly; in manual mode After never fires.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	manual bool
	tick   time.Duration // each Now moves the clock on by this much (0: not)
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.tick)
	return c.now
}
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if c.manual {
		return ch
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	ch <- c.now
	c.mu.Unlock()
	return ch
}

// world is a fake node: pods with working sets and a node available memory
// that a script sets as a function of time. Evicting a pod removes it and
// frees its working set.
type world struct {
	mu      sync.Mutex
	clock   *fakeClock
	pods    []*v1.Pod
	ws      map[string]int64 // pod name → working set
	avail   func(time.Time) int64
	evicted []string
	graces  []time.Duration
	freed   int64
}

const gi, mi = int64(1 << 30), int64(1 << 20)

func (w *world) Summary(context.Context) (*statsv1alpha1.Summary, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := metav1.NewTime(w.clock.Now())
	avail := uint64(w.avail(now.Time) + w.freed)
	ws := uint64(8*gi) - avail
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Memory: &statsv1alpha1.MemoryStats{Time: now, AvailableBytes: &avail, WorkingSetBytes: &ws, UsageBytes: &ws}}}
	for _, p := range w.pods {
		v := uint64(w.ws[p.Name])
		s.Pods = append(s.Pods, statsv1alpha1.PodStats{
			PodRef: statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
			Memory: &statsv1alpha1.MemoryStats{Time: now, WorkingSetBytes: &v},
		})
	}
	return s, nil
}

func (w *world) Pods(context.Context) ([]*v1.Pod, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*v1.Pod(nil), w.pods...), nil
}

// sources is an Observer made of a pod source and a stats source, asked one
// after the other (the fakes of these tests keep their pods and their stats
// apart; a wiring reads the stats of the listing it made).
type sources struct {
	pods interface {
		Pods(context.Context) ([]*v1.Pod, error)
	}
	stats interface {
		Summary(context.Context) (*statsv1alpha1.Summary, error)
	}
}

func (s sources) Observe(ctx context.Context) Observation {
	pods, perr := s.pods.Pods(ctx)
	sum, serr := s.stats.Summary(ctx)
	return Observation{Pods: pods, PodsErr: perr, Summary: sum, SummaryErr: serr, Restat: s.stats.Summary}
}

func (s sources) Pods(ctx context.Context) ([]*v1.Pod, error) { return s.pods.Pods(ctx) }

func (w *world) Evict(_ context.Context, pod *v1.Pod, grace time.Duration, _ policy.Eviction) (EvictResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evicted = append(w.evicted, pod.Name)
	w.graces = append(w.graces, grace)
	for i, p := range w.pods {
		if p.Name == pod.Name {
			w.pods = append(w.pods[:i], w.pods[i+1:]...)
			break
		}
	}
	w.freed += w.ws[pod.Name]
	return EvictResult{Method: "fake", Gone: true}, nil
}

func mkPod(name string, prio int32, req, lim string, tgps int64, critical bool) *v1.Pod {
	c := v1.Container{Name: "c"}
	if req != "" {
		c.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(req)}
	}
	if lim != "" {
		c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(lim)}
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "host", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{c}, Priority: &prio, TerminationGracePeriodSeconds: &tgps}}
	if critical {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	}
	return p
}

func engine(t *testing.T, hard, soft, grace map[string]string, maxGrace int64) *policy.Engine {
	t.Helper()
	th, err := policy.ParseThresholdConfig(nil, hard, soft, grace, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.NewEngine(policy.Config{Thresholds: th, PressureTransitionPeriod: 5 * time.Minute,
		MaxPodGracePeriodSeconds: maxGrace, LocalStorageCapacityIsolation: true, Features: policy.DefaultFeatureGates()}, policy.Filesystems{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newWorld(clock *fakeClock) *world {
	w := &world{clock: clock, ws: map[string]int64{
		"besteffort": 600 * mi, "burstable": 1500 * mi, "guaranteed": 900 * mi, "critical": 3 * gi,
	}}
	w.pods = []*v1.Pod{
		mkPod("guaranteed", 1000, "1Gi", "1Gi", 30, false),
		mkPod("burstable", 100, "1Gi", "", 20, false),
		mkPod("besteffort", 0, "", "", 10, false),
		mkPod("critical", 0, "", "", 10, true),
	}
	return w
}

func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// A kubelet-style script: memory falls below the soft threshold (grace
// 1m30s), then below the hard one. The loop evicts one pod per synchronize,
// in the kubelet's order (exceeds request, priority, usage above request),
// never the critical pod, with the kubelet's grace periods, and logs nothing
// on quiet ticks.
func TestRunScriptedMemoryPressure(t *testing.T) {
	clock := &fakeClock{now: t0}
	w := newWorld(clock)
	w.avail = func(now time.Time) int64 {
		switch el := now.Sub(t0); {
		case el < 30*time.Second:
			return 3 * gi // quiet
		case el < 5*time.Minute:
			return 1500 * mi // soft (2Gi) met, hard (1Gi) not
		default:
			return 0 // hard met (600Mi once the first eviction freed its memory)
		}
	}
	var logs, dlog bytes.Buffer
	var recs []Record
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := New(Config{
		Engine: engine(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
			map[string]string{"memory.available": "1m30s"}, 15),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Log: logTo(&logs), DecisionLog: NewDecisionLog(&dlog),
		Metrics: NewMetrics(),
		OnRecord: func(r Record) {
			recs = append(recs, r)
			if r.Time.Sub(t0) > 10*time.Minute {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Run(ctx)
	a.cfg.DecisionLog.Close()

	// 1500Mi available + 600Mi freed by the first eviction = 2100Mi: the
	// soft threshold (2Gi) is no longer met, so exactly one soft eviction.
	// Then 0 + 600Mi: the hard threshold evicts the burstable pod (it
	// exceeds its request; the critical pod ranks above it but is never
	// evicted), after which 2100Mi meets nothing. The guaranteed pod and
	// the critical one stay.
	want := []string{"besteffort", "burstable"}
	if strings.Join(w.evicted, ",") != strings.Join(want, ",") {
		t.Fatalf("evicted %v, want %v", w.evicted, want)
	}
	// soft: min(maxPodGracePeriod 15, tgps 10) = 10 s; hard: 1 s.
	if w.graces[0] != 10*time.Second || w.graces[1] != time.Second {
		t.Fatalf("grace periods %v", w.graces)
	}
	// The first (soft) eviction waits out the 1m30s grace from the first
	// observation at t0+30s.
	var first time.Time
	for _, r := range recs {
		if len(r.Decision.Evictions) > 0 {
			first = r.Time
			break
		}
	}
	// The loop wakes when the grace period runs out rather than at the
	// next 10 s tick.
	if el := first.Sub(t0); el != 2*time.Minute {
		t.Fatalf("first eviction at t0+%s, want t0+2m (first met at t0+30s, + 1m30s grace)", el)
	}
	// After an eviction the next synchronize runs at once ("after-eviction").
	for i, r := range recs {
		if len(r.Decision.Evictions) > 0 && i+1 < len(recs) && recs[i+1].Trigger.Reason != "after-eviction" {
			t.Fatalf("synchronize after an eviction was %q", recs[i+1].Trigger.Reason)
		}
	}
	if got := counterValue(a.cfg.Metrics.Evictions.WithLabelValues("memory.available")); got != 2 {
		t.Fatalf("evictd_evictions_total{memory.available} = %v, want 2", got)
	}
	// One log line per eviction and per state change, none per tick: far
	// fewer lines than synchronizes.
	lines := strings.Count(logs.String(), "\n")
	if strings.Count(logs.String(), "msg=evicted") != 2 || lines > 12 || len(recs) < 50 {
		t.Fatalf("%d log lines for %d synchronizes:\n%s", lines, len(recs), logs.String())
	}
	// The decision log holds the interesting synchronizes as JSON lines.
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(dlog.String()), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("decision log line %q: %v", l, err)
		}
		n++
	}
	if n == 0 || n >= len(recs) {
		t.Fatalf("decision log has %d lines for %d synchronizes", n, len(recs))
	}
}

// A wake-up runs a synchronize at once, without waiting for the timer.
func TestWakeRunsSynchronize(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 3 * gi }
	waker := notify.NewWaker()
	got := make(chan Record, 4)
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Waker: waker, Log: logTo(&bytes.Buffer{}),
		OnRecord: func(r Record) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	if r := <-got; r.Trigger.Reason != "start" {
		t.Fatalf("first synchronize: %q", r.Trigger.Reason)
	}
	waker.Wake(notify.Wake{Source: "memcg-threshold memory.available", At: clock.Now()})
	select {
	case r := <-got:
		if r.Trigger.Reason != "wake" || r.Trigger.Source != "memcg-threshold memory.available" {
			t.Fatalf("trigger %+v", r.Trigger)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wake-up did not run a synchronize")
	}
}

// The state file keeps the soft threshold's first-observed time across a
// restart, so the grace period is not restarted; a corrupt file is a warning
// and a fresh start.
func TestStatePersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	sf := filepath.Join(dir, "state.json")
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 1500 * mi }
	mk := func(logs *bytes.Buffer) *Agent {
		a, err := New(Config{Engine: engine(t, nil, map[string]string{"memory.available": "2Gi"},
			map[string]string{"memory.available": "1m"}, 30), Observer: sources{w, w}, Evictor: w, Clock: clock,
			StateFile: sf, Log: logTo(logs)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := mk(&bytes.Buffer{})
	if d := a.Sync(context.Background(), Trigger{Reason: "start", At: clock.Now()}).Decision; len(d.InGrace) != 1 {
		t.Fatalf("soft threshold not in grace: %+v", d.InGrace)
	}
	a.flushState()
	clock.now = t0.Add(70 * time.Second)
	var logs bytes.Buffer
	b := mk(&logs) // restart
	if !strings.Contains(logs.String(), "engine state restored") {
		t.Fatalf("state not restored: %s", logs.String())
	}
	if d := b.Sync(context.Background(), Trigger{Reason: "start", At: clock.Now()}).Decision; len(d.Evictions) != 1 {
		t.Fatalf("restart lost the grace timer: in grace %+v, evictions %v", d.InGrace, d.Evictions)
	}
	b.flushState()
	if err := os.WriteFile(sf, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	mk(&logs)
	if !strings.Contains(logs.String(), "starting fresh") || !strings.Contains(logs.String(), "corrupt") {
		t.Fatalf("corrupt state not reported: %s", logs.String())
	}
}

func TestSaveStateAtomic(t *testing.T) {
	dir := t.TempDir()
	sf := filepath.Join(dir, "s.json")
	st := policy.State{Synced: true, NodeConditions: []v1.NodeConditionType{v1.NodeMemoryPressure}}
	if err := SaveState(sf, st); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(sf)
	if err != nil || got == nil || !got.Synced || len(got.NodeConditions) != 1 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
	if s, err := LoadState(filepath.Join(dir, "missing")); s != nil || err != nil {
		t.Fatalf("missing file: %v %v", s, err)
	}
}

func TestMetricsAndHealthz(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 500 * mi }
	m := NewMetrics()
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Metrics: m, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve("127.0.0.1:0", m, a)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + srv.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(p); code != http.StatusServiceUnavailable {
			t.Fatalf("%s before the first synchronize: %d", p, code)
		}
	}
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(p); code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`evictd_evictions_total{eviction_signal="memory.available"} 1`,
		`evictd_signal_available_bytes{eviction_signal="memory.available"} 5.24288e+08`,
		`evictd_node_condition{condition="MemoryPressure"} 1`,
		`evictd_synchronizations_total{trigger="timer"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	clock.now = clock.now.Add(time.Minute)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(p); code != http.StatusServiceUnavailable {
			t.Fatalf("%s after 6 silent intervals: %d", p, code)
		}
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// orderedWorld records whether the kernel thresholds were moved before or
// after the eviction of the same synchronize.
type orderedWorld struct {
	*world
	calls []string
}

func (o *orderedWorld) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, ev policy.Eviction) (EvictResult, error) {
	o.calls = append(o.calls, "evict")
	return o.world.Evict(ctx, pod, grace, ev)
}

func (o *orderedWorld) Update(time.Time, *statsv1alpha1.Summary, []policy.ResolvedThreshold) {
	o.calls = append(o.calls, "update")
}

// A synchronize that evicts moves the kernel thresholds only after the
// eviction: a memcg v1 registration waits for an RCU grace period (about
// 20 ms each), which must not stand between the decision and the kill.
func TestThresholdsMovedAfterEviction(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	o := &orderedWorld{world: newWorld(clock)}
	o.avail = func(time.Time) int64 { return 512 * mi }
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{o, o}, Evictor: o, Updater: o, Clock: clock, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	r := a.Sync(context.Background(), Trigger{Reason: "wake", At: clock.Now()})
	if len(r.Decision.Evictions) != 1 {
		t.Fatalf("evictions %+v", r.Decision.Evictions)
	}
	if got := strings.Join(o.calls, ","); got != "evict,update" {
		t.Fatalf("calls %s, want evict,update", got)
	}
}

// countingObserver counts the agent's questions.
type countingObserver struct {
	Observer
	observes, lists int
}

func (c *countingObserver) Observe(ctx context.Context) Observation {
	c.observes++
	return c.Observer.Observe(ctx)
}

func (c *countingObserver) Pods(ctx context.Context) ([]*v1.Pod, error) {
	c.lists++
	return c.Observer.Pods(ctx)
}

// The agent asks one question per synchronize, quiet or evicting, from a
// timer or a wake-up: Observe once, and the pods it evicts are that
// observation's. (Only Run's cleanup wait after an eviction lists the pods
// alone, between synchronizes.)
func TestOneObservePerSynchronize(t *testing.T) {
	clock := &fakeClock{now: t0}
	w := newWorld(clock)
	avail := 3 * gi
	w.avail = func(time.Time) int64 { return avail }
	obs := &countingObserver{Observer: sources{w, w}}
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: obs, Evictor: w, Clock: clock, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a.Sync(ctx, Trigger{Reason: "timer", At: clock.Now()})
	if obs.observes != 1 || obs.lists != 0 {
		t.Fatalf("a quiet synchronize: %d observes, %d listings; want 1, 0", obs.observes, obs.lists)
	}
	avail = 0
	clock.now = clock.now.Add(time.Second) // a fresh observation
	rec := a.Sync(ctx, Trigger{Reason: "wake", Source: "test", At: clock.Now()})
	if len(w.evicted) != 1 {
		t.Fatalf("no eviction under hard pressure: %+v", rec.Decision)
	}
	if obs.observes != 2 {
		t.Errorf("an evicting synchronize: %d observes in all, want 2", obs.observes)
	}
	if obs.lists != 0 {
		t.Errorf("an evicting synchronize listed the pods %d more times, want 0", obs.lists)
	}
}
