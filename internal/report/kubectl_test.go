package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// evictdLogLines are log lines as `evictd run` writes them, text or JSON,
// with the attributes its eviction line has ("trigger" is a string there,
// an object in a record).
func evictdLogLines(json bool) []string {
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if json {
		h = slog.NewJSONHandler(&buf, nil)
	}
	log := slog.New(h)
	log.Info("evictd running in Kubernetes mode", "node", "node-a", "dry_run", false)
	log.Info("eviction thresholds met", "thresholds", "memory.available<100Mi")
	log.Info("evicted", "pod", "ns/hog", "signal", "memory.available", "grace", time.Second, "trigger", "wake",
		"wake_source", "psi", "threshold", "memory.available<100Mi", "available", "90Mi", "method", "Eviction API", "gone", false)
	log.Warn("writing the decision-log failed; retrying at every synchronize", "err", "write /dev/stdout: broken pipe")
	lines := strings.SplitAfter(buf.String(), "\n")
	return lines[:len(lines)-1] // the "" after the last newline
}

// `kubectl logs` of the DaemonSet (--decision-log -) interleaves the
// records with evictd's log lines, text or --log-format json, with or
// without --timestamps: the report skips the log lines, says how many, and
// counts the records right. (It failed at line 1 on text lines and counted
// JSON log lines as records.)
func TestKubectlLogsOutput(t *testing.T) {
	records := strings.SplitAfter(strings.TrimSuffix(string(demoLog(t)), "\n"), "\n")
	for _, json := range []bool{false, true} {
		for _, stamps := range []bool{false, true} {
			t.Run(fmt.Sprintf("json=%v,timestamps=%v", json, stamps), func(t *testing.T) {
				logs := evictdLogLines(json)
				var mixed strings.Builder
				n := 0
				add := func(l string) {
					if stamps {
						mixed.WriteString(time.Date(2026, 12, 1, 17, 0, 0, n, time.UTC).Format(time.RFC3339Nano) + " ")
					}
					mixed.WriteString(l)
					n++
				}
				add("Defaulted container \"evictd\" out of: evictd\n")
				for i, r := range records {
					add(logs[i%len(logs)])
					add(r)
				}
				var out bytes.Buffer
				sum, err := Render(&out, strings.NewReader(mixed.String()), "kubectl-logs", Options{})
				if err != nil {
					t.Fatal(err)
				}
				if sum.Records != len(records) || sum.NotRecords != len(records)+1 || sum.Evictions != 3 {
					t.Errorf("records %d, not records %d, evictions %d; want %d, %d, 3", sum.Records, sum.NotRecords, sum.Evictions, len(records), len(records)+1)
				}
				if !strings.Contains(out.String(), fmt.Sprintf("%d lines are not decision records", len(records)+1)) {
					t.Error("the page does not say how many lines were skipped")
				}
			})
		}
	}
	// Nothing but log lines: not a decision log, said so.
	if _, err := Render(io.Discard, strings.NewReader(strings.Join(evictdLogLines(false), "")), "x", Options{}); err == nil || !strings.Contains(err.Error(), "no decision record") {
		t.Errorf("a file of log lines only: %v", err)
	}
}

// One corrupt record in the middle of a long log fails the report, saying
// how to go on; --skip-bad (SkipBad) skips it, counts it and names it.
func TestSkipBad(t *testing.T) {
	lines := strings.SplitAfter(strings.TrimSuffix(string(demoLog(t)), "\n"), "\n")
	bad := strings.Join(lines[:5], "") + `{"time":"2026-12-01T17:00:20Z","decision":{"observations":[{"signal":"memory.available","available":"12Qi","capacity":"1Gi"}]}}` + "\n" +
		"{half a rec\n" + strings.Join(lines[5:], "")
	_, err := Render(io.Discard, strings.NewReader(bad), "d.jsonl", Options{})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 6 || !strings.Contains(err.Error(), "--skip-bad") {
		t.Fatalf("without SkipBad: %v, want the error on line 6 naming --skip-bad", err)
	}
	var out bytes.Buffer
	sum, err := Render(&out, strings.NewReader(bad), "d.jsonl", Options{SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 2 || sum.Records != len(lines) || !strings.HasPrefix(sum.FirstSkipped, "d.jsonl:6: field decision.observations[0].available") {
		t.Fatalf("skipped %d (first %q), records %d; want 2 skipped, the first on line 6, %d records", sum.Skipped, sum.FirstSkipped, sum.Records, len(lines))
	}
	if !strings.Contains(out.String(), "2 malformed records were skipped") {
		t.Error("the page does not say records were skipped")
	}
}

// garbage is n lines of size bytes each, made as they are read.
type garbage struct{ n, size, i, at int }

var xs = bytes.Repeat([]byte("x"), 64<<10)

func (g *garbage) Read(p []byte) (int, error) {
	if g.i >= g.n {
		return 0, io.EOF
	}
	if g.at == g.size {
		p[0] = '\n'
		g.at, g.i = 0, g.i+1
		return 1, nil
	}
	k := copy(p, xs[:min(len(xs), g.size-g.at)])
	g.at += k
	return k, nil
}

// Lines far longer than any record are never held whole: ten 16 MiB lines
// cost the reader about MaxLine each, not their size (ten 50 MB lines once
// took 910 MB of RSS before the error).
func TestLongLinesAreNotKept(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rd := NewReader(&garbage{n: 10, size: 16 << 20}, "g")
	rd.SkipBad = true
	var rec Record
	err := rd.Next(&rec)
	runtime.ReadMemStats(&after)
	rd.Close()
	if !errors.Is(err, io.EOF) || rd.Skipped != 10 {
		t.Fatalf("Next: %v, skipped %d; want EOF after skipping 10", err, rd.Skipped)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("reading 160 MiB of over-long lines allocated %d MiB", alloc>>20)
	}
	_, err = Render(io.Discard, &garbage{n: 3, size: 2 * MaxLine}, "g", Options{})
	if err == nil || !strings.Contains(err.Error(), "g:1: line longer than 1 MiB") {
		t.Fatalf("without SkipBad: %v", err)
	}
}
