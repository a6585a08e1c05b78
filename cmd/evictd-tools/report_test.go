package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

const demoDecisions = "../../internal/report/testdata/demo-decisions.jsonl"

// TestReportCLI: the page goes to stdout or -o (flags before or after the
// file, "-" reads stdin); a bad log fails naming file, line and field and
// leaves no page behind.
func TestReportCLI(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", demoDecisions}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "<!DOCTYPE html>") || !strings.Contains(stdout.String(), "</html>") {
		t.Error("no page on stdout")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "r.html")
	for _, args := range [][]string{{"report", "-o", out, demoDecisions}, {"report", demoDecisions, "-o", out}} {
		stdout.Reset()
		if code := run(args, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%v wrote to stdout", args)
		}
		if data, err := os.ReadFile(out); err != nil || !bytes.Contains(data, []byte("host/leaky")) {
			t.Errorf("%v: page %v", args, err)
		}
	}

	bad := filepath.Join(dir, "bad.jsonl")
	data, _ := os.ReadFile(demoDecisions)
	first, _, _ := strings.Cut(string(data), "\n")
	os.WriteFile(bad, []byte(first+"\n"+`{"time":"2026-01-01T00:00:00Z","decision":{"nodeConditions":"MemoryPressure"}}`+"\n"), 0o644)
	badOut := filepath.Join(dir, "bad.html")
	stderr.Reset()
	if code := run([]string{"report", bad, "-o", badOut}, &stdout, &stderr); code != cli.ExitError {
		t.Fatalf("exit %d for a bad log", code)
	}
	if want := bad + ":2: field decision.nodeConditions:"; !strings.Contains(stderr.String(), want) {
		t.Errorf("error %q does not name %q", stderr.String(), want)
	}
	if _, err := os.Stat(badOut); err == nil {
		t.Error("a page was written for a bad log")
	}
	for _, args := range [][]string{{"report"}, {"report", "a", "b"}, {"report", "--max-rows", "1", demoDecisions}, {"report", filepath.Join(dir, "missing")}} {
		stderr.Reset()
		if code := run(args, &stdout, &stderr); code != cli.ExitError || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
