package selftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// envChild turns the test binary into a self-test run (the kubelet's
// defaults, 100Mi/s, several trials) that exits 2 when interrupted.
const envChild = "EVICTD_SELFTEST_TEST_CHILD"

func TestMain(m *testing.M) {
	hog.MaybeRun() // the trials' workloads are this test binary re-executed
	if os.Getenv(envChild) == "1" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := options(nil)
	o.Rates, o.Trials, o.Progress = []int64{100 << 20}, 5, os.Stdout
	p, err := Prepare(ctx, o)
	if err != nil {
		fmt.Println("prepare:", err)
		return 3
	}
	rep, err := Run(ctx, o, p)
	if err != nil {
		fmt.Println("run:", err)
		return 3
	}
	if rep.Interrupted {
		fmt.Println("interrupted")
		return 2
	}
	return 0
}

// options are the self-test's options with the node config kc (nil: the
// kubelet's defaults) and this test binary as the hog.
func options(kc *kubeletconfigv1beta1.KubeletConfiguration) Options {
	cfg, err := policy.ConfigFromKubelet(kc)
	if err != nil {
		panic(err)
	}
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return Options{Policy: cfg, Exe: exe}
}

func TestSandboxBytes(t *testing.T) {
	for _, c := range []struct{ avail, want int64 }{
		{24 << 30, 1 << 30},          // capped
		{4 << 30, 409 << 20},         // 10 %, whole MiB (409.6 → 409)
		{400 << 20, 40 << 20},        // a small VM
		{100 << 20, 10 << 20},        // too small for a trial: Prepare refuses
		{(10 << 30) + 1, 1 << 30},    // exactly at the cap
		{(5 << 20) + 12345, 0 << 20}, // below 1 MiB: 0
	} {
		if got := SandboxBytes(c.avail); got != c.want {
			t.Errorf("SandboxBytes(%d) = %d, want %d", c.avail, got, c.want)
		}
	}
}

// leftovers lists the self-test cgroups of process pid still on the host.
func leftovers(t *testing.T, pid int) []string {
	t.Helper()
	var out []string
	for _, root := range []string{sandbox.V2Root, sandbox.V1Memory, sandbox.V1Freezer} {
		m, err := filepath.Glob(filepath.Join(root, fmt.Sprintf("evictd-selftest-%d-*", pid)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// evictd woken by the kernel can kill the workload before the crossing
// watcher's next read (seen under the race detector): that is a won trial,
// its decision counted at 0 ms, not "the workload ended before it reached
// the threshold". A watcher that reads once and then sleeps for an hour
// makes that happen every time.
func TestRunWatcherSlowerThanEvictd(t *testing.T) {
	sandboxtest.NeedRoot(t)
	o := options(nil)
	o.Rates, o.Trials, o.WatchEvery = []int64{100 << 20}, 1, time.Hour
	p, err := Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), o, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Trials) != 1 {
		t.Fatalf("%d trials: %+v", len(rep.Trials), rep)
	}
	tr := rep.Trials[0]
	t.Logf("trial: %s", tr.Line())
	if tr.Error != "" || !tr.Won || tr.DecisionMs == nil || *tr.DecisionMs != 0 || tr.GoneMs == nil {
		t.Fatalf("want a won trial decided at 0 ms: %+v", tr)
	}
}

// The self-test on this kernel with the kubelet's default threshold: every
// trial ends in an eviction or an OOM kill (never an error), latencies are
// ordered, the slow ramp — a second between the crossing and the limit — is
// won, and nothing is left behind.
func TestRunRealCgroups(t *testing.T) {
	sandboxtest.NeedRoot(t)
	o := options(nil)
	o.Rates, o.Trials = []int64{100 << 20, 2 << 30}, 2
	p, err := Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p.SandboxBytes > MaxSandboxBytes || float64(p.SandboxBytes) > SandboxShare*float64(p.MemAvailable) {
		t.Fatalf("sandbox %d bytes: more than %.0f%% of MemAvailable %d or the cap", p.SandboxBytes, SandboxShare*100, p.MemAvailable)
	}
	if p.NodeThresholdBytes != 100<<20 || p.SandboxThresholdBytes >= p.NodeThresholdBytes || p.SandboxThresholdBytes <= 0 {
		t.Fatalf("thresholds: node %d, sandbox %d", p.NodeThresholdBytes, p.SandboxThresholdBytes)
	}
	rep, err := Run(context.Background(), o, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Trials) != 4 || rep.Interrupted {
		t.Fatalf("%d trials, interrupted %v: %+v", len(rep.Trials), rep.Interrupted, rep)
	}
	won := true
	for i, tr := range rep.Trials {
		t.Logf("trial %d: %s", i+1, tr.Line())
		if tr.Error != "" {
			t.Errorf("trial %d failed: %s", i+1, tr.Error)
			continue
		}
		if tr.SandboxRate >= tr.NodeRate || tr.BudgetMs <= 0 {
			t.Errorf("trial %d: rate %d not scaled down to %d, budget %v", i+1, tr.NodeRate, tr.SandboxRate, tr.BudgetMs)
		}
		switch {
		case tr.Evicted:
			if tr.DecisionMs == nil || tr.GoneMs == nil || *tr.GoneMs < *tr.DecisionMs || !strings.HasPrefix(tr.Trigger, "wake") {
				t.Errorf("trial %d: evicted, but decision %v, gone %v, trigger %q", i+1, tr.DecisionMs, tr.GoneMs, tr.Trigger)
			}
			if tr.Won == tr.OOM.Struck() {
				t.Errorf("trial %d: won %v with OOM %+v", i+1, tr.Won, tr.OOM)
			}
		case !tr.OOM.Struck() || tr.Won:
			t.Errorf("trial %d: neither evicted nor OOM-killed, or won without an eviction: %+v", i+1, tr)
		}
		if tr.NodeRate == 100<<20 && !tr.Won {
			t.Errorf("trial %d: evictd lost the slow ramp (a second's budget): %s", i+1, tr.Line())
		}
		won = won && tr.Won
	}
	if rep.Won != won {
		t.Errorf("report won %v, trials say %v", rep.Won, won)
	}
	if len(rep.Rates) != 2 || rep.Rates[0].NodeRate != 100<<20 || rep.Rates[1].NodeRate != 2<<30 {
		t.Fatalf("per-rate summary %+v", rep.Rates)
	}
	for i, r := range rep.Rates {
		tr := rep.Trials[2*i : 2*i+2]
		n := 0
		for _, x := range tr {
			if x.Won {
				n++
			}
		}
		if r.Trials != 2 || r.Won != n || r.DecisionMaxMs != nil && *r.DecisionMedianMs > *r.DecisionMaxMs {
			t.Errorf("rate %d summary %+v for trials %+v", i, r, tr)
		}
	}
	if l := leftovers(t, os.Getpid()); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// A trial the kernel OOM killer wins is reported as a loss. An agent with
// its wake-ups can win even a ramp that crosses a one-page threshold and
// the limit in one 10 ms slice (the close watch sees the crossing during
// the kernel's reclaim retries at the limit and holds the hog there), so
// the agent here has its 10 s timer alone: the hog reaches the limit long
// before the next synchronize.
func TestOOMKillerFirstIsALoss(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	o := options(nil)
	o.TimerOnly = true
	o = o.withDefaults()
	// 8Gi/s: the hog touches 80Mi per 10ms slice, past the 64Mi limit at once.
	p := Plan{Cgroup: mode.String(), SandboxBytes: 64 << 20, Scale: 1, SandboxThresholdBytes: 4096}
	cfg, err := sandboxConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := runTrial(context.Background(), o, p, cfg, 8<<30, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", tr.Line())
	if tr.Error != "" || !tr.OOM.Struck() || tr.Won {
		t.Fatalf("want an OOM kill reported as a loss: %+v", tr)
	}
	if l := leftovers(t, os.Getpid()); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// A node already below its threshold (memory.available<99% is met on any
// host with a process running) is under memory pressure: refused, and
// nothing is made.
func TestRefusesUnderPressure(t *testing.T) {
	sandboxtest.NeedRoot(t)
	o := options(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "99%"}})
	_, err := Prepare(context.Background(), o)
	var pe *PressureError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "memory.available<99%") {
		t.Fatalf("Prepare = %v, want a PressureError naming the threshold", err)
	}
	// A soft threshold met counts too (the kubelet reports MemoryPressure).
	o = options(&kubeletconfigv1beta1.KubeletConfiguration{
		EvictionSoft:            map[string]string{"memory.available": "99%"},
		EvictionSoftGracePeriod: map[string]string{"memory.available": "1m"},
	})
	if _, err := Prepare(context.Background(), o); !errors.As(err, &pe) {
		t.Fatalf("Prepare with a soft threshold met = %v, want a PressureError", err)
	}
	// Without a hard memory threshold there is nothing to test.
	o = options(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"nodefs.available": "1%"}})
	if _, err := Prepare(context.Background(), o); err == nil || !strings.Contains(err.Error(), "no hard memory.available threshold") {
		t.Fatalf("Prepare without a memory threshold = %v", err)
	}
	if l := leftovers(t, os.Getpid()); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// The memory PSI bound: the host's own /proc with a pressure file whose
// "some avg10" is above it (PSI cannot be raised on demand on a host that
// must stay usable, so that one file is written).
func TestRefusesUnderPSI(t *testing.T) {
	sandboxtest.NeedRoot(t)
	proc := t.TempDir()
	for _, f := range []string{"meminfo", "self/mountinfo", "self/cgroup", "sys/kernel/pid_max", "sys/kernel/threads-max", "loadavg", "uptime", "stat"} {
		b, err := os.ReadFile(filepath.Join("/proc", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(proc, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(avg10 string) {
		t.Helper()
		s := "some avg10=" + avg10 + " avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
		// Renamed into place: Prepare may be reading it meanwhile.
		tmp := filepath.Join(proc, "pressure", ".memory")
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Error(err)
		}
		if err := os.Rename(tmp, filepath.Join(proc, "pressure", "memory")); err != nil {
			t.Error(err)
		}
	}
	o := options(nil)
	o.ProcRoot = proc
	o.PSISettle = -1 // no wait
	write("10.50")
	_, err := Prepare(context.Background(), o)
	var pe *PressureError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "memory PSI some avg10 is 10.50%, above 10.00%") {
		t.Fatalf("Prepare = %v, want a PressureError for PSI", err)
	}
	write("9.99")
	if _, err := Prepare(context.Background(), o); err != nil {
		t.Fatalf("Prepare below the PSI bound = %v", err)
	}
	// A stall that has ended (the average falling, as after a trial's
	// throttled victim) is waited out.
	write("23.38")
	o.PSISettle = time.Minute
	go func() {
		time.Sleep(1500 * time.Millisecond)
		write("9.50")
	}()
	if _, err := Prepare(context.Background(), o); err != nil {
		t.Fatalf("Prepare while the PSI falls under the bound = %v", err)
	}
}

// SIGINT to a real self-test process in the middle of a trial: it cleans
// up and exits non-zero, and neither its cgroups nor its workload remain.
func TestInterruptedRunCleansUp(t *testing.T) {
	sandboxtest.NeedRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var lines []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	// Wait (bounded) for the first trial's workload to be running in its
	// cgroup; the trial then goes on for about two seconds.
	mode, _ := sandbox.DetectMode()
	root := sandbox.V1Memory
	if mode == sandbox.V2 {
		root = sandbox.V2Root
	}
	pattern := filepath.Join(root, fmt.Sprintf("evictd-selftest-%d-1-*", cmd.Process.Pid), "workload")
	var hogs []int
	for deadline := time.Now().Add(60 * time.Second); len(hogs) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the self-test's first workload never appeared in %s", pattern)
		}
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			hogs, _ = sandbox.Procs(m[0])
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = <-done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2 (interrupted); output:\n%s", err, strings.Join(lines, "\n"))
	}
	if l := leftovers(t, cmd.Process.Pid); len(l) > 0 {
		t.Errorf("cgroups left behind: %v", l)
	}
	for _, pid := range hogs {
		if cgrouptest.Alive(pid) {
			t.Errorf("workload %d still running", pid)
		}
	}
}
