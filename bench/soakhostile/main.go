// Command soakhostile is the hostile side of bench/soak.sh --hostile: while
// the soak's churn runs, it holds a flood of idle keep-alive and slow-header
// connections to evictd's metrics server (re-dialling each one the server
// closes), probes /healthz, and samples the workload root's memory to find
// every crossing of the threshold; at the end it matches each crossing with
// the evictions evictd logged and prints one summary line per measure.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/connflood"
)

func main() {
	addr := flag.String("metrics", "", "evictd's --metrics-addr")
	idle := flag.Int("idle", 300, "idle keep-alive connections to hold")
	slow := flag.Int("slow", 300, "slow-header connections to hold")
	root := flag.String("root", "", "the workload root's memory cgroup directory")
	limit := flag.Int64("limit", 1<<30, "the root's memory limit, bytes")
	threshold := flag.Int64("threshold", 300<<20, "the threshold on the root's available memory, bytes")
	agentLog := flag.String("agent-log", "", "evictd's log (text format), read at the end for its evictions")
	every := flag.Duration("sample", 5*time.Millisecond, "how often the root's memory is sampled")
	flag.Parse()
	if *addr == "" || *root == "" || *agentLog == "" {
		fmt.Fprintln(os.Stderr, "soakhostile: -metrics, -root and -agent-log are required")
		os.Exit(2)
	}
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	go func() { <-sig; close(stop) }()

	fl := connflood.Start(*addr, *idle, *slow)
	var wg sync.WaitGroup
	probes := &probeStats{}
	wg.Add(1)
	go func() { defer wg.Done(); probe(*addr, probes, stop) }()
	start := time.Now()
	eps := sampleCrossings(*root, *limit, *threshold, *every, stop)
	end := time.Now()
	fl.Stop()
	wg.Wait()

	evictions, err := loggedEvictions(*agentLog, start, end)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakhostile:", err)
		os.Exit(1)
	}
	matched := 0
	var missed []episode
	for _, e := range eps {
		// An eviction decided from 1 s before the sampler saw the crossing
		// (evictd's wake-up is faster than a 5 ms poll) to 3 s after it ended.
		hit := false
		for _, t := range evictions {
			if !t.Before(e.from.Add(-time.Second)) && !t.After(e.to.Add(3*time.Second)) {
				hit = true
				break
			}
		}
		if hit {
			matched++
		} else {
			missed = append(missed, e)
		}
	}
	fmt.Printf("crossings: %d; crossings with an eviction: %d; evictions logged: %d\n", len(eps), matched, len(evictions))
	for i, e := range missed {
		if i == 5 {
			fmt.Printf("  … %d more missed\n", len(missed)-5)
			break
		}
		fmt.Printf("  missed: %s for %s\n", e.from.UTC().Format(time.RFC3339Nano), e.to.Sub(e.from))
	}
	fmt.Printf("connection flood: %d idle + %d slow held, %d connections made in all\n", *idle, *slow, fl.Dials())
	probes.mu.Lock()
	fmt.Printf("/healthz probes under the flood: %d ok, %d failed, slowest %s\n", probes.ok, probes.failed, probes.slowest.Round(time.Millisecond))
	probes.mu.Unlock()
	if oom, err := readOOMKills(*root); err == nil {
		fmt.Printf("kernel OOM kills under the root: %d\n", oom)
	}
}

type probeStats struct {
	mu         sync.Mutex
	ok, failed int
	slowest    time.Duration
}

// probe asks /healthz every 2 s, as a liveness probe would.
func probe(addr string, s *probeStats, stop <-chan struct{}) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Second):
		}
		t := time.Now()
		resp, err := client.Get("http://" + addr + "/healthz")
		took := time.Since(t)
		s.mu.Lock()
		if err == nil && resp.StatusCode == 200 {
			s.ok++
		} else {
			s.failed++
		}
		s.slowest = max(s.slowest, took)
		s.mu.Unlock()
		if err == nil {
			resp.Body.Close()
		}
	}
}

type episode struct{ from, to time.Time }

// sampleCrossings reads the root's working set (usage − inactive_file, as
// the kubelet and evictd compute it) until stop and returns the episodes
// where limit − working set was below threshold.
func sampleCrossings(root string, limit, threshold int64, every time.Duration, stop <-chan struct{}) []episode {
	var eps []episode
	var in *episode
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			if in != nil {
				eps = append(eps, *in)
			}
			return eps
		case now := <-tick.C:
			ws, err := workingSet(root)
			if err != nil {
				continue
			}
			below := limit-ws < threshold
			switch {
			case below && in == nil:
				in = &episode{from: now, to: now}
			case below:
				in.to = now
			case in != nil:
				eps = append(eps, *in)
				in = nil
			}
		}
	}
}

func workingSet(root string) (int64, error) {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file " // cgroup v1
	if _, err := os.Stat(filepath.Join(root, "memory.current")); err == nil {
		usageFile, inactiveKey = "memory.current", "inactive_file " // v2
	}
	b, err := os.ReadFile(filepath.Join(root, usageFile))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := os.ReadFile(filepath.Join(root, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, inactiveKey); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return max(usage-n, 0), nil
		}
	}
	return usage, nil
}

// loggedEvictions returns the times of evictd's "evicted" lines (the kill
// done) within [from, to].
func loggedEvictions(path string, from, to time.Time) ([]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, " msg=evicted ") {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.Before(from) || t.After(to.Add(5*time.Second)) {
			continue
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

func readOOMKills(root string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(root, "memory.oom_control")) // v1
	if err != nil {
		if b, err = os.ReadFile(filepath.Join(root, "memory.events")); err != nil { // v2
			return 0, err
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no oom_kill in memory.oom_control")
}
