package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
)

// hangGuard fails the test when f does not return within d: the faults
// below used to block forever.
func hangGuard(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %s", what, d)
	}
}

func bigRecord(i int) Record {
	return Record{Time: t0.Add(time.Duration(i) * time.Second), Trigger: Trigger{Reason: "timer"},
		Actions: []Action{{Kind: "evict", Message: strings.Repeat("x", 1000), Signal: fmt.Sprint(i)}}}
}

// The decision log rotates at its size cap and keeps Keep files: PATH
// (newest), PATH.1 … PATH.Keep, every one holding whole records only and
// none past the cap.
func TestDecisionLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	l, err := OpenDecisionLog(path, DecisionLogOptions{MaxSize: 8 << 10, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := l.Write(bigRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	ents, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "decisions.jsonl,decisions.jsonl.1,decisions.jsonl.2" {
		t.Fatalf("files %v, want the log and 2 rotated ones", names)
	}
	last := -1
	for _, n := range []string{"decisions.jsonl.2", "decisions.jsonl.1", "decisions.jsonl"} {
		st, _ := os.Stat(filepath.Join(filepath.Dir(path), n))
		if st.Size() > 8<<10 {
			t.Errorf("%s is %d bytes, past the 8 KiB cap", n, st.Size())
		}
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(path), n))
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			var r Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: not a whole record: %v", n, err)
			}
			var i int
			fmt.Sscan(r.Actions[0].Signal, &i)
			if i != last+1 && last != -1 {
				t.Fatalf("%s: record %d after %d: rotation lost or reordered records", n, i, last)
			}
			last = i
		}
	}
	if last != 99 {
		t.Fatalf("the newest record is %d, want 99", last)
	}
}

// A log renamed or removed under the agent (logrotate), or rotated by hand
// and SIGHUP (Reopen), is written at its path again: records never go on
// into a file nobody reads (they used to).
func TestDecisionLogFollowsTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.jsonl")
	l, err := OpenDecisionLog(path, DecisionLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	write := func(i int) {
		t.Helper()
		if err := l.Write(bigRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	write(1)
	checkLines(t, path+".old", 1)
	checkLines(t, path, 1)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(2)
	checkLines(t, path, 1)
	// SIGHUP: the reopen itself closes the old file, before any record.
	if err := os.Rename(path, path+".older"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Reopen did not create the file again: %v", err)
	}
	write(3)
	checkLines(t, path+".older", 1)
	checkLines(t, path, 1)
}

// A symbolic link, a FIFO or a directory at the log's or the state file's
// path is refused, at once (a FIFO used to hang the start with no output;
// a link was followed, in a dry run too); the log is created 0640.
func TestOutputFilesRefuseLinksAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, nil, 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{link, "is a symbolic link"}, {fifo, "is a FIFO"}, {dir, "is a directory"}, {"/dev/null", "is a device"},
	} {
		hangGuard(t, 10*time.Second, "opening "+c.path, func() {
			_, err := OpenDecisionLog(c.path, DecisionLogOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decision log at %s: %v, want %q", c.path, err, c.want)
			}
			if _, err := LoadState(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("state file at %s: %v, want %q", c.path, err, c.want)
			}
			if err := CheckOutputPath(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("CheckOutputPath(%s): %v", c.path, err)
			}
		})
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("something was written through the link: %q", b)
	}
	path := filepath.Join(dir, "new.jsonl")
	l, err := OpenDecisionLog(path, DecisionLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	old := syscall.Umask(0)
	syscall.Umask(old)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640&^os.FileMode(old) {
		t.Errorf("created %v, want 0640 (less the umask %o)", st.Mode().Perm(), old)
	}
	// A state file far larger than any real one is refused before it is
	// read (a 1 GB one used to be read whole first).
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, bytes.Repeat([]byte(" "), MaxStateFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadState(huge); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("huge state file: %v", err)
	}
}

// A decision log on a pipe that nobody reads never stalls the loop: every
// synchronize returns, and the records that do not fit are dropped and
// counted (the loop used to block in write(2), /healthz turned 503 and
// SIGTERM waited for a reader).
func TestStalledDecisionLogNeverBlocksTheLoop(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	clock := &fakeClock{now: t0, manual: true}
	wd := newWorld(clock)
	n := 0
	wd.avail = func(time.Time) int64 { // met every other synchronize: each one is a change
		n++
		return map[bool]int64{true: 500 * mi, false: 4 * gi}[n%2 == 0]
	}
	m := NewMetrics()
	dl := NewDecisionLog(w)
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{wd, wd}, Evictor: noEvict{wd}, Clock: clock, Metrics: m, Log: logTo(&bytes.Buffer{}), DecisionLog: dl})
	if err != nil {
		t.Fatal(err)
	}
	hangGuard(t, 60*time.Second, "3000 synchronizes with a stalled decision log", func() {
		for i := 0; i < 3000; i++ {
			clock.now = clock.now.Add(time.Second)
			a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
		}
	})
	if dl.Dropped() == 0 {
		t.Fatal("no record dropped, yet the pipe holds 64 KiB and the queue 256 records")
	}
	if got := counterValue(m.OutputDropped.WithLabelValues(OutputDecisionLog)); got != float64(dl.Dropped()) {
		t.Errorf("evictd_output_dropped_total{output=decision-log} = %v, want %d", got, dl.Dropped())
	}
	hangGuard(t, 10*time.Second, "closing the stalled log", func() { dl.Close() })
}

// noEvict is a world whose evictions do nothing (observe-only pressure).
type noEvict struct{ *world }

func (noEvict) Evict(context.Context, *v1.Pod, time.Duration, policy.Eviction) (EvictResult, error) {
	return EvictResult{Method: "none"}, errors.New("refused")
}

// The state file is written when the state changed, not on every
// synchronize: an idle node wrote it (two fsyncs) 8,640 times a day.
func TestStateWrittenOnlyWhenChanged(t *testing.T) {
	sf := filepath.Join(t.TempDir(), "state.json")
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	avail := 4 * gi
	w.avail = func(time.Time) int64 { return avail + int64(clock.Now().Sub(t0)/time.Second)%50*mi } // the amounts move
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, StateFile: sf, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	sync := func() {
		clock.now = clock.now.Add(10 * time.Second)
		a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
		a.flushState()
		if st, err := os.Stat(sf); err == nil {
			// Every save is a new file renamed into place: a new inode (its
			// number may be reused) with a new change time.
			s := st.Sys().(*syscall.Stat_t)
			inodes[fmt.Sprint(s.Ino, s.Ctim)] = true
		}
	}
	for i := 0; i < 100; i++ {
		sync()
	}
	if len(inodes) != 1 {
		t.Fatalf("100 idle synchronizes wrote the state file %d times, want once", len(inodes))
	}
	avail = 512 * mi // pressure: first observed, condition raised
	sync()
	if len(inodes) != 2 {
		t.Fatalf("a change of state was not written (%d writes)", len(inodes))
	}
}

// /healthz stays healthy while an eviction's grace period holds the loop
// (it used to turn 503 after three intervals, so a liveness probe could
// restart the agent mid-eviction), and the grace period's start is logged.
func TestHealthyWhileEvicting(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 500 * mi }
	release := make(chan struct{})
	in := make(chan struct{})
	var logs syncbuf.Buffer
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: blockingEvictor{w, in, release}, Clock: clock, Log: slogTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); a.Sync(context.Background(), Trigger{Reason: "wake", At: clock.Now()}) }()
	<-in
	clock.mu.Lock()
	clock.now = clock.now.Add(25 * time.Second) // the kill's wait for the cgroup to empty, say
	clock.mu.Unlock()
	if err := a.Healthy(); err != nil {
		t.Errorf("during the eviction: %v", err)
	}
	close(release)
	<-done
	if !strings.Contains(logs.String(), "eviction started") {
		t.Errorf("the grace period's start is not logged:\n%s", logs.String())
	}
	clock.mu.Lock()
	clock.now = clock.now.Add(10 * time.Minute)
	clock.mu.Unlock()
	if err := a.Healthy(); err == nil {
		t.Error("healthy long after the eviction, with no synchronize since")
	}
}

type blockingEvictor struct {
	*world
	in, release chan struct{}
}

func (b blockingEvictor) Evict(ctx context.Context, pod *v1.Pod, grace time.Duration, ev policy.Eviction) (EvictResult, error) {
	close(b.in)
	<-b.release
	return b.world.Evict(ctx, pod, grace, ev)
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// Under steady pressure the decision log gets a record when something
// changes and a heartbeat, not one per synchronize; the ranking only where
// an eviction was decided; and each record says how many synchronizes it
// stands for. OnRecord still sees every synchronize whole.
func TestDecisionLogUnderSteadyPressure(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	phase := "steady"
	w.avail = func(now time.Time) int64 {
		if phase == "over" {
			return 4 * gi
		}
		return 500*mi + int64(now.Sub(t0)/time.Second)%50*mi // met; the amount moves
	}
	var buf syncbuf.Buffer
	dl := NewDecisionLog(&buf)
	seen := 0
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: noEvict{w}, Clock: clock, Log: logTo(&bytes.Buffer{}), DecisionLog: dl,
		OnRecord: func(Record) { seen++ }})
	if err != nil {
		t.Fatal(err)
	}
	const syncs = 600 // ten minutes at one synchronize a second (wake-ups)
	for i := 0; i < syncs; i++ {
		clock.now = clock.now.Add(time.Second)
		a.Sync(context.Background(), Trigger{Reason: "wake", At: clock.Now()})
		// A second of the fake clock passes in microseconds: let the
		// log's writer catch up as it would in a real second, so the test
		// judges what the log keeps, not whether 600 records fit its
		// queue on a loaded machine (569 of 600 once did, the rest
		// dropped and counted, as designed).
		if !dl.q.Flush(time.Minute) {
			t.Fatal("the decision log's writer did not catch up in a minute")
		}
	}
	phase = "over"
	for i := 0; i < 10; i++ {
		clock.now = clock.now.Add(time.Second)
		a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	}
	dl.Close()
	if n := dl.Dropped(); n != 0 {
		t.Errorf("the decision log dropped %d records", n)
	}
	if seen != syncs+10 {
		t.Errorf("OnRecord saw %d synchronizes, want %d", seen, syncs+10)
	}
	var recs []Record
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	// Every synchronize under pressure decides to evict here (and the
	// evictor refuses), so each is an action: the log keeps them all,
	// with the ranking. Without an action, only changes and heartbeats.
	evicting := 0
	for _, r := range recs {
		if len(r.Decision.Evictions) > 0 {
			evicting++
			if len(r.Decision.Candidates) == 0 {
				t.Fatal("a record that evicts lost its ranking")
			}
		}
	}
	if evicting != syncs {
		t.Fatalf("%d evicting records, want %d", evicting, syncs)
	}
	last := recs[len(recs)-1]
	if len(last.Decision.Met) != 0 {
		t.Errorf("the last record still has thresholds met: %+v", last.Decision.Met)
	}
}

// The same steady pressure with nothing evictable (observe-only): one
// record for the change, a heartbeat every DecisionLogHeartbeat, no
// ranking, and the counts of what was left out add up.
func TestDecisionLogHeartbeatOnly(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.pods = nil // nothing to evict: the engine decides no eviction
	w.avail = func(now time.Time) int64 { return 500*mi + int64(now.Sub(t0)/time.Second)%50*mi }
	var buf syncbuf.Buffer
	dl := NewDecisionLog(&buf)
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Log: logTo(&bytes.Buffer{}), DecisionLog: dl})
	if err != nil {
		t.Fatal(err)
	}
	const syncs = 600
	for i := 0; i < syncs; i++ {
		clock.now = clock.now.Add(time.Second)
		a.Sync(context.Background(), Trigger{Reason: "wake", At: clock.Now()})
	}
	dl.Close()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := 1 + int((syncs-1)*time.Second/DecisionLogHeartbeat)
	if len(lines) != want {
		t.Fatalf("%d records for %d synchronizes of steady pressure, want %d (the change and a heartbeat every %s)", len(lines), syncs, want, DecisionLogHeartbeat)
	}
	total := 0
	for _, l := range lines {
		var r Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Decision.Candidates != nil {
			t.Errorf("a record without an eviction carries the ranking")
		}
		total += 1 + r.Omitted
	}
	if total+a.logFilter.omitted != syncs {
		t.Errorf("records plus omitted = %d (and %d since the last), want %d synchronizes", total, a.logFilter.omitted, syncs)
	}
}

// The metrics server holds at most maxConns connections, however many idle
// keep-alive and slow-header ones a local process opens, and /healthz still
// answers (with no cap and no idle timeout, 500 idle connections stayed
// open and took the agent's descriptors).
func TestMetricsServerCapsConnections(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 4 * gi }
	m := NewMetrics()
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Metrics: m, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	srv, err := Serve("127.0.0.1:0", m, a)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fds0 := countFDs(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 { // idle keep-alive: one request answered, then nothing
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
				continue // closed at the cap meanwhile
			}
		} else { // slow: headers that never end
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		}
	}
	// This process holds both ends: the 200 client ends, and what the
	// server kept.
	time.Sleep(100 * time.Millisecond) // the server's closes of the ones it let go
	if held := countFDs(t) - fds0 - len(conns); held > maxConns+2 {
		t.Fatalf("the server holds %d descriptors for connections, past its cap of %d", held, maxConns)
	}
	if n := srv.ln.(*connLimiter).open(); n == 0 || n > maxConns {
		t.Fatalf("the limiter tracks %d connections, want 1 to %d", n, maxConns)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + srv.Addr() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz under the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz under the flood: %d", resp.StatusCode)
	}
	// A header block far past the limit is refused.
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 64 KiB header: %v %v, want 431", resp, err)
	}
}
