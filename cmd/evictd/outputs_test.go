package main

// Faults of evictd's own outputs, endpoints and stop, tried on a real
// `evictd run` process on real cgroup v1 (the test binary re-executed as
// evictd): each used to stop the agent from evicting or shorten a grace
// period.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/connflood"
	"github.com/evictd/evictd/internal/kube/kubetest"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// nofileEnv makes the re-executed evictd lower its descriptor limit first
// (TestMain), as a node owner's LimitNOFILE would.
const nofileEnv = "EVICTD_TEST_NOFILE"

// limitDescriptorsIfAsked applies nofileEnv; TestMain calls it.
func limitDescriptorsIfAsked() {
	if v := os.Getenv(nofileEnv); v != "" {
		n, _ := strconv.ParseUint(v, 10, 64)
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			os.Exit(3)
		}
	}
}

// agentProc is a running `evictd` (the test binary as evictd).
type agentProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	log    []string
	lines  chan string
	exited chan struct{}
	err    error
}

// startAgent runs `evictd args...` with its stdout on stdout (nil: discarded)
// and extra environment.
func startAgent(t *testing.T, stdout *os.File, env []string, args ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asEvictdEnv+"=1"), env...)
	if stdout != nil {
		cmd.Stdout = stdout
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{t: t, cmd: cmd, lines: make(chan string, 1000), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait returns the next log line containing want, failing after d.
func (p *agentProc) wait(want string, d time.Duration) string {
	p.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, want) {
				return l
			}
		case <-p.exited:
			for {
				select {
				case l := <-p.lines:
					if strings.Contains(l, want) {
						return l
					}
				default:
					p.t.Fatalf("evictd exited (%v) before logging %q:\n%s", p.err, want, p.logs())
				}
			}
		case <-timeout:
			p.t.Fatalf("no %q logged in %s:\n%s", want, d, p.logs())
		}
	}
}

// waitMaybe is wait that reports a line not logged in d instead of failing.
func (p *agentProc) waitMaybe(want string, d time.Duration) (string, bool) {
	timeout := time.After(d)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, want) {
				return l, true
			}
		case <-timeout:
			return "", false
		}
	}
}

func (p *agentProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

// waitExit waits (bounded) for the process to end and returns its status.
func (p *agentProc) waitExit(d time.Duration) error {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		p.t.Fatalf("evictd still runs %s later:\n%s", d, p.logs())
		return nil
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHealthy polls /healthz until it answers 200.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := c.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	t.Fatalf("/healthz at %s never answered 200", addr)
}

func healthz(addr string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// v1Sandbox is a workload root on the real cgroup v1 memory controller.
func v1Sandbox(t *testing.T, limit int64) *sandbox.Sandbox {
	t.Helper()
	sandboxtest.NeedMode(t, sandbox.V1)
	return sandboxtest.New(t, limit)
}

// logTime reads a time attribute (slog's text format) from a log line.
func logTime(t *testing.T, line, key string) time.Time {
	t.Helper()
	_, v, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		t.Fatalf("no %s= in %q", key, line)
	}
	v, _, _ = strings.Cut(v, " ")
	tm, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return tm
}

// SIGTERM to evictd during a workload's grace period does not shorten it:
// the SIGTERM-ignoring workload is killed at its deadline, not at the
// stop, and evictd exits cleanly after (it used to hard-kill the workload
// at once). With a stop timeout shorter than what is left of the grace
// period, evictd exits leaving the workload running, and the next start
// finishes the eviction at the same deadline, healthy meanwhile.
func TestRealStopDuringGracePeriod(t *testing.T) {
	const grace = 6
	setup := func(t *testing.T) (sb *sandbox.Sandbox, h *sandboxtest.Hog, args []string, state string) {
		sb = v1Sandbox(t, 0)
		c, err := sb.Child("victim")
		if err != nil {
			t.Fatal(err)
		}
		h = sandboxtest.StartHog(t, "ignore-term; hold", c)
		sandboxtest.WaitIgnoresTerm(t, h.Pid)
		dir := t.TempDir()
		wf := filepath.Join(dir, "workloads.yaml")
		if err := os.WriteFile(wf, []byte(fmt.Sprintf("workloads:\n- name: victim\n  cgroup: victim\n  terminationGracePeriodSeconds: %d\n", grace)), 0o644); err != nil {
			t.Fatal(err)
		}
		state = filepath.Join(dir, "state.json")
		args = []string{"run", "--workload-root", sb.Parent.Rel, "--workloads", wf, "--state-file", state,
			"--decision-log", filepath.Join(dir, "decisions.jsonl"), "--psi", "off",
			"--eviction-soft", "memory.available<1Pi", "--eviction-soft-grace-period", "memory.available=1s",
			// A hard threshold never met: without one the kubelet's default disk
			// thresholds would read this machine's own disk.
			"--eviction-hard", "memory.available<1Mi",
			"--eviction-max-pod-grace-period", strconv.Itoa(grace)}
		return sb, h, args, state
	}
	t.Run("finished within the stop timeout", func(t *testing.T) {
		_, h, args, _ := setup(t)
		p := startAgent(t, nil, nil, append(args, "--metrics-addr", "")...)
		// The soft threshold is met at the first synchronize; its 1 s
		// grace period later, the eviction starts, so its deadline is
		// at least met + 1 s + grace.
		p.wait("eviction thresholds met", 60*time.Second)
		deadline := time.Now().Add(time.Second + grace*time.Second)
		if l, ok := p.waitMaybe("eviction started", 4*time.Second); ok {
			deadline = logTime(t, l, "deadline")
		} else {
			t.Error(`no "eviction started" line: the grace period's start is not logged`)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.Done:
		case <-time.After(60 * time.Second):
			t.Fatalf("the workload was never killed:\n%s", p.logs())
		}
		if died := time.Now(); died.Before(deadline) {
			t.Fatalf("the stop killed the workload %s before its grace period's deadline:\n%s", deadline.Sub(died), p.logs())
		}
		if err := p.waitExit(30 * time.Second); err != nil {
			t.Fatalf("exit: %v\n%s", err, p.logs())
		}
		logs := p.logs()
		for _, want := range []string{"letting the eviction in progress finish", "msg=evicted", "evictd stopped"} {
			if !strings.Contains(logs, want) {
				t.Errorf("no %q logged:\n%s", want, logs)
			}
		}
	})
	t.Run("resumed by the next start", func(t *testing.T) {
		_, h, args, state := setup(t)
		addr := freePort(t)
		p := startAgent(t, nil, nil, append(args, "--metrics-addr", addr, "--stop-timeout", "500ms")...)
		deadline := logTime(t, p.wait("eviction started", 60*time.Second), "deadline")
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.waitExit(30 * time.Second); err != nil {
			t.Fatalf("exit: %v\n%s", err, p.logs())
		}
		select {
		case <-h.Done:
			t.Fatalf("the stop killed the workload during its grace period:\n%s", p.logs())
		default:
		}
		if b, _ := os.ReadFile(state); !strings.Contains(string(b), `"evicting"`) {
			t.Fatalf("the interrupted eviction is not in the state file:\n%s", b)
		}
		q := startAgent(t, nil, nil, append(args, "--metrics-addr", addr)...)
		q.wait("resuming an eviction", 30*time.Second)
		waitHealthy(t, addr) // /healthz said 503 "no synchronize yet" for the whole eviction
		select {
		case <-h.Done:
		case <-time.After(60 * time.Second):
			t.Fatalf("the restarted agent never finished the eviction:\n%s", q.logs())
		}
		if died := time.Now(); died.Before(deadline) {
			t.Fatalf("killed %s before the deadline the first run set", deadline.Sub(died))
		}
		q.wait("msg=evicted", 30*time.Second)
		if strings.Contains(q.logs(), "eviction started") {
			t.Errorf("the restart began the eviction again, with a new grace period:\n%s", q.logs())
		}
		q.cmd.Process.Signal(syscall.SIGTERM)
		if err := q.waitExit(30 * time.Second); err != nil {
			t.Fatalf("exit: %v", err)
		}
	})
}

// 300 idle and 300 slow connections to /metrics and /healthz, held and
// renewed, with evictd's descriptor limit at 256: synchronizes and
// evictions go on, /healthz answers, evictd holds a bounded number of
// descriptors. (It used to run out: "reading stats failed ... too many open
// files", /healthz unreachable, no eviction.)
func TestRealIdleConnectionFlood(t *testing.T) {
	sb := v1Sandbox(t, 512<<20)
	c, err := sb.Child("hog")
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	p := startAgent(t, nil, []string{nofileEnv + "=256"}, "run", "--workload-root", sb.Parent.Rel,
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--decision-log", "", "--metrics-addr", addr,
		"--psi", "off", "--eviction-hard", "memory.available<200Mi")
	p.wait("evictd running", 30*time.Second)
	waitHealthy(t, addr)
	fl := connflood.Start(addr, 300, 300)
	defer fl.Stop()
	for deadline := time.Now().Add(60 * time.Second); fl.Dials() < 600; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d connections made in 60 s", fl.Dials())
		}
	}
	time.Sleep(time.Second) // the flood settles: every slot of the server taken again and again
	// 400 MiB in a root limited to 512 MiB: 112 MiB available, below 200Mi.
	h := sandboxtest.StartHog(t, "alloc 400Mi; hold", c)
	select {
	case <-h.Done:
	case <-time.After(60 * time.Second):
		t.Fatalf("no eviction under the connection flood:\n%s", p.logs())
	}
	p.wait("msg=evicted", 30*time.Second)
	asked := time.Now()
	code, body, err := healthz(addr)
	t.Logf("/healthz answered in %s under a flood that made %d connections", time.Since(asked), fl.Dials())
	if err != nil || code != 200 {
		t.Fatalf("/healthz under the flood: %d %q %v", code, body, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) > 100 {
		t.Errorf("evictd holds %d descriptors under the flood", len(fds))
	}
	if strings.Contains(p.logs(), "too many open files") {
		t.Errorf("evictd ran out of descriptors:\n%s", p.logs())
	}
	fl.Stop()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.waitExit(30 * time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// --decision-log - on a pipe: nobody reading it (a stalled log collector)
// must not stop evictions or SIGTERM (the loop used to block in write(2));
// the reader going away must not end evictd with SIGPIPE (exit 141, no
// cleanup): the write error is logged and evictd goes on.
func TestRealDecisionLogPipe(t *testing.T) {
	for _, reader := range []string{"stalled", "gone"} {
		t.Run(reader, func(t *testing.T) {
			sb := v1Sandbox(t, 512<<20)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
				t.Fatal(err) // a page: the first record or two fill it
			}
			p := startAgent(t, w, nil, "run", "--workload-root", sb.Parent.Rel, "--state-file", filepath.Join(t.TempDir(), "state.json"),
				"--decision-log", "-", "--metrics-addr", "", "--psi", "off", "--eviction-hard", "memory.available<200Mi")
			w.Close()
			if reader == "gone" {
				r.Close()
			}
			p.wait("evictd running", 30*time.Second)
			for i := 0; i < 4; i++ {
				c, err := sb.Child(fmt.Sprintf("hog%d", i))
				if err != nil {
					t.Fatal(err)
				}
				h := sandboxtest.StartHog(t, "alloc 400Mi; hold", c)
				select {
				case <-h.Done:
				case <-time.After(60 * time.Second):
					t.Fatalf("hog %d never evicted with the decision log's reader %s:\n%s", i, reader, p.logs())
				}
			}
			if reader == "gone" {
				p.wait("writing the decision-log failed", 30*time.Second)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			if err := p.waitExit(30 * time.Second); err != nil {
				t.Fatalf("exit: %v\n%s", err, p.logs())
			}
			if !strings.Contains(p.logs(), "evictd stopped") {
				t.Errorf("no clean stop:\n%s", p.logs())
			}
		})
	}
}

// A FIFO, a symbolic link or a device as the decision log or the state
// file is refused at once, by --check too (a FIFO used to hang the start
// with no output; a link was followed).
func TestRunRefusesOutputsThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flag, path, want string }{
		{"--decision-log", fifo, "is a FIFO"}, {"--decision-log", link, "is a symbolic link"}, {"--decision-log", "/dev/null", "is a device"},
		{"--state-file", fifo, "is a FIFO"}, {"--state-file", link, "is a symbolic link"},
	} {
		for _, check := range []bool{false, true} {
			args := []string{"run", "--workload-root", "/evictd-test-none", "--metrics-addr", "", c.flag, c.path}
			if check {
				args = append(args, "--check")
			}
			done := make(chan struct{})
			var errOut string
			var code int
			go func() { defer close(done); _, errOut, code = runCmd(args...) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%v: still running after 20 s", args)
			}
			if code != cli.ExitError || !strings.Contains(errOut, c.flag+" "+c.path+": is") || !strings.Contains(errOut, c.want) {
				t.Errorf("%v: exit %d, stderr %q; want the flag, the path and %q", args, code, errOut, c.want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "target")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
}

// selftest removes its sandbox on every catchable signal that would end
// it, not only SIGINT and SIGTERM: a dropped ssh session (SIGHUP) or a
// SIGQUIT used to leave the sandbox cgroup and its workload behind.
func TestRealSelftestCleansUpOnSignals(t *testing.T) {
	sandboxtest.NeedMode(t, sandbox.V1)
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startAgent(t, nil, nil, "selftest", "--rates", "100Mi", "--trials", "3")
			pattern := filepath.Join(sandbox.V1Memory, fmt.Sprintf("evictd-selftest-%d-*", p.cmd.Process.Pid))
			t.Cleanup(func() { // what a failing run left
				for _, root := range []string{sandbox.V1Memory, sandbox.V1Freezer} {
					m, _ := filepath.Glob(filepath.Join(root, fmt.Sprintf("evictd-selftest-%d-*", p.cmd.Process.Pid)))
					cgrouptest.RemoveTree(t, m...)
				}
			})
			var workload []int
			for deadline := time.Now().Add(60 * time.Second); len(workload) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no workload in %s in 60 s:\n%s", pattern, p.logs())
				}
				if m, _ := filepath.Glob(filepath.Join(pattern, "workload")); len(m) == 1 {
					workload, _ = sandbox.Procs(m[0])
				}
			}
			p.cmd.Process.Signal(sig)
			err := p.waitExit(60 * time.Second)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitError {
				t.Fatalf("exit %v, want status %d (interrupted, cleaned up)", err, cli.ExitError)
			}
			left, _ := filepath.Glob(pattern)
			fz, _ := filepath.Glob(filepath.Join(sandbox.V1Freezer, fmt.Sprintf("evictd-selftest-%d-*", p.cmd.Process.Pid)))
			if len(left)+len(fz) > 0 {
				t.Errorf("cgroups left behind: %v %v", left, fz)
			}
			for _, pid := range workload {
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("workload %d still runs", pid)
				}
			}
		})
	}
}

// Kubernetes mode (a real kube-apiserver; the apiserver tier): with the
// DaemonSet's --decision-log -, a reader that goes away is a logged write
// error, not a SIGPIPE that ends evictd (exit 141); SIGHUP does not end it
// (exit 129) but reloads; SIGTERM stops it cleanly.
func TestRealRunKubeOutputsAndSignals(t *testing.T) {
	srv, pods, dir, cfg := kubeNodeUnderPressure(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	p := startAgent(t, w, nil, "run", "--kubernetes", "--config", cfg, "--node-name", "node-a",
		"--kubeconfig", srv.Kubeconfig(t, "admin", kubetest.AdminToken), "--pods-cgroup", "/"+pods, "--kubelet-summary", "none",
		"--decision-log", "-", "--metrics-addr", addr, "--state-file", filepath.Join(dir, "state.json"), "--psi", "off")
	w.Close()
	r.Close() // the log collector is gone
	p.wait("evictd running in Kubernetes mode", 60*time.Second)
	p.wait("writing the decision-log failed", 60*time.Second)
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.wait("SIGHUP handled", 30*time.Second)
	waitHealthy(t, addr)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.waitExit(30 * time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.logs())
	}
	if !strings.Contains(p.logs(), "evictd stopped") {
		t.Errorf("no clean stop:\n%s", p.logs())
	}
}
