package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cli"
)

// `evictd report` on what `kubectl logs` of the DaemonSet prints: the
// records of --decision-log - mixed with evictd's log lines, text or
// --log-format json. The log lines are skipped and counted, the records
// counted right (text lines used to fail the report at line 1; JSON ones
// were taken for records).
func TestReportReadsKubectlLogs(t *testing.T) {
	data, err := os.ReadFile(demoDecisions)
	if err != nil {
		t.Fatal(err)
	}
	records := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var logs bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&logs, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&logs, nil)
			}
			var mixed strings.Builder
			for _, r := range records {
				logs.Reset()
				slog.New(h).Info("evicted", "pod", "host/x", "trigger", "wake", "gone", true)
				mixed.WriteString(logs.String())
				mixed.WriteString(r)
			}
			in := filepath.Join(t.TempDir(), "kubectl-logs.txt")
			os.WriteFile(in, []byte(mixed.String()), 0o644)
			var stdout, stderr bytes.Buffer
			code := run([]string{"report", in}, &stdout, &stderr)
			out, errOut := stdout.String(), stderr.String()
			if code != cli.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, "12 synchronizes") {
				t.Errorf("the page does not count the 12 records as 12 synchronizes")
			}
			if !strings.Contains(errOut, "12 lines of "+in+" are not decision records") {
				t.Errorf("stderr does not say 12 lines were skipped: %q", errOut)
			}
		})
	}
}

// `evictd report` holds about a record's bound per line, not the line:
// twenty 16 MiB lines of garbage on standard input (one week's log corrupted,
// say) are refused with --skip-bad skipping them, in a few tens of MiB of
// RSS (batches of 256 lines of up to 64 MiB each once took 910 MB for ten
// 50 MB lines).
func TestReportBoundsItsInput(t *testing.T) {
	cmd := exec.Command(os.Args[0], "report", "-", "--skip-bad", "-o", filepath.Join(t.TempDir(), "r.html"))
	cmd.Env = append(os.Environ(), asToolsEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(demoDecisions)
	written := make(chan struct{})
	go func() {
		defer close(written)
		line := append(bytes.Repeat([]byte("x"), 16<<20), '\n')
		for i := 0; i < 20; i++ {
			if _, err := stdin.Write(line); err != nil {
				return
			}
		}
		io.Copy(stdin, bytes.NewReader(data))
	}()
	<-written
	// All but the pipe's last 64 KiB is read: the peak of the over-long
	// lines is behind. VmHWM is the report's own (ru_maxrss would include
	// this test process's, which the child shared until its exec).
	time.Sleep(200 * time.Millisecond)
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	stdin.Close()
	err = cmd.Wait()
	var hwm int64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &hwm)
		}
	}
	t.Logf("peak RSS %d MiB for 320 MiB of over-long lines", hwm>>10)
	if hwm == 0 || hwm > 200<<10 { // the race detector's runtime more than doubles a Go program's
		t.Errorf("peak RSS %d MiB", hwm>>10)
	}
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "20 malformed records skipped") {
		t.Errorf("stderr: %q", stderr.String())
	}
}
