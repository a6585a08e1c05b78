package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
)

// Bad flags and files stop `evictd run` with one line naming what is wrong,
// before anything touches the host.
func TestRunRejectsBadConfiguration(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(bad, []byte("workloads:\n- name: a\n  cgroup: a\n  priority: high\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--workload-root is required"},
		{[]string{"--dry-run", "--psi-window", "1s"}, "--psi-stall/--psi-window: psi window 1s: must be a multiple of 2s"},
		{[]string{"--dry-run", "--fast-poll", "sometimes"}, `--fast-poll "sometimes": want auto, on or off`},
		{[]string{"--dry-run", "--fast-poll-min", "2s", "--fast-poll-max", "1s"}, "want 0 < min <= max"},
		{[]string{"--dry-run", "--log-format", "xml"}, `--log-format "xml"`},
		{[]string{"--dry-run", "--reclaim-hook", "disk=true"}, `unknown eviction signal "disk"`},
		{[]string{"--dry-run", "--eviction-hard", "memory.available<lots"}, `evictionHard.memory.available: "lots"`},
		{[]string{"--dry-run", "--workloads", bad}, bad + `: workloads[0].priority: "\"high\"": want a 32-bit integer`},
		{[]string{"--check", "--workload-root", "/no-such-cgroup-evictd"}, "workload root /no-such-cgroup-evictd"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"run"}, c.args...), &out, &errb)
		msg := errb.String()
		if code != exitError || !strings.Contains(msg, c.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit %d and %q", c.args, code, msg, exitError, c.want)
		}
		if lines := strings.Count(strings.TrimSpace(msg), "\n"); lines > 0 && !strings.Contains(msg, "Usage:") {
			t.Errorf("run %v: %d-line error, want one line: %q", c.args, lines+1, msg)
		}
	}
}

func TestRunCheck(t *testing.T) {
	cgrouptest.NeedReal(t, os.Geteuid() == 0, "root to read the host's cgroups")
	var out, errb bytes.Buffer
	code := run([]string{"run", "--check", "--eviction-hard", "memory.available<300Mi"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"configuration OK", "threshold memory.available<300Mi", "threshold allocatableMemory.available<300Mi"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--check output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-o", "yaml"}, &out, &errb); code != exitError || !strings.Contains(errb.String(), `-o "yaml": want text or json`) {
		t.Fatalf("exit %d: %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"demo", "--help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "removes every cgroup and process") {
		t.Fatalf("help: exit %d: %s", code, out.String())
	}
}
