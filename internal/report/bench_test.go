package report

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/agent"
)

// weekRecords is a week at one record per second.
const weekRecords = 7 * 24 * 3600

// writeSyntheticLog writes n records, one per second, made from the real
// demo's records (agent.Record, encoded as DecisionLog encodes it): the
// records that did not evict, with memory drifting and spiking, and one that
// evicted every evictEvery records.
func writeSyntheticLog(tb testing.TB, w io.Writer, n, evictEvery int) {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "demo-decisions.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var quiet, evicting []agent.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r agent.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatal(err)
		}
		if len(r.Decision.Evictions) > 0 {
			evicting = append(evicting, r)
		} else {
			quiet = append(quiet, r)
		}
	}
	if len(quiet) == 0 || len(evicting) == 0 {
		tb.Fatal("the demo's log needs records with and without evictions")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		var r agent.Record
		if evictEvery > 0 && i%evictEvery == evictEvery-1 {
			r = evicting[i%len(evicting)]
		} else {
			r = quiet[i%len(quiet)]
		}
		now := start.Add(time.Duration(i) * time.Second)
		r.Time, r.Trigger.At, r.Decision.Now = now, now.Add(-2*time.Millisecond), now
		obs := append(r.Decision.Observations[:0:0], r.Decision.Observations...)
		for k := range obs {
			c := obs[k].Capacity.Value()
			v := float64(c) * (0.3 + 0.2*math.Sin(float64(i)/5000))
			if i%86413 == 0 {
				v = float64(c) * 0.01 // a spike the downsampling must keep
			}
			obs[k].Available = *resource.NewQuantity(int64(v), resource.BinarySI)
		}
		r.Decision.Observations = obs
		if err := enc.Encode(r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkRenderWeek renders a week-sized log (604800 records, an eviction
// every 10 minutes) and reports the log's size, the throughput and the peak
// live heap (sampled every 5 ms). Run:
//
//	go test -run '^$' -bench RenderWeek -benchtime 1x ./internal/report/
func BenchmarkRenderWeek(b *testing.B) {
	path := filepath.Join(b.TempDir(), "week.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	// EVICTD_BENCH_REPORT_RECORDS (bench/report.sh's quick mode) renders a
	// shorter log; the figures are then not the week's.
	records := weekRecords
	if v := os.Getenv("EVICTD_BENCH_REPORT_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("EVICTD_BENCH_REPORT_RECORDS=%q: want a positive number", v)
		}
		records = n
	}
	writeSyntheticLog(b, f, records, 600)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Render(io.Discard, in, "week.jsonl", Options{}); err != nil {
			b.Fatal(err)
		}
		in.Close()
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	close(stop)
	<-done
	b.ReportMetric(float64(st.Size())/(1<<20), "log-MiB")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(records), "records")
}

// cpuTime is the process's user+system CPU time: on a shared machine the
// wall clock also measures waiting for a CPU.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
