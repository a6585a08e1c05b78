package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/load"
)

// Bad flags and files stop `evictd run` with one line naming what is wrong,
// before anything touches the host.
func TestRunRejectsBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "w.yaml")
	defer load.SetMaxInputBytes(0)
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
		{[]string{"--dry-run", "--realtime-wakeups", "always"}, `--realtime-wakeups "always": want auto, on or off`},
		{[]string{"--dry-run", "--fast-poll-min", "2s", "--fast-poll-max", "1s"}, "want 0 < min <= max"},
		{[]string{"--dry-run", "--log-format", "xml"}, `invalid argument "xml" for "--log-format" flag: want text or json`},
		{[]string{"--dry-run", "--reclaim-hook", "disk=true"}, `unknown eviction signal "disk"`},
		{[]string{"--dry-run", "--eviction-hard", "memory.available<lots"}, `evictionHard.memory.available: "lots"`},
		{[]string{"--dry-run", "--workloads", bad}, bad + `: workloads[0].priority: "high": want a whole number`},
		{[]string{"--check", "--workload-root", "/no-such-cgroup-evictd"}, "workload root /no-such-cgroup-evictd"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--check", "--workload-root", "../.."}, `--workload-root "../..": must be a cgroup inside the memory hierarchy`},
		{[]string{"--check", "--workload-root", "/a/../../b"}, `without ".."`},
		{[]string{"--check", "--workload-root", "/"}, `--workload-root "/": the hierarchy root makes every top-level cgroup`},
		{[]string{"--workload-root", "//"}, `--allow-root-cgroup`},
		{[]string{"--check", "--interval", "1ns"}, "--interval 1ns: must be at least 100ms"},
		{[]string{"--check", "--metrics-addr", "bogus"}, `--metrics-addr "bogus": want host:port`},
		{[]string{"--check", "--secure-metrics-addr", "127.0.0.1:9848"}, "--secure-metrics-addr, --tls-cert-file and --tls-private-key-file need --kubernetes"},
		{[]string{"--check", "--metrics-addr", "127.0.0.1:99999"}, `--metrics-addr "127.0.0.1:99999"`},
		{[]string{"--check", "--state-file", dir}, "--state-file " + dir + ": is a directory, want a file"},
		{[]string{"--check", "--state-file", bad + "/state.json"}, "--state-file " + bad + "/state.json: " + bad + " is not a directory"},
		{[]string{"--dry-run", "--decision-log", dir}, "--decision-log " + dir + ": is a directory"},
		{[]string{"--check", "--max-input-size", "-1"}, `invalid argument "-1" for "--max-input-size" flag: want a positive size`},
		{[]string{"--dry-run", "--max-input-size", "10", "--workloads", bad}, bad + ": file too large: 50 bytes, more than the 10-byte cap (raise it with --max-input-size)"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"run"}, freeMetricsAddr(c.args)...), &out, &errb)
		msg := errb.String()
		if code != cli.ExitError || !strings.Contains(msg, c.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit %d and %q", c.args, code, msg, cli.ExitError, c.want)
		}
		if lines := strings.Count(strings.TrimSpace(msg), "\n"); lines > 0 && !strings.Contains(msg, "Usage:") {
			t.Errorf("run %v: %d-line error, want one line: %q", c.args, lines+1, msg)
		}
	}
}

// freeMetricsAddr adds --metrics-addr 127.0.0.1:0 to args that do not set
// it: --check listens on the metrics address, and an agent already running on
// this machine (an evictd on the real-node tier's cluster, say) may hold the
// default port.
func freeMetricsAddr(args []string) []string {
	for _, a := range args {
		if strings.HasPrefix(a, "--metrics-addr") {
			return args
		}
	}
	return append([]string{"--metrics-addr", "127.0.0.1:0"}, args...)
}

func TestRunCheck(t *testing.T) {
	cgrouptest.NeedReal(t, os.Geteuid() == 0, "root to read the host's cgroups")
	var out, errb bytes.Buffer
	code := run(append([]string{"run"}, freeMetricsAddr([]string{"--check", "--eviction-hard", "memory.available<300Mi"})...), &out, &errb)
	if code != cli.ExitOK {
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
	if code := run([]string{"demo", "-o", "yaml"}, &out, &errb); code != cli.ExitError || !strings.Contains(errb.String(), `-o "yaml": want text or json`) {
		t.Fatalf("exit %d: %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"demo", "--help"}, &out, &errb); code != cli.ExitOK || !strings.Contains(out.String(), "removes every cgroup and process") {
		t.Fatalf("help: exit %d: %s", code, out.String())
	}
}
