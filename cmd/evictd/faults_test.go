package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/cli"
)

// asEvictdEnv makes the test binary run as evictd (see TestMain).
const asEvictdEnv = "EVICTD_TEST_AS_EVICTD"

// --help prints to stdout only, for every command.
func TestHelpOnStdoutOnly(t *testing.T) {
	for _, name := range cli.Names() {
		var out, errb bytes.Buffer
		code := run([]string{name, "--help"}, &out, &errb)
		if code != cli.ExitOK || out.Len() == 0 || errb.Len() != 0 {
			t.Errorf("%s --help: exit %d, %d bytes on stdout, stderr %q", name, code, out.Len(), errb.String())
		}
	}
}

// A size too large for int64 is named, not wrapped around.
func TestQOSCapacityTooLarge(t *testing.T) {
	dir := writeInputs(t, map[string]string{"pods.json": explainPods})
	_, errOut, code := runCmd("qos", "--memory-capacity", "9223372036854775808", "--pods", filepath.Join(dir, "pods.json"))
	if code != cli.ExitError || !strings.Contains(errOut, `--memory-capacity "9223372036854775808": too large`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// Names from input files reach the terminal escaped.
func TestPrintedNamesEscaped(t *testing.T) {
	const evil = `ab\u001b]2;owned\u0007\u001b[2Jove`
	dir := writeInputs(t, map[string]string{
		"kc.yaml":      explainConfig,
		"summary.json": strings.ReplaceAll(explainSummary, `"above"`, `"`+evil+`"`),
		"pods.json":    strings.ReplaceAll(explainPods, `"above"`, `"`+evil+`"`),
	})
	p := func(n string) string { return filepath.Join(dir, n) }
	for _, args := range [][]string{
		{"explain", "--config", p("kc.yaml"), "--summary", p("summary.json"), "--pods", p("pods.json")},
		{"qos", "--memory-capacity", "8Gi", "--pods", p("pods.json")},
	} {
		out, errOut, code := runCmd(args...)
		if code != cli.ExitOK {
			t.Fatalf("%s: exit %d: %s", args[0], code, errOut)
		}
		if strings.ContainsAny(out+errOut, "\x1b\x07") || !strings.Contains(out, `ab\x1b]2;owned\a\x1b[2Jove`) {
			t.Errorf("%s: raw control characters or no escaped name in:\n%q", args[0], out)
		}
	}
}

// startEvictd runs the test binary as `evictd args...` and returns a
// function that waits for a log line containing want (failing after 20 s)
// and returns it.
func startEvictd(t *testing.T, args ...string) (*exec.Cmd, func(want string) string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asEvictdEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, func(want string) string {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("evictd exited before logging %q", want)
				}
				if strings.Contains(l, want) {
					return l
				}
			case <-timeout:
				t.Fatalf("no %q logged in 20 s", want)
			}
		}
	}
}

// testRoot makes a workload root cgroup for a test (v1 memory hierarchy).
func testRoot(t *testing.T, name string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	root := fmt.Sprintf("/evictd-test-%s-%d", name, os.Getpid())
	if err := cgroup.Mkdir("/sys/fs/cgroup/memory" + root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cgroup.RemoveAll([]string{"/sys/fs/cgroup/memory" + root}, time.Second) })
	return root
}

// A restarted agent's startup line lists the configured thresholds, as the
// first start did (it used to add the containerfs entries the engine derives
// at its first synchronize, "containerfs.available (no source threshold:
// never met)" among them).
func TestRestartStartupLineSame(t *testing.T) {
	root := testRoot(t, "restart")
	state := filepath.Join(t.TempDir(), "state.json")
	args := []string{"run", "--workload-root", root, "--state-file", state, "--metrics-addr", "", "--decision-log", "", "--psi", "off"}
	var first string
	for i := 0; i < 2; i++ {
		cmd, wait := startEvictd(t, args...)
		line := wait("evictd running")
		for deadline := time.Now().Add(10 * time.Second); i == 0; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(state); err == nil || time.Now().After(deadline) {
				break // the first synchronize saved the state
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		wait("evictd stopped")
		got := line[strings.Index(line, "thresholds="):]
		got = got[:strings.Index(got, " wakeups=")]
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("restart lists %s, the first start %s", got, first)
		}
	}
}

// SIGHUP reloads the workloads file: a bad one is logged and the running
// one kept, a good one is swapped in; the agent keeps running and stops
// cleanly on SIGTERM. (It used to die on SIGHUP, exit 129, with no cleanup.)
func TestSIGHUPReloadsWorkloads(t *testing.T) {
	root := testRoot(t, "hup")
	wf := filepath.Join(t.TempDir(), "w.yaml")
	write := func(s string) {
		if err := os.WriteFile(wf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("workloads:\n- name: a\n  cgroup: a\n")
	cmd, waitLine := startEvictd(t, "run", "--dry-run", "--workload-root", root, "--workloads", wf,
		"--metrics-addr", "", "--decision-log", "", "--psi", "off")
	waitLine("evictd running")
	write("workloads:\n- name: a\n  cgroup: a\n- name: b\n  cgroup: a\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLine("duplicate cgroup")
	write("workloads:\n- name: b\n  cgroup: b\n  critical: true\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLine("reloaded")
	cmd.Process.Signal(syscall.SIGTERM)
	waitLine("evictd stopped")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
