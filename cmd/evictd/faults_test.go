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
)

// asEvictdEnv makes the test binary run as evictd (see TestMain).
const asEvictdEnv = "EVICTD_TEST_AS_EVICTD"

// --help prints to stdout only, for every command.
func TestHelpOnStdoutOnly(t *testing.T) {
	for name := range commands {
		var out, errb bytes.Buffer
		code := run([]string{name, "--help"}, &out, &errb)
		if code != exitOK || out.Len() == 0 || errb.Len() != 0 {
			t.Errorf("%s --help: exit %d, %d bytes on stdout, stderr %q", name, code, out.Len(), errb.String())
		}
	}
}

// A size too large for int64 is named, not wrapped around.
func TestQOSCapacityTooLarge(t *testing.T) {
	dir := writeInputs(t, map[string]string{"pods.json": explainPods})
	_, errOut, code := runCmd("qos", "--memory-capacity", "9223372036854775808", "--pods", filepath.Join(dir, "pods.json"))
	if code != exitError || !strings.Contains(errOut, `--memory-capacity "9223372036854775808": too large`) {
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
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", args[0], code, errOut)
		}
		if strings.ContainsAny(out+errOut, "\x1b\x07") || !strings.Contains(out, `ab\x1b]2;owned\a\x1b[2Jove`) {
			t.Errorf("%s: raw control characters or no escaped name in:\n%q", args[0], out)
		}
	}
}

// SIGHUP reloads the workloads file: a bad one is logged and the running
// one kept, a good one is swapped in; the agent keeps running and stops
// cleanly on SIGTERM. (It used to die on SIGHUP, exit 129, with no cleanup.)
func TestSIGHUPReloadsWorkloads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to read the host's cgroups")
	}
	root := fmt.Sprintf("/evictd-test-hup-%d", os.Getpid())
	if err := os.Mkdir("/sys/fs/cgroup/memory"+root, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove("/sys/fs/cgroup/memory" + root)
	wf := filepath.Join(t.TempDir(), "w.yaml")
	write := func(s string) {
		if err := os.WriteFile(wf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("workloads:\n- name: a\n  cgroup: a\n")
	cmd := exec.Command(os.Args[0], "run", "--dry-run", "--workload-root", root, "--workloads", wf,
		"--metrics-addr", "", "--decision-log", "", "--psi", "off")
	cmd.Env = append(os.Environ(), asEvictdEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(want string) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("evictd exited before logging %q: %v", want, cmd.Wait())
				}
				if strings.Contains(l, want) {
					return
				}
			case <-timeout:
				t.Fatalf("no %q logged in 20 s", want)
			}
		}
	}
	waitLine("evictd running")
	write("workloads:\n- name: a\n  cgroup: a\n- name: b\n  cgroup: a\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLine("duplicate cgroup")
	write("workloads:\n- name: b\n  cgroup: b\n  critical: true\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitLine("reloaded")
	cmd.Process.Signal(syscall.SIGTERM)
	waitLine("evictd stopped")
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
