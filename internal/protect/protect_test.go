package protect

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/test/vm/vmtest"
)

func TestMain(m *testing.M) { vmtest.Main(m) }

const gib = int64(1) << 30

// The workloads every test uses: a Burstable web (1Gi of 2Gi), a Guaranteed
// db and a BestEffort batch job (no entry).
const workloadsYAML = `
workloads:
- name: web
  cgroup: web
  requests: {memory: 1Gi}
  limits: {memory: 2Gi}
- name: db
  cgroup: db
  requests: {memory: 2Gi, cpu: "1"}
  limits: {memory: 2Gi, cpu: "1"}
`

// settings: an 8 GiB node, so web's oom_score_adj is 1000 − 1000 × 1/8 = 875.
func settings(v2 bool, policy memqos.ReservationPolicy, factor *float64) memqos.Settings {
	s := memqos.DefaultSettings()
	s.CgroupV2 = v2
	s.MemoryCapacity, s.NodeAllocatableMemory = 8*gib, 8*gib
	s.ReservationPolicy = policy
	s.ThrottlingFactor = factor
	return s
}

// memoryRoot is a real memory hierarchy: the v1 memory controller on the
// host, cgroup v2 in the VM tier (where it must exist).
func memoryRoot(t testing.TB) (string, bool) {
	t.Helper()
	if vmtest.InVM() {
		return cgrouptest.RequireV2Memory(t), true
	}
	cgrouptest.RequireV1Memory(t)
	return cgrouptest.V1Memory, false
}

// newRoot makes a workload root with the given children.
func newRoot(t *testing.T, children ...string) (string, bool) {
	t.Helper()
	mem, v2 := memoryRoot(t)
	name := cgrouptest.UniqueName(t)
	root := cgrouptest.Mkdirs(t, mem, name)
	if v2 {
		cgrouptest.EnableV2Controllers(t, mem, name)
	}
	for _, c := range children {
		cgrouptest.Mkdirs(t, root, c)
	}
	// Runs before the directories' removal: kills what the tests' processes
	// forked (a killed shell's child stays in its cgroup).
	t.Cleanup(func() {
		for i := 0; i < 100; i++ {
			pids, err := cgroup.ReadCgroupProcsRecursive(root)
			if err != nil || len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return root, v2
}

func discover(t testing.TB, yaml, root string) []workload.Workload {
	t.Helper()
	f, err := workload.Parse([]byte(yaml), "workloads.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workload.Discover(f, root, "")
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// startIn starts argv and moves it into cgroup dir; killed at cleanup.
func startIn(t *testing.T, dir string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// A known start: the test process itself may be at -999 after a
	// Protector's Start, which children inherit (raising needs no capability).
	if err := host.WriteOOMScoreAdj("/proc", cmd.Process.Pid, 0); err != nil {
		t.Fatal(err)
	}
	if dir != "" {
		moveInto(t, dir, cmd.Process.Pid)
	}
	return cmd
}

func moveInto(t *testing.T, dir string, pid int) {
	t.Helper()
	if err := cgroup.WriteCgroupProcs(dir, pid); err != nil {
		t.Fatalf("moving %d into %s: %v", pid, dir, err)
	}
}

func oomOf(t *testing.T, pid int) int {
	t.Helper()
	v, err := host.ReadOOMScoreAdj("/proc", pid)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newProtector(t *testing.T, s memqos.Settings, root string, dry bool, logs *bytes.Buffer, now func() time.Time) *Protector {
	t.Helper()
	p, err := New(Config{Settings: s, Root: root, DryRun: dry, Log: slog.New(slog.NewTextHandler(logs, nil)), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOOMScoreAdjKept runs on real processes in real cgroups (v1 on the
// host, v2 in the VM): each workload's processes get the kubelet's
// oom_score_adj, children forked later inherit it, a process moved in later
// is caught by the next Apply, and a quiet Apply only lists the processes.
// Lowering (Guaranteed −997, evictd's −999) needs CAP_SYS_RESOURCE, which
// the VM's init has and this host's bounding set lacks: there evictd must
// say so once and go on.
func TestOOMScoreAdjKept(t *testing.T) {
	root, v2 := newRoot(t, "web", "db", "batch")
	web, db, batch := filepath.Join(root, "web"), filepath.Join(root, "db"), filepath.Join(root, "batch")
	// web's process forks a child only when told to, after Apply, and says
	// its PID. Only shell builtins but the child: no other process ever
	// runs in web, so a later Apply lists exactly {shell, child}. (The
	// shell used to wait for the go-ahead in a loop of `sleep 0.05` and
	// report through `mv`: on a loaded machine such a short-lived helper
	// was still in web at one Apply and gone at the next, a changed
	// process list that made the quiet Apply read web's memory files
	// again: "quiet Apply: 6 reads, 0 writes; want 3 reads".)
	webCmd, goAhead := startTalking(t, web, `read _; sleep 300 & echo $!; wait`)
	dbCmd := startIn(t, db, "sleep", "300")
	batchCmd := startIn(t, batch, "sleep", "300")
	for _, c := range []*exec.Cmd{webCmd, dbCmd, batchCmd} {
		if v := oomOf(t, c.Process.Pid); v != 0 {
			t.Fatalf("process %d starts at oom_score_adj %d, want 0", c.Process.Pid, v)
		}
	}
	canLower, err := host.HasCapSysResource()
	if err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	// A clock that stands still: on the machine's clock a loaded run could
	// take DefaultVerifyEvery between two Applies, and the quiet one would
	// then verify every file and process.
	at := time.Now()
	p := newProtector(t, settings(v2, memqos.ReservationNone, nil), root, false, &logs, func() time.Time { return at })
	own := oomOf(t, os.Getpid())
	t.Cleanup(func() { host.WriteOOMScoreAdj("/proc", os.Getpid(), own) })
	p.Start()
	ws := discover(t, workloadsYAML, root)
	p.Apply(ws)

	if got := oomOf(t, webCmd.Process.Pid); got != 875 {
		t.Errorf("web (Burstable 1Gi of 8Gi): oom_score_adj %d, want 875", got)
	}
	if got := oomOf(t, batchCmd.Process.Pid); got != 1000 {
		t.Errorf("batch (BestEffort): oom_score_adj %d, want 1000", got)
	}
	if canLower {
		if got := oomOf(t, dbCmd.Process.Pid); got != -997 {
			t.Errorf("db (Guaranteed): oom_score_adj %d, want -997", got)
		}
		if got := oomOf(t, os.Getpid()); got != EvictdOOMScoreAdj {
			t.Errorf("evictd itself: oom_score_adj %d, want -999", got)
		}
	} else {
		if got := oomOf(t, dbCmd.Process.Pid); got != 0 {
			t.Errorf("db without CAP_SYS_RESOURCE: %d, want it left at 0", got)
		}
		if n := strings.Count(logs.String(), "no CAP_SYS_RESOURCE"); n != 1 {
			t.Errorf("%d lines say CAP_SYS_RESOURCE is missing, want 1:\n%s", n, logs.String())
		}
	}

	// A child forked after Apply inherits its parent's value.
	child := goAhead()
	if got := oomOf(t, child); got != 875 {
		t.Errorf("child %d forked in web after Apply: oom_score_adj %d, want 875 (inherited)", child, got)
	}
	// A process moved into batch later is caught by the next Apply.
	late := startIn(t, "", "sleep", "300")
	moveInto(t, batch, late.Process.Pid)
	if got := oomOf(t, late.Process.Pid); got != 0 {
		t.Fatalf("moved process starts at %d", got)
	}
	before := p.Stats
	p.Apply(ws)
	if got := oomOf(t, late.Process.Pid); got != 1000 {
		t.Errorf("process moved into batch: oom_score_adj %d after the next Apply, want 1000", got)
	}
	if w := p.Stats.Writes - before.Writes; w != 1 {
		t.Errorf("%d writes for one new process, want 1", w)
	}

	// Nothing changed: one read of cgroup.procs per workload, no write.
	logs.Reset()
	before = p.Stats
	p.Apply(ws)
	if r, w := p.Stats.Reads-before.Reads, p.Stats.Writes-before.Writes; r != uint64(len(ws)) || w != 0 {
		t.Errorf("quiet Apply: %d reads, %d writes; want %d reads (cgroup.procs), 0 writes", r, w, len(ws))
	}
	if logs.Len() != 0 {
		t.Errorf("quiet Apply logged:\n%s", logs.String())
	}
}

// startTalking starts `sh -c script` in cgroup dir with its standard input
// and output on pipes: goAhead writes a line to the shell and returns the
// PID it prints back (its first output line), bounded by a hang guard.
func startTalking(t *testing.T, dir, script string) (*exec.Cmd, func() int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if err := host.WriteOOMScoreAdj("/proc", cmd.Process.Pid, 0); err != nil {
		t.Fatal(err)
	}
	moveInto(t, dir, cmd.Process.Pid)
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	goAhead := func() int {
		t.Helper()
		if _, err := io.WriteString(in, "go\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case l, ok := <-lines:
			pid, err := strconv.Atoi(strings.TrimSpace(l))
			if !ok || err != nil {
				t.Fatalf("the shell in %s said %q, want its child's PID", dir, l)
			}
			return pid
		case <-time.After(30 * time.Second): // hang guard only
			t.Fatalf("the shell in %s said nothing in 30 s", dir)
		}
		return 0
	}
	return cmd, goAhead
}

// TestDryRunWritesNothing: a dry run logs each value it would write, once,
// and changes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	root, v2 := newRoot(t, "web", "batch")
	webCmd := startIn(t, filepath.Join(root, "web"), "sleep", "300")
	startIn(t, filepath.Join(root, "batch"), "sleep", "300")
	var logs bytes.Buffer
	p := newProtector(t, settings(v2, memqos.ReservationTiered, nil), root, true, &logs, nil)
	ws := discover(t, workloadsYAML, root)
	p.Apply(ws)
	if got := oomOf(t, webCmd.Process.Pid); got != 0 {
		t.Errorf("dry run changed web's oom_score_adj to %d", got)
	}
	if p.Stats.Writes != 0 {
		t.Errorf("dry run: %d writes", p.Stats.Writes)
	}
	if !strings.Contains(logs.String(), "would set oom_score_adj") || !strings.Contains(logs.String(), "value=875") {
		t.Errorf("dry run log does not say what it would write:\n%s", logs.String())
	}
	if v2 {
		if !strings.Contains(logs.String(), "web/memory.low value=1073741824 now=0") {
			t.Errorf("dry run log lacks web's memory.low:\n%s", logs.String())
		}
		if got := readFile(t, root, "web", "memory.low"); got != "0" {
			t.Errorf("dry run wrote web's memory.low: %s", got)
		}
	}
	logs.Reset()
	p.Apply(ws)
	if logs.Len() != 0 {
		t.Errorf("second dry-run Apply logged again:\n%s", logs.String())
	}
}

// TestRefusesOutsideRoot: a workload whose cgroup is not below the root is
// refused with one line, and nothing is written to it.
func TestRefusesOutsideRoot(t *testing.T) {
	root, v2 := newRoot(t, "web")
	outside, _ := newRoot(t, "web")
	cmd := startIn(t, filepath.Join(outside, "web"), "sleep", "300")
	ws := discover(t, workloadsYAML, outside)
	var logs bytes.Buffer
	p := newProtector(t, settings(v2, memqos.ReservationTiered, nil), root, false, &logs, nil)
	p.Apply(ws)
	p.Apply(ws)
	if got := oomOf(t, cmd.Process.Pid); got != 0 {
		t.Errorf("process outside the root got oom_score_adj %d", got)
	}
	if n := strings.Count(logs.String(), "outside the workload root"); n != 1 {
		t.Errorf("%d refusal lines, want 1:\n%s", n, logs.String())
	}
	if v2 {
		if got := readFile(t, outside, "web", "memory.low"); got != "0" {
			t.Errorf("memory.low outside the root written: %s", got)
		}
	}
}

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
