package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/evictd/evictd/internal/notify"
)

// flakyStats fails the Summary while err is set.
type flakyStats struct {
	*world
	mu  sync.Mutex
	err error
}

func (f *flakyStats) Summary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.world.Summary(ctx)
}

// An agent that cannot read the stats says so: one log line when it goes
// blind and one when it sees again (not one per tick), a counter by stage,
// and /healthz and /readyz 503 and evictd_blind 1 after
// DefaultUnhealthyAfter failed synchronizes.
func TestBlindAgentIsUnhealthy(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 4 * gi }
	fs := &flakyStats{world: w}
	m := NewMetrics()
	var logs bytes.Buffer
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, fs}, Evictor: w, Clock: clock, Metrics: m, Log: logTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	sync := func() { a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()}) }
	sync()
	if err := a.Healthy(); err != nil {
		t.Fatalf("healthy agent: %v", err)
	}
	if err := a.Ready(); err != nil {
		t.Fatalf("ready agent: %v", err)
	}
	fs.err = errors.New("open /sys/fs/cgroup/memory/workloads/memory.stat: no such file or directory")
	for i := 1; i <= 10; i++ {
		sync()
		err := a.Healthy()
		if (err != nil) != (i >= DefaultUnhealthyAfter) {
			t.Fatalf("after %d failed synchronizes: Healthy() = %v", i, err)
		}
		if err != nil && !strings.Contains(err.Error(), "memory.stat: no such file") {
			t.Fatalf("health error does not say why: %v", err)
		}
		if rerr := a.Ready(); (rerr != nil) != (err != nil) {
			t.Fatalf("after %d failed synchronizes: Ready() = %v, Healthy() = %v", i, rerr, err)
		}
		if got, want := value(m.Blind), b2f(i >= DefaultUnhealthyAfter); got != want {
			t.Fatalf("after %d failed synchronizes: evictd_blind = %v, want %v", i, got, want)
		}
	}
	if got := counterValue(m.SyncErrors.WithLabelValues(stageStats)); got != 10 {
		t.Errorf("evictd_synchronize_errors_total{stage=stats} = %v, want 10", got)
	}
	fs.err = nil
	sync()
	if err := a.Healthy(); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if got := value(m.Blind); got != 0 {
		t.Fatalf("after recovery: evictd_blind = %v", got)
	}
	for line, want := range map[string]int{"reading stats failed": 1, "reading stats works again": 1, "synchronize stopped early": 1} {
		if got := strings.Count(logs.String(), line); got != want {
			t.Errorf("%q logged %d times, want %d:\n%s", line, got, want, logs.String())
		}
	}
}

// A state file that cannot be written is logged once, not on every tick,
// and its recovery once.
func TestStateFileFailureLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "sub")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil { // a file where the state directory should be
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 4 * gi }
	var logs bytes.Buffer
	m := NewMetrics()
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Metrics: m, Log: logTo(&logs), StateFile: filepath.Join(blocker, "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
		a.flushState()
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Fatalf("failure logged %d times in 5 synchronizes, want 1:\n%s", n, logs.String())
	}
	if got := counterValue(m.SyncErrors.WithLabelValues(stageStateFile)); got != 5 {
		t.Errorf("evictd_synchronize_errors_total{stage=state-file} = %v, want 5", got)
	}
	os.Remove(blocker)
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	a.flushState()
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	a.flushState()
	if n := strings.Count(logs.String(), "writing the state-file works again"); n != 1 {
		t.Fatalf("recovery logged %d times, want 1:\n%s", n, logs.String())
	}
}

// On a full disk (a small tmpfs) the decision log cuts the partial line it
// left, and writes again once there is room.
func TestDecisionLogResumesAfterENOSPC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 32<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "decisions.jsonl")
	l, err := OpenDecisionLog(path, DecisionLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := func(i int) Record {
		return Record{Trigger: Trigger{Reason: "timer"}, Actions: []Action{{Kind: "evict", Message: strings.Repeat("x", 1500), Signal: string(rune('a' + i%26))}}}
	}
	written, failed := 0, error(nil)
	for i := 0; i < 100 && failed == nil; i++ {
		if failed = l.Write(rec(i)); failed == nil {
			written++
		}
	}
	if !errors.Is(failed, unix.ENOSPC) {
		t.Fatalf("no ENOSPC after %d records: %v", written, failed)
	}
	if err := l.Write(rec(0)); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("a second write on the full disk: %v", err)
	}
	checkLines(t, path, written)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(rec(1)); err != nil {
		t.Fatalf("the log did not resume once space returned: %v", err)
	}
	checkLines(t, path, written+1)
}

// checkLines asserts the file holds exactly n lines, each a whole record.
func checkLines(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("the log ends in a partial line (%d bytes)", len(b))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	got := 0
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d is not a whole record: %v", got+1, err)
		}
		got++
	}
	if got != n {
		t.Fatalf("%d records in the log, want %d", got, n)
	}
}

// Observed is called once, after the first synchronize that observed the
// node: not while the stats fail, and not again after that.
func TestObservedCalledOnceWhenTheNodeIsSeen(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 4 * gi }
	fs := &flakyStats{world: w, err: errors.New("cgroup gone")}
	waker := notify.NewWaker()
	recs := make(chan Record, 8)
	var calls atomic.Int32
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, fs}, Evictor: w, Clock: clock, Waker: waker, Log: logTo(&bytes.Buffer{}),
		OnRecord: func(r Record) { recs <- r }, Observed: func() { calls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	synchronize := func() {
		t.Helper()
		waker.Wake(notify.Wake{Source: "test", At: clock.Now()})
		select {
		case <-recs:
		case <-time.After(5 * time.Second):
			t.Fatal("no synchronize")
		}
	}
	<-recs // the start's, blind
	synchronize()
	if n := calls.Load(); n != 0 {
		t.Fatalf("Observed called %d times while the stats failed", n)
	}
	fs.mu.Lock()
	fs.err = nil
	fs.mu.Unlock()
	synchronize()
	synchronize()
	synchronize() // the loop calls Observed after the record: one more round trip sees it
	if n := calls.Load(); n != 1 {
		t.Fatalf("Observed called %d times after three observed synchronizes, want 1", n)
	}
}
