// Package nodebench holds the results of the real-node benchmarks
// (test/node/bench_test.go, run by bench/node.sh) and prints them as
// tables, side by side, with ratios. The benchmarks append one Row per
// measured configuration to a JSON-lines file; Print reads them back.
package nodebench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Kinds of rows.
const (
	KindLatency = "latency"
	KindOOM     = "oom"
	KindSync    = "sync"
)

// Who evicted a pod, as the harness's watch saw it first.
const (
	ByEvictd  = "evictd"  // deletion timestamp set: an API eviction (the kubelet evicts locally, never through the API)
	ByKubelet = "kubelet" // status Failed, reason Evicted: the kubelet's own eviction
)

// Row is one configuration's result.
type Row struct {
	Kind string `json:"kind"`
	// Name is the configuration, e.g. "evictd (DaemonSet) + kubelet, 10 s polling".
	Name string `json:"name"`
	// Key orders rows and pairs them across tables: "evictd", "kubelet-polling", "kubelet-memcg".
	Key string `json:"key"`
	// Rate is the OOM row's paced ramp (bytes per second), Threads the
	// number of threads of a ramp at full speed instead (Rate 0), and
	// IgnoreTerm says the hog ignored SIGTERM.
	Rate       int64 `json:"rate,omitempty"`
	Threads    int   `json:"threads,omitempty"`
	IgnoreTerm bool  `json:"ignoreTerm,omitempty"`
	// Threshold and Headroom (bytes): the kubelet's memory.available hard
	// threshold, and the distance from the crossing to the kubepods
	// cgroup's limit, where the kernel OOM-kills.
	Threshold int64     `json:"threshold"`
	Headroom  int64     `json:"headroom"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	// Load is /proc/loadavg's first three fields at start and end.
	Load    [2]string      `json:"load"`
	Latency []LatencyTrial `json:"latency,omitempty"`
	OOM     []OOMTrial     `json:"oom,omitempty"`
	Sync    []SyncWindow   `json:"sync,omitempty"`
}

// LatencyTrial is one crossing. Err is set when the trial did not
// complete (it is then left out of the percentiles and counted).
type LatencyTrial struct {
	Accepted  time.Duration `json:"accepted"` // crossing → eviction seen accepted in the API
	Empty     time.Duration `json:"empty"`    // crossing → the pod's cgroup holds no process
	EvictedBy string        `json:"evictedBy"`
	OOMKills  int           `json:"oomKills"`
	Err       string        `json:"err,omitempty"`
}

// OOMTrial is one ramp past the threshold towards the kubepods limit.
type OOMTrial struct {
	OOMKills  int    `json:"oomKills"`  // kernel OOM kills in the kubepods cgroup (kernel log)
	Evicted   bool   `json:"evicted"`   // the pod was evicted (by anyone) before the trial ended
	EvictedBy string `json:"evictedBy"` // who
	// Rate is the ramp's speed the harness's sampler saw just before the
	// crossing (bytes per second), 0 when it saw too few samples.
	Rate float64 `json:"rate"`
	// Stopped: crossing → the victim pod's usage within 256 KiB of its
	// peak for good (growth stopped: by evictd's stop, the hog's
	// end, or the kernel's OOM kill at the limit); Empty: crossing → the
	// pod's cgroup holds no process. 0 when not seen.
	Stopped time.Duration `json:"stopped,omitempty"`
	Empty   time.Duration `json:"empty,omitempty"`
	// InForce: crossing → evictd's growth stop in force, from the
	// decision log in its pod's log (GrowthStop.At, the same clock as the
	// sampler's); negative when it came before the sampler saw the
	// crossing, 0 without a stop. From then on the pod's usage is held
	// within the stop's margin, whatever the sampler sees it fill.
	InForce time.Duration `json:"inForce,omitempty"`
	// Crossed is when the sampler saw the crossing (the host's clock, as
	// evictd's log's): with the wake-up's time in that log it splits a
	// slow stop into crossing → wake-up and wake-up → stop.
	Crossed time.Time `json:"crossed,omitzero"`
	Err     string    `json:"err,omitempty"`
}

// SyncWindow is evictd's own metrics over a window of an idle node.
type SyncWindow struct {
	Pods   int           `json:"pods"` // pods on the node (evictd's included)
	Window time.Duration `json:"window"`
	// Count, Sum: synchronizes in the window and their total duration
	// (evictd_synchronize_duration_seconds); P50, P99 estimated from its
	// buckets as Prometheus's histogram_quantile does.
	Count uint64        `json:"count"`
	Sum   time.Duration `json:"sum"`
	P50   time.Duration `json:"p50"`
	P99   time.Duration `json:"p99"`
	// CPU is evictd's CPU time in the window (process_cpu_seconds_total):
	// synchronizes, its informer and its HTTP server together.
	CPU time.Duration `json:"cpu"`
	// RSS is process_resident_memory_bytes at the window's end; Heap is
	// go_memstats_heap_inuse_bytes.
	RSS  float64 `json:"rss"`
	Heap float64 `json:"heap"`
	// Host is the host benchmark's figure on the same node right after the
	// window: the mean wall time of the same synchronize work
	// (internal/kube's BenchmarkKubeSynchronize: the Summary from the pod
	// cgroups named from the pods, and the engine's step) done HostRounds
	// times in the benchmark's own process, outside evictd's pod.
	Host       time.Duration `json:"host,omitempty"`
	HostRounds int           `json:"hostRounds,omitempty"`
	// Args are evictd's arguments beyond the DaemonSet's own in this
	// window ("": as shipped).
	Args string `json:"args,omitempty"`
}

// Append adds a row to the JSON-lines file path.
func Append(path string, r Row) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read reads the rows of a JSON-lines file.
func Read(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseRows(f)
}

func parseRows(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// keyOrder is the rows' order in every table: evictd first, the baseline
// of the ratios.
// The evictd-<wake-up> rows are evictd with one v2 wake-up alone (the cgroup
// v2 node's BenchmarkNode).
var keyOrder = []string{"evictd", "evictd-nostop", "evictd-fastpoll", "evictd-psi", "evictd-events", "kubelet-polling", "kubelet-memcg"}

func byKey(a, b Row) int {
	if d := slices.Index(keyOrder, a.Key) - slices.Index(keyOrder, b.Key); d != 0 {
		return d
	}
	if d := int(b.Headroom>>20) - int(a.Headroom>>20); d != 0 {
		return d // 256 MiB before 64 MiB
	}
	if d := rampOrder(a) - rampOrder(b); d != 0 {
		return d
	}
	if a.IgnoreTerm != b.IgnoreTerm {
		if a.IgnoreTerm {
			return 1
		}
		return -1
	}
	return 0
}

// rampOrder puts paced ramps first (slowest first), then full-speed ones by
// threads.
func rampOrder(r Row) int {
	if r.Threads > 0 {
		return 1<<20 + r.Threads
	}
	return int(r.Rate >> 20)
}

// RampName is an OOM row's ramp as the tables name it.
func (r Row) RampName() string {
	switch {
	case r.Threads == 1:
		return "1 thread, full speed"
	case r.Threads > 1:
		return fmt.Sprintf("%d threads, full speed", r.Threads)
	}
	return rateString(float64(r.Rate))
}

// Percentile is the nearest-rank percentile (p in 0–100) of d: with fewer
// than 100 values p99 is the largest.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func secs(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < time.Second:
		return fmt.Sprintf("%.3f s", d.Seconds())
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func ratio(a, base time.Duration) string {
	if a == 0 || base == 0 {
		return "—"
	}
	return fmt.Sprintf("×%.1f", float64(a)/float64(base))
}

// Print writes the tables: latencies, OOM kills per ramp, synchronize cost.
func Print(w io.Writer, rows []Row) {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, byKey)
	var lat, oom, syn []Row
	for _, r := range rows {
		switch r.Kind {
		case KindLatency:
			lat = append(lat, r)
		case KindOOM:
			oom = append(oom, r)
		case KindSync:
			syn = append(syn, r)
		}
	}
	if len(lat) > 0 {
		printLatency(w, lat)
	}
	if len(oom) > 0 {
		printOOM(w, oom)
	}
	if len(syn) > 0 {
		printSync(w, syn)
	}
}

func printLatency(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "Crossing → eviction accepted by the API, and → the pod's cgroup empty (threshold memory.available<%dMi)\n", rows[0].Threshold>>20)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "configuration\ttrials\taccepted p50\tp99\tratio p50\tcgroup empty p50\tp99\tratio p50\tevicted by\tOOM kills\tfailed\tload (start → end)\t")
	var base0, base1 time.Duration
	for i, r := range rows {
		var acc, emp []time.Duration
		by := map[string]int{}
		kills, failed := 0, 0
		for _, t := range r.Latency {
			kills += t.OOMKills
			if t.Err != "" {
				failed++
				continue
			}
			acc = append(acc, t.Accepted)
			emp = append(emp, t.Empty)
			by[t.EvictedBy]++
		}
		a50, a99, e50, e99 := Percentile(acc, 50), Percentile(acc, 99), Percentile(emp, 50), Percentile(emp, 99)
		if i == 0 {
			base0, base1 = a50, e50
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s → %s\t\n", r.Name, len(acc), secs(a50), secs(a99), ratio(a50, base0),
			secs(e50), secs(e99), ratio(e50, base1), evictedBy(by), kills, failed, r.Load[0], r.Load[1])
	}
	tw.Flush()
	fmt.Fprintln(w, "accepted: for evictd the pod's deletion timestamp (the Eviction API's 201), for the kubelet alone the pod's status Failed/Evicted, as the harness's watch first saw them.")
	fmt.Fprintln(w, "p99 is nearest-rank: with fewer than 100 trials, the largest. Ratios are to the first row.")
	fmt.Fprintln(w)
}

func evictedBy(by map[string]int) string {
	var parts []string
	for _, k := range []string{ByEvictd, ByKubelet} {
		if by[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

func printOOM(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "Kernel OOM kills at memory ramps past the kubepods limit; headroom = the distance from the eviction threshold to that limit")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "configuration	headroom	ramp	seen ramp	SIGTERM	trials	trials with an OOM kill	OOM kills	growth stopped p50	p99	stop in force p50	p99	cgroup empty p50	p99	evicted by	failed	load (start → end)	")
	for _, r := range rows {
		n, kills, with, failed := 0, 0, 0, 0
		var seen []float64
		var stopped, inForce, empty []time.Duration
		by := map[string]int{}
		for _, t := range r.OOM {
			if t.Err != "" {
				failed++
				continue
			}
			n++
			kills += t.OOMKills
			if t.OOMKills > 0 {
				with++
			}
			if t.Evicted {
				by[t.EvictedBy]++
			}
			if t.Rate > 0 {
				seen = append(seen, t.Rate)
			}
			if t.Stopped > 0 {
				stopped = append(stopped, t.Stopped)
			}
			if t.Empty > 0 {
				empty = append(empty, t.Empty)
			}
			if t.InForce != 0 {
				inForce = append(inForce, t.InForce)
			}
		}
		slices.Sort(seen)
		sr := "—"
		if len(seen) > 0 {
			sr = rateString(seen[len(seen)/2])
		}
		term := "obeyed"
		if r.IgnoreTerm {
			term = "ignored"
		}
		fmt.Fprintf(tw, "%s\t%d MiB\t%s\t%s\t%s\t%d\t%d/%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s → %s\t\n", r.Name, r.Headroom>>20, r.RampName(), sr, term,
			n, with, n, kills, msecs(Percentile(stopped, 50)), msecs(Percentile(stopped, 99)), msecs(Percentile(inForce, 50)), msecs(Percentile(inForce, 99)),
			secs(Percentile(empty, 50)), secs(Percentile(empty, 99)),
			evictedBy(by), failed, r.Load[0], r.Load[1])
	}
	tw.Flush()
	fmt.Fprintln(w, "OOM kills: oom-kill records of the kernel log charged to the kubepods cgroup (its limit or a pod's).")
	fmt.Fprintln(w, "seen ramp: the working set's growth over the 32 MiB before the crossing, by the harness's sampler (every 0.5 ms before the crossing, 0.25 ms after it, on a real-time thread).")
	fmt.Fprintln(w, "growth stopped: crossing → the victim pod's usage within 256 KiB of its peak for good, by the sampler; stop in force: crossing → evictd's growth stop in force, by its decision log")
	fmt.Fprintln(w, "(negative: before the sampler saw the crossing; from then on the usage is held within the stop's margin); cgroup empty: crossing → the pod's cgroup holds no process.")
	fmt.Fprintln(w)
}

func rateString(r float64) string {
	if r >= 1<<30 {
		return fmt.Sprintf("%.1f GiB/s", r/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB/s", r/(1<<20))
}

func printSync(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "evictd's synchronize and memory on an idle node, from its own /metrics")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pods on the node\tevictd\twindow\tsynchronizes\tmean\tp50\tp99\tratio mean\thost benchmark\tmean / host\tCPU\tratio CPU\tRSS\tratio RSS\theap in use\tload (start → end)\t")
	for _, r := range rows {
		var base SyncWindow
		for i, s := range r.Sync {
			if i == 0 {
				base = s
			}
			mean := time.Duration(0)
			if s.Count > 0 {
				mean = s.Sum / time.Duration(s.Count)
			}
			bmean := time.Duration(0)
			if base.Count > 0 {
				bmean = base.Sum / time.Duration(base.Count)
			}
			rss := "—"
			if base.RSS > 0 {
				rss = fmt.Sprintf("×%.2f", s.RSS/base.RSS)
			}
			load := ""
			if i == len(r.Sync)-1 {
				load = r.Load[0] + " → " + r.Load[1]
			}
			cpu := fmt.Sprintf("%.2f %%", 100*s.CPU.Seconds()/s.Window.Seconds())
			host, vsHost := "—", "—"
			if s.Host > 0 {
				host, vsHost = msecs(s.Host), ratio(mean, s.Host)
			}
			args := s.Args
			if args == "" {
				args = "as shipped"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f MiB\t%s\t%.1f MiB\t%s\t\n", s.Pods, args, s.Window.Round(time.Second), s.Count,
				msecs(mean), msecs(s.P50), msecs(s.P99), ratio(mean, bmean), host, vsHost, cpu, ratio(s.CPU, base.CPU), s.RSS/(1<<20), rss, s.Heap/(1<<20), load)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "mean, p50, p99: wall time of one synchronize (evictd_synchronize_duration_seconds; p50/p99 estimated from its buckets, 0.5 ms × 2ⁿ, as histogram_quantile does); an idle node synchronizes every 10 s.")
	fmt.Fprintln(w, "host benchmark: the same synchronize work (the Summary from the pods' cgroups, named from the pods, and the engine's step; internal/kube's BenchmarkKubeSynchronize) on the same node right after the window, in the benchmark's own process outside evictd's pod: mean wall time.")
	fmt.Fprintln(w, "CPU: evictd's CPU time over the window (process_cpu_seconds_total), % of one core. RSS: process_resident_memory_bytes at the window's end; ratios are to the first window.")
	fmt.Fprintln(w, "evictd: the DaemonSet as shipped, or with the arguments given (the last window: the same pods, evictd reinstalled with its binary's start-up pages kept mapped).")
	fmt.Fprintln(w)
}

func msecs(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
