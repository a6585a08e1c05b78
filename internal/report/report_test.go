package report

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/timeline"
)

func demoLog(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "demo-decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func render(t *testing.T, log []byte, o Options) (string, error) {
	t.Helper()
	var out bytes.Buffer
	_, err := Render(&out, bytes.NewReader(log), "decisions.jsonl", o)
	return out.String(), err
}

// TestRenderDemoLog renders the log of a real `evictd demo` run: the three
// evictions in order with their ranking, trigger and message, the chart
// inline, and nothing fetched from elsewhere.
func TestRenderDemoLog(t *testing.T) {
	page, err := render(t, demoLog(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page, `<tr class="eviction">`); n != 3 {
		t.Errorf("%d eviction rows, want 3", n)
	}
	for _, want := range []string{
		"<svg", "allocatableMemory.available&lt;256Mi (soft, 2s)", "allocatableMemory.available&lt;128Mi",
		"host/leaky", "host/batch", "host/cache", "memcg-threshold allocatableMemory.available",
		"The node was low on resource: memory.", "12 synchronizes",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if i, j := strings.Index(page, "host/leaky (allocatable"), strings.Index(page, `<table id="evictions"`); i < 0 || j < 0 || i > j {
		t.Errorf("the chart (with its eviction labels) is not before the table")
	}
	// Self-contained: no script, stylesheet, image or font from elsewhere.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(page); m != "" {
		t.Errorf("the page loads %s", m)
	}
	if strings.Contains(page, "<script") {
		t.Error("the page has a script")
	}
}

// TestRenderEscapesNames: names in the log are user input.
func TestRenderEscapesNames(t *testing.T) {
	log := string(demoLog(t))
	log = strings.ReplaceAll(log, `"name":"leaky"`, `"name":"<img src=x onerror=alert(1)>\u001b]2;x"`)
	page, err := render(t, []byte(log), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, "<img") {
		t.Error("a pod name went into the page as markup")
	}
	if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("the escaped pod name is not on the page")
	}
	if strings.Contains(page, "\x1b") {
		t.Error("a control character went into the page")
	}
}

// TestRenderCapsTheTable: past MaxRows the table keeps the first and the
// last half and says how many are left out.
func TestRenderCapsTheTable(t *testing.T) {
	var buf bytes.Buffer
	writeSyntheticLog(t, &buf, 400, 10) // 40 evictions
	page, err := render(t, buf.Bytes(), Options{MaxRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page, `<tr class="eviction">`); n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
	if !strings.Contains(page, "40 evictions: the table lists the first 5 and the last 5; 30 in between are left out") {
		t.Error("the page does not say the table is capped")
	}
	// The rows kept are #1–5 and #36–40.
	for _, n := range []string{"<td>1<br>", "<td>5<br>", "<td>36<br>", "<td>40<br>"} {
		if !strings.Contains(page, n) {
			t.Errorf("row %s missing", n)
		}
	}
	if strings.Contains(page, "<td>6<br>") || strings.Contains(page, "<td>35<br>") {
		t.Error("a row from the middle is listed")
	}
}

// TestMalformedLogs: an error names the file, the line and the field.
func TestMalformedLogs(t *testing.T) {
	good := strings.SplitAfter(string(demoLog(t)), "\n")[0]
	for _, tc := range []struct {
		name, log, want string
	}{
		{"not JSON", good + "{oops\n", "decisions.jsonl:2: not a JSON record"},
		{"wrong type", good + `{"time":"2026-01-01T00:00:00Z","decision":{"observations":[{"signal":"memory.available","available":5}]}}` + "\n",
			"decisions.jsonl:2: field decision.observations.available: number where string was expected"},
		{"bad quantity", good + good + `{"time":"2026-01-01T00:00:00Z","decision":{"observations":[{"signal":"memory.available","available":"12Qi","capacity":"1Gi"}]}}` + "\n",
			`decisions.jsonl:3: field decision.observations[0].available: quantity "12Qi"`},
		{"no time", `{"decision":{}}` + "\n", "decisions.jsonl:1: field time: missing"},
		{"bad time", `{"time":"yesterday"}` + "\n", `decisions.jsonl:1: field time: time "yesterday": want RFC 3339`},
		{"bad trigger time", `{"time":"2026-01-01T00:00:00Z","trigger":{"at":"soon"}}` + "\n", `decisions.jsonl:1: field trigger.at: time "soon"`},
		{"bad first observed", `{"time":"2026-01-01T00:00:00Z","decision":{"met":[{"threshold":{"signal":"memory.available"},"firstObserved":"then"}]}}` + "\n", `decisions.jsonl:1: field decision.met[0].firstObserved: time "then"`},
		{"no pod name", `{"time":"2026-01-01T00:00:00Z","decision":{"evictions":[{"pod":{"namespace":"a"}}]}}` + "\n", "decisions.jsonl:1: field decision.evictions[0].pod.name: missing"},
		{"bad threshold", `{"time":"2026-01-01T00:00:00Z","decision":{"met":[{"threshold":{"signal":"memory.available","value":{"quantity":"lots"}}}]}}` + "\n", `decisions.jsonl:1: field decision.met[0].threshold.value.quantity: quantity "lots"`},
		{"long quantity", `{"time":"2026-01-01T00:00:00Z","decision":{"observations":[{"signal":"memory.available","available":"1","capacity":"` + strings.Repeat("9", 100) + `"}]}}` + "\n",
			`decisions.jsonl:1: field decision.observations[0].capacity: quantity "99999999999999999999"...: longer than 40 characters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Render(&out, strings.NewReader(tc.log), "decisions.jsonl", Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
			var le *LineError
			if !errors.As(err, &le) {
				t.Errorf("%T is not a *LineError", err)
			}
			if out.Len() != 0 {
				t.Error("a page was written for a malformed log")
			}
		})
	}
}

// TestIncompleteLastLine: a copy taken while evictd wrote ends in half a
// record; it is left out and the page says so. The same half line with a
// newline after it is an error.
func TestIncompleteLastLine(t *testing.T) {
	log := demoLog(t)
	cut := log[:len(log)-300]
	page, err := render(t, cut, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "last line is incomplete") || !strings.Contains(page, "11 synchronizes") {
		t.Error("the page does not say the last line was left out")
	}
	if _, err := render(t, append(cut, '\n'), Options{}); err == nil || !strings.Contains(err.Error(), "decisions.jsonl:12:") {
		t.Errorf("a broken line in the middle: %v, want an error on line 12", err)
	}
}

// TestEmptyLog renders a page that says there was nothing.
func TestEmptyLog(t *testing.T) {
	page, err := render(t, []byte("\n\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, "0 synchronizes") || !strings.Contains(page, "No eviction in this log.") {
		t.Error("an empty log's page does not say so")
	}
}

// FuzzParse: no input panics or hangs the log reader or the timeline it
// feeds; an error is a *LineError or a read error. (The chart drawing is
// left out: under the fuzzer's instrumentation one draw takes seconds.)
func FuzzParse(f *testing.F) {
	// Small seeds: the fuzzer minimizes each new input it finds (up to 60 s,
	// no execs counted meanwhile), which takes long for a 2 KiB record.
	// For a longer run: -fuzzminimizetime 0 (≈ 3,000 execs/s here).
	f.Add([]byte(strings.SplitAfter(string(demoLog(f)), "\n")[1]))
	f.Add([]byte(`{"time":"2026-01-01T00:00:00Z","trigger":{"reason":"wake","source":"psi"},"decision":{"observations":[{"signal":"memory.available","available":"100Mi","capacity":"1Gi"}],"met":[{"threshold":{"signal":"memory.available","operator":"LessThan","value":{"quantity":"200Mi"}},"quantity":"200Mi","available":"100Mi"}],"deciding":{"threshold":{"signal":"memory.available","operator":"LessThan","value":{"quantity":"200Mi"}}},"nodeConditions":["MemoryPressure"],"candidates":[{"rank":1,"pod":{"namespace":"a","name":"b"},"usage":"1Mi"}],"evictions":[{"pod":{"namespace":"a","name":"b"},"signal":"memory.available","gracePeriodSeconds":1}]},"actions":[{"kind":"evict","pod":{"namespace":"a","name":"b"},"result":{"method":"SIGTERM","gone":true}}]}` + "\n"))
	f.Add([]byte(`{"time":"2026-01-01T00:00:00Z","decision":{"observations":[{"signal":"memory.available","available":"-1","capacity":"0"}],"nodeConditions":["X"],"met":[{"threshold":{"signal":"pid.available","operator":"LessThan","value":{"percentage":0.5},"gracePeriod":1},"firstObserved":"0001-01-01T00:00:00Z"}]}}`))
	f.Add([]byte("{}\n{\"time\":\"2026-01-01T00:00:00Z\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := NewReader(bytes.NewReader(data), "f.jsonl")
		defer rd.Close()
		b := timeline.Builder{MaxGap: DefaultMaxGap, MaxBuckets: 8, MaxIntervals: 4}
		var rec Record
		for {
			err := rd.Next(&rec)
			if errors.Is(err, io.EOF) {
				break
			}
			var le *LineError
			if err != nil {
				if !errors.As(err, &le) {
					t.Fatalf("%T: %v", err, err)
				}
				return
			}
			b.Add(rec.sample())
			for i := range rec.Decision.Evictions {
				makeRow(&rec, i, 1, rd.Line(), 3)
			}
		}
		b.Build()
	})
}

// TestReaderAcrossBatches: records come back in file order across the
// decoding batches, an error names its line, and a partial last line after
// many batches is left out.
func TestReaderAcrossBatches(t *testing.T) {
	var buf bytes.Buffer
	writeSyntheticLog(t, &buf, 3*batchLines+7, 50)
	lines := strings.SplitAfter(buf.String(), "\n")
	lines = lines[:len(lines)-1] // the empty string after the last newline
	read := func(log string) (n int, last time.Time, incomplete bool, err error) {
		rd := NewReader(strings.NewReader(log), "x")
		defer rd.Close()
		var rec Record
		for {
			if err = rd.Next(&rec); err != nil {
				break
			}
			n++
			if !rec.Time.After(last) || rd.Line() != n {
				t.Fatalf("record %d (line %d) at %v after %v: out of order", n, rd.Line(), rec.Time, last)
			}
			last = rec.Time
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return n, last, rd.Incomplete, err
	}
	if n, _, inc, err := read(buf.String()); n != len(lines) || inc || err != nil {
		t.Errorf("whole log: %d records, incomplete %v, %v", n, inc, err)
	}
	bad := append(append(append([]string{}, lines[:599]...), "{oops\n"), lines[600:]...)
	if n, _, _, err := read(strings.Join(bad, "")); n != 599 || err == nil || !strings.HasPrefix(err.Error(), "x:600: ") {
		t.Errorf("bad line 600: %d records, %v", n, err)
	}
	cut := buf.String()[:buf.Len()-200]
	if n, _, inc, err := read(cut); n != len(lines)-1 || !inc || err != nil {
		t.Errorf("cut log: %d records, incomplete %v, %v", n, inc, err)
	}
}
