package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

// Golden outputs of `evictd lint` and `evictd qos` on realistic inputs.
// Regenerate with: go test ./cmd/evictd -run 'TestLintGolden|TestQoSGolden' -update
// and review the diff.

func init() {
	// Other command tests in this package may define -update too; define it
	// only once, whoever comes first.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func lqUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// lqGolden runs evictd with args and compares stdout and the exit code with
// testdata/<golden>.
func lqGolden(t *testing.T, golden string, wantCode int, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	if code != wantCode {
		t.Errorf("exit %d, want %d; stderr: %s", code, wantCode, stderr.String())
	}
	path := filepath.Join("testdata", golden)
	if lqUpdate() {
		if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(stdout.Bytes(), want) {
		t.Errorf("output differs from %s (rerun with -update and review the diff):\n%s", path, stdout.String())
	}
	for i, line := range strings.Split(stdout.String(), "\n") {
		if n := len([]rune(line)); n > 100 && !strings.HasSuffix(golden, ".json") {
			t.Errorf("%s line %d is %d columns wide (max 100): %q", golden, i+1, n, line)
		}
	}
}

func TestLintGolden(t *testing.T) {
	d := "testdata/lint/"
	for _, tc := range []struct {
		golden string
		code   int
		args   []string
	}{
		{"lint/kubeadm-default.txt", 0, []string{"--config", d + "kubeadm-default.yaml"}},
		{"lint/tuned-with-pitfalls.txt", 1, []string{"--config", d + "tuned-with-pitfalls.yaml", "--cgroup-version", "2", "--filesystems", "single"}},
		{"lint/tuned-with-pitfalls.json", 1, []string{"--config", d + "tuned-with-pitfalls.yaml", "--cgroup-version", "2", "--filesystems", "single", "-o", "json"}},
		{"lint/tuned-fixed.txt", 0, []string{"--config", d + "tuned-fixed.yaml", "--cgroup-version", "2", "--filesystems", "imagefs"}},
		{"lint/broken.txt", 2, []string{"--config", d + "broken.yaml"}},
		{"lint/typo.txt", 1, []string{"--config", d + "typo.yaml"}},
		{"lint/flags-only.txt", 1, []string{"--eviction-hard", "memory.available<1Gi", "--eviction-soft", "memory.available<2Gi",
			"--eviction-soft-grace-period", "memory.available=0s"}},
		{"lint/flags-over-file.txt", 2, []string{"--config", d + "tuned-fixed.yaml", "--eviction-hard", "memory.available<100Mi,pid.avail<1000"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			lqGolden(t, tc.golden, tc.code, append([]string{"lint"}, tc.args...)...)
		})
	}
}

func TestQoSGolden(t *testing.T) {
	d := "testdata/qos/"
	node := []string{"--memory-capacity", "16Gi", "--page-size", "4096"}
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"qos/tiered.txt", []string{"--config", d + "config-tiered.yaml", "--pods", d + "pods.yaml"}},
		{"qos/tiered.json", []string{"--config", d + "config-tiered.yaml", "--pods", d + "pods.yaml", "-o", "json"}},
		{"qos/defaults.txt", []string{"--pods", d + "pods.yaml"}},
		{"qos/cgroup-v1.json", []string{"--pods", d + "pods.yaml", "--cgroup-version", "1", "-o", "json"}},
		{"qos/allocatable-flag-64k-pages.json", []string{"--config", d + "config-tiered.yaml", "--pods", d + "pods.yaml",
			"--node-allocatable-memory", "12Gi", "--page-size", "65536", "-o", "json"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			lqGolden(t, tc.golden, 0, append(append([]string{"qos"}, node...), tc.args...)...)
		})
	}
}

func TestLintQoSBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the one stderr line
	}{
		{[]string{"lint"}, "evictd lint: nothing to lint: give --config FILE, --config-dir DIR and/or kubelet eviction flags (see --help)\n"},
		{[]string{"lint", "--config", "testdata/lint/missing.yaml"}, "evictd lint: testdata/lint/missing.yaml: open testdata/lint/missing.yaml: no such file or directory\n"},
		{[]string{"lint", "--config", "testdata/lint/broken.yaml", "-o", "xml"}, "evictd lint: -o \"xml\": want table or json\n"},
		{[]string{"lint", "--filesystems", "zfs", "--eviction-hard", "memory.available<1Gi"}, "evictd lint: --filesystems \"zfs\": want single, imagefs or split\n"},
		{[]string{"qos"}, "evictd qos: --pods is required (see --help)\n"},
		{[]string{"qos", "--pods", "testdata/qos/pods.yaml", "--memory-capacity", "lots"},
			"evictd qos: --memory-capacity \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'\n"},
		{[]string{"qos", "--pods", "testdata/qos/pods.yaml", "--memory-capacity", "16Gi", "--config", "testdata/lint/broken.yaml"},
			"evictd qos: testdata/lint/broken.yaml: invalid configuration: memoryThrottlingFactor 1.2 must be greater than 0 and less than or equal to 1.0\n"},
		{[]string{"qos", "--pods", "testdata/lint/typo.yaml", "--memory-capacity", "16Gi"},
			"evictd qos: testdata/lint/typo.yaml: kind: \"KubeletConfiguration\": want Pod\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != cli.ExitError {
			t.Errorf("%v: exit %d, want %d", tc.args, code, cli.ExitError)
		}
		if stderr.String() != tc.want {
			t.Errorf("%v: stderr\n got %q\nwant %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestLintQoSHelp(t *testing.T) {
	for _, c := range []string{"lint", "qos"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{c, "--help"}, &stdout, &stderr); code != cli.ExitOK {
			t.Errorf("%s --help: exit %d", c, code)
		}
		if !strings.Contains(stdout.String(), "Examples:") || !strings.Contains(stdout.String(), "Flags:") {
			t.Errorf("%s --help lacks examples or flags:\n%s", c, stdout.String())
		}
	}
}
