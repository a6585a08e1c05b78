package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/evictd/evictd/internal/agent"
	cgroupv1 "github.com/evictd/evictd/internal/cgroup/v1"
	cgroupv2 "github.com/evictd/evictd/internal/cgroup/v2"
	"github.com/evictd/evictd/internal/collect"
	"github.com/evictd/evictd/internal/kube"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/test/node"
	"github.com/evictd/evictd/test/node/nodebench"
)

// The benchmark's environment (bench/node.sh sets it).
const (
	envBenchOut       = "EVICTD_BENCH_NODE_OUT"        // JSON-lines file the rows are appended to
	envBenchTrials    = "EVICTD_BENCH_NODE_TRIALS"     // latency trials per row (30)
	envBenchOOMTrials = "EVICTD_BENCH_NODE_OOM_TRIALS" // trials per ramp and configuration (10)
	envBenchWindow    = "EVICTD_BENCH_NODE_WINDOW"     // metrics window per pod count (120s)
	envBenchSyncPods  = "EVICTD_BENCH_NODE_SYNC_PODS"  // pods on the node in the synchronize row's second window (110)
	// latency trials per row of evictd with one v2 wake-up alone (10)
	envBenchWakeupTrials = "EVICTD_BENCH_NODE_WAKEUP_TRIALS"
	// envBenchOOMRamps: the OOM rows' ramps, comma-separated: "RATEMi/s"
	// (paced) or "N threads" (full speed); "500Mi/s,1 thread,2 threads".
	envBenchOOMRamps = "EVICTD_BENCH_NODE_OOM_RAMPS"
	// envBenchOOMSigterm: "obeyed,ignored" (default), either alone.
	envBenchOOMSigterm = "EVICTD_BENCH_NODE_OOM_SIGTERM"
	// envBenchTrace: "1" logs each OOM trial's usage samples from the
	// crossing to just past growth stopped (what a slow stop looked like).
	envBenchTrace = "EVICTD_BENCH_NODE_TRACE"
)

// The trials' shapes.
const (
	// sampleEvery is the crossing sampler's period: a crossing is
	// timestamped at most this (plus one read of the kubepods cgroup,
	// ≈ 0.1 ms) after it happened, so latencies are understated by as much.
	// After the crossing it reads only the usage (one small file), every
	// afterEvery, to see when growth stopped.
	sampleEvery = 500 * time.Microsecond
	afterEvery  = 250 * time.Microsecond
	// samplerPriority is the sampler thread's SCHED_FIFO priority: above
	// every ordinary thread (the hog's and evictd's), below the kernel's.
	samplerPriority = 50
	// stopSlack: the victim's usage within this of its peak counts as
	// stopped: the v1 growth stop's margin above the usage
	// (actuate.memoryLimitMargin, 256 KiB); a wider slack read a stop that
	// came late as at the crossing.
	stopSlack = 256 << 10
	// emptyEvery is how often the pod's cgroup is checked for processes.
	emptyEvery = 5 * time.Millisecond
	// rampFrom: the hog allocates at once up to this far below the
	// crossing, then ramps, so the crossing happens during the ramp.
	rampFrom = 48 << 20
	// latencyOver: a latency trial's hog holds this far past the crossing,
	// below the kubepods limit (the headroom), so only an eviction ends it.
	latencyOver = 128 << 20
	latencyRate = 100 << 20
	// oomOver: an OOM trial's hog ramps this far past the kubepods limit,
	// so that without an eviction the kernel OOM-kills it.
	oomOver = 128 << 20
	// rateWindow: the seen ramp rate is measured over the last this many
	// bytes before the crossing.
	rateWindow   = 32 << 20
	trialTimeout = 60 * time.Second
	// kubeletPeriod is the kubelet's evictionMonitoringPeriod.
	kubeletPeriod = agent.DefaultInterval
	// settle: after the hog ended, how long an OOM trial keeps counting
	// kernel OOM kills (one racing an eviction lands within it).
	settle = time.Second
	// syncPods: the kubelet's default maxPods, filled with sleepers and
	// evictd's own pod (EVICTD_BENCH_NODE_SYNC_PODS: fewer, in the quick
	// mode).
	syncPods = 110
)

// hogRamp is an OOM trial's ramp past the crossing: paced at Rate bytes per
// second, or from Threads threads touching memory at full speed.
type hogRamp struct {
	Rate       int64
	Threads    int
	IgnoreTerm bool
}

// oomRamps reads the OOM rows' ramps and SIGTERM cells.
func oomRamps(b *testing.B) []hogRamp {
	ramps := os.Getenv(envBenchOOMRamps)
	if ramps == "" {
		ramps = "500Mi/s,1 thread,2 threads"
	}
	terms := os.Getenv(envBenchOOMSigterm)
	if terms == "" {
		terms = "obeyed,ignored"
	}
	var out []hogRamp
	for _, r := range strings.Split(ramps, ",") {
		var h hogRamp
		if n, ok := strings.CutSuffix(strings.TrimSuffix(r, "s"), " thread"); ok {
			t, err := strconv.Atoi(n)
			if err != nil || t < 1 {
				b.Fatalf("%s: %q: want N threads or RATEMi/s", envBenchOOMRamps, r)
			}
			h.Threads = t
		} else if mi, ok := strings.CutSuffix(r, "Mi/s"); ok {
			m, err := strconv.Atoi(mi)
			if err != nil || m < 1 {
				b.Fatalf("%s: %q: want N threads or RATEMi/s", envBenchOOMRamps, r)
			}
			h.Rate = int64(m) << 20
		} else {
			b.Fatalf("%s: %q: want N threads or RATEMi/s", envBenchOOMRamps, r)
		}
		for _, t := range strings.Split(terms, ",") {
			if t != "obeyed" && t != "ignored" {
				b.Fatalf("%s: %q: want obeyed or ignored", envBenchOOMSigterm, t)
			}
			h.IgnoreTerm = t == "ignored"
			out = append(out, h)
		}
	}
	return out
}

// script is the hog's allocation past rampFrom below the crossing.
func (h hogRamp) script(alloc, past int64) string {
	s := fmt.Sprintf("alloc %d; ramp %d %d; hold", alloc, past, h.Rate)
	if h.Threads > 0 {
		s = fmt.Sprintf("alloc %d; threads %d; alloc %d; hold", alloc, h.Threads, past)
	}
	if h.IgnoreTerm {
		s = "ignore-term; " + s
	}
	return s
}

// benchEnv is one benchmark's node and what the trials need of it.
type benchEnv struct {
	c         *node.Cluster
	col       *collect.Collector
	memRoot   string
	threshold int64
	ns        string
	kmsg      *kmsg
	out       string
	// evictdLog is the log file of the evictd installed now ("" for the
	// kubelet's rows): its decision log says when each stop took hold.
	evictdLog string
}

// BenchmarkNode measures evictd beside the real kubelet against the kubelet
// alone (docs/benchmarks-node.md). What it measures depends on how the node
// was brought up (bench/node.sh runs it twice): with the kubelet's default
// polling, the kubelet alone and then evictd installed from
// deploy/kubernetes/ (latency, OOM kills, synchronize cost with 110 pods);
// with kernelMemcgNotification, the kubelet alone (latency, OOM kills).
// Run it with -benchtime 1x: each sub-benchmark is one set of trials.
func BenchmarkNode(b *testing.B) {
	c := node.Get(b)
	env, err := readNodeEnv(c.Dir)
	if err != nil {
		b.Fatal(err)
	}
	col, err := collect.New(collect.Config{KubeletRoot: c.KubeletRoot, PodLogsRoot: c.PodLogs})
	if err != nil {
		b.Fatal(err)
	}
	memRoot, version := col.MemoryRoot()
	k, err := openKmsg()
	if err != nil {
		b.Fatal(err)
	}
	defer k.close()
	threshold := resource.MustParse(c.Threshold)
	e := &benchEnv{c: c, col: col, memRoot: memRoot, threshold: threshold.Value(), kmsg: k, out: os.Getenv(envBenchOut)}
	e.ns = c.Namespace(b, "bench")
	trials, oomTrials := envInt(b, envBenchTrials, 30), envInt(b, envBenchOOMTrials, 10)
	window := 120 * time.Second
	if v := os.Getenv(envBenchWindow); v != "" {
		if window, err = time.ParseDuration(v); err != nil {
			b.Fatalf("%s=%q: %v", envBenchWindow, v, err)
		}
	}
	if env["EVICTD_NODE_KERNEL_MEMCG_NOTIFICATION"] == "true" {
		b.Run("kubelet-memcg", func(b *testing.B) {
			e.kubeletAlone(b, "kubelet-memcg", "kubelet alone, kernelMemcgNotification", trials, oomTrials)
		})
		return
	}
	b.Run("kubelet-polling", func(b *testing.B) {
		e.kubeletAlone(b, "kubelet-polling", "kubelet alone, 10 s polling", trials, oomTrials)
	})
	if version == 2 {
		b.Run("wakeups", func(b *testing.B) { e.wakeupRows(b, envInt(b, envBenchWakeupTrials, 10)) })
	}
	b.Run("evictd", func(b *testing.B) {
		saveLog := e.keepLog(b, "evictd", installEvictd(b, c))
		const key, name = "evictd", "evictd (DaemonSet) + kubelet, 10 s polling"
		b.Run("latency", func(b *testing.B) { e.latencyRow(b, key, name, trials) })
		b.Run("oom", func(b *testing.B) { e.oomRows(b, key, name, oomTrials) })
		b.Run("sync", func(b *testing.B) {
			if version == 2 {
				b.Skip("the synchronize row at many pods runs on the v1 node only: 110 pods under emulation take longer to start than the whole v2 benchmark")
			}
			pods := envInt(b, envBenchSyncPods, syncPods)
			if n, _ := strconv.Atoi(env["EVICTD_NODE_MAX_PODS"]); n < pods {
				b.Fatalf("the node's maxPods is %s; the synchronize row needs %d (EVICTD_NODE_MAX_PODS=%d)", env["EVICTD_NODE_MAX_PODS"], pods, pods)
			}
			e.syncRow(b, window, pods, func() {
				saveLog() // the new rollout deletes the first pod's log
				installEvictd(b, c, keepPages)
			})
		})
		b.Run("nostop", func(b *testing.B) {
			// The same DaemonSet with its growth stop off, on the same
			// node: what the stop adds. installEvictd waits for the
			// rollout to run the new args. Last: its cleanup removes
			// the DaemonSet, which the rows before it read (the sync
			// row's metrics were refused when it came after).
			saveLog() // the new rollout deletes the first pod's log
			e.keepLog(b, "evictd-nostop", installEvictd(b, c, "--stop-growth=false"))
			e.oomRows(b, "evictd-nostop", "evictd, --stop-growth=false", oomTrials)
		})
	})
}

// keepLog copies evictd's pod log (its decision log and log lines: which
// wake-up each stop answered, how long after it the stop took hold) beside
// the rows: a trial's figures alone cannot say why it was slow. The copy is
// made by the function it returns, before a new rollout deletes the pod's
// log, or when b ends.
func (e *benchEnv) keepLog(b *testing.B, key, logFile string) (save func()) {
	e.evictdLog = logFile
	var once sync.Once
	save = func() {
		once.Do(func() {
			if e.out == "" || logFile == "" {
				return
			}
			data, err := os.ReadFile(logFile)
			if err == nil {
				err = os.WriteFile(strings.TrimSuffix(e.out, ".jsonl")+fmt.Sprintf("-%s-%dMi.log", key, e.threshold>>20), data, 0o644)
			}
			if err != nil {
				b.Logf("keeping evictd's log: %v", err)
			}
		})
	}
	b.Cleanup(save)
	return save
}

// wakeupRows: on cgroup v2, evictd as the DaemonSet ships it (no
// CAP_SYS_RESOURCE: PSI triggers with 2 s windows) with one of its v2
// wake-ups alone, the others off: what each delivers before the kubelet's
// 10 s poll (which still runs beside it).
func (e *benchEnv) wakeupRows(b *testing.B, trials int) {
	for _, w := range []struct {
		key, name string
		args      []string
	}{
		{"evictd-fastpoll", "evictd, fast poll alone", []string{"--psi=off", "--memory-events=off"}},
		{"evictd-psi", "evictd, PSI trigger alone (150 ms in 2 s)", []string{"--fast-poll=off", "--memory-events=off"}},
		{"evictd-events", "evictd, memory.events alone", []string{"--fast-poll=off", "--psi=off"}},
	} {
		b.Run(w.key, func(b *testing.B) {
			installEvictd(b, e.c, w.args...)
			e.latencyRow(b, w.key, w.name, trials)
		})
	}
}

func (e *benchEnv) kubeletAlone(b *testing.B, key, name string, trials, oomTrials int) {
	b.Run("latency", func(b *testing.B) { e.latencyRow(b, key, name, trials) })
	b.Run("oom", func(b *testing.B) { e.oomRows(b, key, name, oomTrials) })
}

func (e *benchEnv) newRow(kind, key, name string) nodebench.Row {
	return nodebench.Row{Kind: kind, Key: key, Name: name, Threshold: e.threshold, Headroom: e.threshold, Start: time.Now(), Load: [2]string{loadavg(), ""}}
}

func (e *benchEnv) finish(b *testing.B, r nodebench.Row) {
	r.End, r.Load[1] = time.Now(), loadavg()
	nodebench.Print(os.Stdout, []nodebench.Row{r})
	if e.out != "" {
		if err := nodebench.Append(e.out, r); err != nil {
			b.Fatal(err)
		}
	}
}

func (e *benchEnv) latencyRow(b *testing.B, key, name string, trials int) {
	r := e.newRow(nodebench.KindLatency, key, name)
	for i := range trials {
		res := e.trial(b, fmt.Sprintf("lat-%d", i), latencyOver, hogRamp{Rate: latencyRate}, false)
		t := nodebench.LatencyTrial{EvictedBy: res.by, OOMKills: res.oomKills, Err: res.err}
		if res.err == "" {
			t.Accepted, t.Empty = res.accepted.Sub(res.crossed), res.empty.Sub(res.crossed)
		}
		b.Logf("%s trial %d: accepted %v, empty %v, by %s, OOM kills %d %s", key, i, t.Accepted, t.Empty, t.EvictedBy, t.OOMKills, t.Err)
		r.Latency = append(r.Latency, t)
	}
	e.finish(b, r)
}

func (e *benchEnv) oomRows(b *testing.B, key, name string, trials int) {
	for _, ramp := range oomRamps(b) {
		r := e.newRow(nodebench.KindOOM, key, name)
		r.Rate, r.Threads, r.IgnoreTerm = ramp.Rate, ramp.Threads, ramp.IgnoreTerm
		for i := range trials {
			podName := fmt.Sprintf("oom-%d-%d-%t-%d", ramp.Rate>>20, ramp.Threads, ramp.IgnoreTerm, i)
			res := e.trial(b, podName, e.threshold+oomOver, ramp, true)
			t := nodebench.OOMTrial{OOMKills: res.oomKills, Evicted: res.by != "", EvictedBy: res.by, Rate: res.rate, Err: res.err}
			if !res.crossed.IsZero() {
				t.Crossed = res.crossed
				if at := e.waitStopInForce(b, podName, res.by); !at.IsZero() {
					t.InForce = at.Sub(res.crossed)
				}
				if !res.stopped.IsZero() {
					t.Stopped = max(1, res.stopped.Sub(res.crossed))
				}
				if !res.empty.IsZero() {
					t.Empty = res.empty.Sub(res.crossed)
				}
			}
			b.Logf("%s %s trial %d: OOM kills %d, evicted by %q, growth stopped %v, empty %v, seen ramp %.0f MiB/s %s",
				key, r.RampName(), i, t.OOMKills, t.EvictedBy, t.Stopped, t.Empty, t.Rate/(1<<20), t.Err)
			r.OOM = append(r.OOM, t)
		}
		e.finish(b, r)
	}
}

// waitStopInForce is stopInForce on the installed evictd's log, waiting up
// to recordWait for the record of an eviction by evictd (written once the
// eviction has finished, which may be after the trial's end).
func (e *benchEnv) waitStopInForce(b *testing.B, pod, by string) time.Time {
	deadline := time.Now().Add(recordWait)
	for {
		at := stopInForce(b, e.evictdLog, pod)
		if !at.IsZero() || by != "evictd" || e.evictdLog == "" || time.Now().After(deadline) {
			return at
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recordWait bounds waitStopInForce: evictd writes an eviction's record
// when the pod is gone, 2.3-2.5 s after the crossing at the OOM rows' 1 s
// grace, so within a few seconds of a trial's end.
const recordWait = 10 * time.Second

// stopInForce is when evictd's growth stop of pod took hold, from the
// decision log that evictd writes to its stdout, in its pod's log at
// logFile (the runtime's "<time> stdout F <line>" lines): the record of
// the eviction that held it. Zero when there is none (no evictd, no stop).
func stopInForce(b *testing.B, logFile, pod string) time.Time {
	if logFile == "" {
		return time.Time{}
	}
	f, err := os.Open(logFile)
	if err != nil {
		b.Logf("evictd's log: %v", err)
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		_, line, ok := strings.Cut(sc.Text(), " stdout F ")
		if !ok || !strings.Contains(line, `"`+pod+`"`) {
			continue
		}
		var rec agent.Record
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		for _, a := range rec.Actions {
			if a.Kind == "evict" && a.Pod.Name == pod && a.Stop != nil && !a.Stop.At.IsZero() {
				return a.Stop.At
			}
		}
	}
	return time.Time{}
}

// trialResult is one hog's story, by the harness's clocks.
type trialResult struct {
	crossed, accepted, empty, ended time.Time
	stopped                         time.Time // growth stopped (OOM trials)
	by                              string
	oomKills                        int
	rate                            float64
	err                             string
}

// trial runs one hog pod that allocates to rampFrom below the crossing,
// then ramps past it by over at rate (and holds), and times the crossing,
// the eviction's acceptance in the API and the pod's cgroup emptying; oom
// trials end once the hog ended (evicted or OOM-killed) instead of waiting
// for the whole pod. The pod is deleted and gone from the node before it
// returns.
func (e *benchEnv) trial(b *testing.B, name string, over int64, ramp hogRamp, oom bool) (res trialResult) {
	b.Helper()
	// A start uniformly random over the kubelet's period, so that its
	// synchronize meets the crossing at any phase. Without it the phase is
	// locked: after an eviction the kubelet waits for the pod's cleanup
	// (the previous trial's removePod), synchronizes at once and then
	// every 10 s, so every trial crossed at about the same point of its
	// period (30 trials of the kubelet alone gave 8.1–9.1 s).
	time.Sleep(rand.N(kubeletPeriod))
	if n, _ := e.kmsg.oomKills(e.col.PodsCgroup()); n > 0 {
		b.Logf("%d OOM kill(s) in the pods cgroup between trials", n)
	}
	m, err := e.col.ReadCgroupMemory(e.col.PodsCgroup(), true)
	if err != nil || !m.HasLimit {
		b.Fatalf("pods cgroup memory: %+v, %v", m, err)
	}
	crossWS := int64(m.Limit) - e.threshold // available < threshold ⇔ working set > this
	alloc := crossWS - int64(m.WorkingSet) - rampFrom
	if alloc < 16<<20 {
		b.Fatalf("the pods cgroup holds %d MiB of its %d MiB already: no room for a trial", m.WorkingSet>>20, m.Limit>>20)
	}
	script := ramp.script(alloc, rampFrom+over)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	smp := startSampler(ctx, e.col, crossWS)

	p := node.HogPod(name, script, "64Mi", "")
	// Bound to the node directly and tolerating its taints: a node under
	// MemoryPressure (the previous trial's) is tainted for the scheduler;
	// the kubelet admits a Burstable pod under it.
	p.Spec.NodeName = e.c.Node
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	created, err := e.c.Client.CoreV1().Pods(e.ns).Create(node.Ctx(b), p, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("creating pod %s: %v", name, err)
	}
	defer e.removePod(b, created)
	podDir := e.memRoot + podCgroup(e.c, "burstable", string(created.UID))
	smp.follow(podDir)
	w := watchPod(ctx, e.c, e.ns, name, created.ResourceVersion)

	deadline := time.Now().Add(trialTimeout)
	tick := time.NewTicker(emptyEvery)
	defer tick.Stop()
	for ; ; <-tick.C {
		now := time.Now()
		crossed := smp.crossedAt()
		ws := w.state()
		if ws.err != nil {
			res.err = ws.err.Error()
			break
		}
		if !crossed.IsZero() && res.empty.IsZero() && cgroupEmpty(podDir) {
			res.empty = now
		}
		res.crossed, res.accepted, res.by, res.ended = crossed, ws.accepted, ws.by, ws.ended
		if oom {
			end := res.ended
			if end.IsZero() || (!res.empty.IsZero() && res.empty.Before(end)) {
				end = res.empty
			}
			if !end.IsZero() && now.Sub(end) >= settle {
				if crossed.IsZero() {
					res.err = "the hog ended before the sampler saw the crossing"
				}
				break
			}
		} else if !crossed.IsZero() && !res.accepted.IsZero() && !res.empty.IsZero() {
			break
		} else if res.accepted.IsZero() && !res.ended.IsZero() && now.Sub(res.ended) >= settle {
			res.err = "the hog ended without an eviction"
			break
		}
		if now.After(deadline) {
			res.err = fmt.Sprintf("not done after %s: crossed %v, accepted %v, empty %v, hog ended %v", trialTimeout,
				!crossed.IsZero(), !res.accepted.IsZero(), !res.empty.IsZero(), !res.ended.IsZero())
			break
		}
	}
	if !oom && res.err == "" && res.crossed.IsZero() {
		res.err = "evicted, but the sampler never saw the crossing"
	}
	res.rate = smp.rate()
	cancel() // the sampler stops: its samples are complete
	res.stopped = smp.stoppedAt()
	if smp.err != nil { // read after stoppedAt: the sampler has ended
		b.Fatal(smp.err)
	}
	if oom && os.Getenv(envBenchTrace) == "1" {
		b.Logf("%s: usage after the crossing (µs since it: KiB above the first sample): %s", name, smp.trace(res.crossed, res.stopped.Add(2*time.Millisecond)))
	}
	res.oomKills, err = e.kmsg.oomKills(e.col.PodsCgroup())
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// removePod deletes the pod at once and waits until it is gone from the
// API and its cgroup from the node, and the pods cgroup's working set is
// back, so that the next trial starts from the same point.
func (e *benchEnv) removePod(b *testing.B, p *corev1.Pod) {
	zero := int64(0)
	err := e.c.Client.CoreV1().Pods(p.Namespace).Delete(node.Ctx(b), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		b.Fatalf("deleting pod %s: %v", p.Name, err)
	}
	podDir := e.memRoot + podCgroup(e.c, "burstable", string(p.UID))
	e.c.WaitFor(b, 90*time.Second, "pod "+p.Name+" gone", func(ctx context.Context) (bool, error) {
		_, err := e.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		_, err = os.Stat(podDir)
		return errors.Is(err, fs.ErrNotExist), nil
	})
}

// sampler reads the kubepods cgroup every sampleEvery and records the first
// sample past the crossing, the ramp's speed just before it, and the samples
// after it (to tell when growth stopped), until ctx ends.
type sampler struct {
	mu      sync.Mutex
	crossed time.Time
	r       float64
	after   []usageAt
	podDir  string // the victim's cgroup, whose usage is read after the crossing ("": kubepods')
	err     error  // why the sampler could not run
	done    chan struct{}
}

// follow has the samples after the crossing read the victim's cgroup at
// dir: its usage is what the growth stop holds, and other pods' (evictd's
// own heap among them) move kubepods' by more than stopSlack.
func (s *sampler) follow(dir string) {
	s.mu.Lock()
	s.podDir = dir
	s.mu.Unlock()
}

type usageAt struct {
	at time.Time
	ws int64
}

// maxAfter bounds the samples kept after the crossing (a minute at
// sampleEvery).
const maxAfter = 240000

func startSampler(ctx context.Context, col *collect.Collector, crossWS int64) *sampler {
	s := &sampler{done: make(chan struct{})}
	memRoot, version := col.MemoryRoot()
	podsDir := memRoot + col.PodsCgroup()
	// The usage after the crossing: one small read, the file of the node's
	// cgroup version (the v1 file alone left v2's growth-stopped column
	// empty).
	readUsage := cgroupv1.ReadMemoryUsageInBytes
	if version == 2 {
		readUsage = cgroupv2.ReadMemoryCurrent
	}
	go func() {
		defer close(s.done)
		// Its own OS thread at real-time priority, sleeping in the kernel:
		// an ordinary goroutine's timer fired 1.1–1.4 ms late beside a
		// two-thread hog (the kubepods cgroup outweighs the harness's), so
		// every growth stop read as at least that long after the crossing
		// (EVICTD_BENCH_NODE_TRACE=1 showed the first sample after it at
		// 1.1 ms, already flat). The thread exits with the goroutine.
		runtime.LockOSThread()
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: samplerPriority}, 0); err != nil {
			s.mu.Lock()
			s.err = fmt.Errorf("sampler at SCHED_FIFO %d: %w", samplerPriority, err)
			s.mu.Unlock()
			return
		}
		every := sampleEvery
		var fromT time.Time
		var fromWS int64
		for ctx.Err() == nil {
			ts := unix.NsecToTimespec(every.Nanoseconds())
			unix.Nanosleep(&ts, nil)
			t := time.Now()
			s.mu.Lock()
			crossed, dir := !s.crossed.IsZero(), s.podDir
			s.mu.Unlock()
			if dir == "" {
				dir = podsDir
			}
			if crossed {
				u, err := readUsage(dir)
				s.mu.Lock()
				if err == nil && len(s.after) < maxAfter {
					s.after = append(s.after, usageAt{t, int64(u)})
				}
				s.mu.Unlock()
				continue
			}
			m, err := col.ReadCgroupMemory(col.PodsCgroup(), false)
			if err != nil {
				continue
			}
			ws := int64(m.WorkingSet)
			if ws < crossWS-rateWindow {
				fromT = time.Time{}
			} else if fromT.IsZero() {
				fromT, fromWS = t, ws
			}
			if ws > crossWS {
				s.mu.Lock()
				s.crossed = t
				if !fromT.IsZero() && t.Sub(fromT) > 4*sampleEvery {
					s.r = float64(ws-fromWS) / t.Sub(fromT).Seconds()
				}
				s.mu.Unlock()
				every = afterEvery
			}
		}
	}()
	return s
}

// trace is the samples after the crossing up to until, as "µs:KiB" pairs
// (time since the crossing, usage above the first sample): how the usage
// rose before growth stopped, for EVICTD_BENCH_NODE_TRACE=1.
func (s *sampler) trace(crossed, until time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, u := range s.after {
		if u.at.After(until) {
			break
		}
		fmt.Fprintf(&b, " %d:%d", u.at.Sub(crossed).Microseconds(), (u.ws-s.after[0].ws)>>10)
	}
	return b.String()
}

func (s *sampler) crossedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crossed
}

func (s *sampler) rate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r
}

// stoppedAt is when growth stopped: the first sample after the crossing
// within stopSlack of the peak usage after it (zero before the crossing;
// the usage, not the working set, after it: one small read).
// Call it once the sampler's context is done.
func (s *sampler) stoppedAt() time.Time {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	var peak int64
	for _, u := range s.after {
		peak = max(peak, u.ws)
	}
	for _, u := range s.after {
		if u.ws >= peak-stopSlack {
			return u.at
		}
	}
	return time.Time{}
}

// podWatch follows one pod: when an eviction was first seen accepted (a
// deletion timestamp: the Eviction API; status Failed/Evicted: the
// kubelet's own), and when its first container terminated.
type podWatch struct {
	mu       sync.Mutex
	accepted time.Time
	by       string
	ended    time.Time
	err      error
}

func watchPod(ctx context.Context, c *node.Cluster, ns, name, rv string) *podWatch {
	w := &podWatch{}
	go func() {
		for ctx.Err() == nil {
			wi, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv})
			if err != nil {
				if ctx.Err() == nil {
					time.Sleep(50 * time.Millisecond)
				}
				continue
			}
			for ev := range wi.ResultChan() {
				now := time.Now()
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Error {
					continue
				}
				rv = p.ResourceVersion
				w.mu.Lock()
				if w.accepted.IsZero() {
					switch {
					case p.DeletionTimestamp != nil:
						w.accepted, w.by = now, nodebench.ByEvictd
					case p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted":
						w.accepted, w.by = now, nodebench.ByKubelet
					}
				}
				if w.ended.IsZero() && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil {
					w.ended = now
				}
				if p.Status.Phase == corev1.PodFailed && w.accepted.IsZero() && p.Status.Reason != "" && p.Status.Reason != "Evicted" {
					w.err = fmt.Errorf("pod %s failed: %s %s", name, p.Status.Reason, p.Status.Message)
				}
				w.mu.Unlock()
			}
			wi.Stop()
		}
	}()
	return w
}

func (w *podWatch) state() podWatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return podWatch{accepted: w.accepted, by: w.by, ended: w.ended, err: w.err}
}

// cgroupEmpty: no process in the pod's cgroup tree (or the tree is gone).
func cgroupEmpty(dir string) bool {
	empty := true
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			empty = false
			return fs.SkipAll
		}
		return nil
	})
	return empty
}

// kmsg reads the kernel log from where it was opened on.
type kmsg struct{ fd int }

func openKmsg() (*kmsg, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("/dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, unix.SEEK_END); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("/dev/kmsg: %w", err)
	}
	return &kmsg{fd: fd}, nil
}

func (k *kmsg) close() { unix.Close(k.fd) }

// oomKills counts the kernel's OOM kills charged to the pods cgroup
// (oom_memcg under podsCgroup: its limit or a pod's) since the last call.
func (k *kmsg) oomKills(podsCgroup string) (int, error) {
	buf := make([]byte, 8192)
	n := 0
	for {
		l, err := unix.Read(k.fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return n, nil
		case errors.Is(err, unix.EPIPE): // records overwritten before we read them
			continue
		case err != nil:
			return n, fmt.Errorf("/dev/kmsg: %w", err)
		}
		_, msg, _ := strings.Cut(string(buf[:l]), ";")
		if strings.HasPrefix(msg, "oom-kill:") && strings.Contains(msg, ",oom_memcg="+podsCgroup) {
			n++
		}
	}
}

// syncRow reads evictd's metrics over a window with only its own pod on
// the node, then over a window with the node full: syncPods pods.
//
// Then, the same pods still running, reinstall (evictd with
// keepPages) and a last window: the RSS its start-up pages add, side by
// side.
func (e *benchEnv) syncRow(b *testing.B, window time.Duration, syncPods int, reinstall func()) {
	r := e.newRow(nodebench.KindSync, "evictd", "evictd (DaemonSet)")
	e.waitNoMemoryPressure(b)
	r.Sync = append(r.Sync, e.syncWindow(b, window))
	sleepers := syncPods - e.podsOnNode(b)
	b.Logf("starting %d sleepers", sleepers)
	start := time.Now()
	defer e.removeAll(b)
	var wg sync.WaitGroup
	errs := make(chan error, sleepers)
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				_, err := e.c.Client.CoreV1().Pods(e.ns).Create(context.Background(), sleeperPod(fmt.Sprintf("sleep-%03d", i), e.c.Node), metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range sleepers {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("creating sleepers: %v", err)
	}
	e.c.WaitFor(b, 15*time.Minute, fmt.Sprintf("%d sleepers running", sleepers), func(ctx context.Context) (bool, error) {
		l, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range l.Items {
			switch p.Status.Phase {
			case corev1.PodRunning:
				running++
			case corev1.PodFailed:
				return false, fmt.Errorf("sleeper %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message)
			}
		}
		return running == sleepers, nil
	})
	b.Logf("%d sleepers running after %s", sleepers, time.Since(start).Round(time.Second))
	if n := e.podsOnNode(b); n != syncPods {
		b.Fatalf("%d pods on the node, want %d", n, syncPods)
	}
	time.Sleep(30 * time.Second) // the pods' start-up over: evictd's informer and the kubelet settle
	r.Sync = append(r.Sync, e.syncWindow(b, window))
	reinstall()
	time.Sleep(30 * time.Second) // as above: its informer's first list, its first synchronizes
	s := e.syncWindow(b, window)
	s.Args = keepPages
	r.Sync = append(r.Sync, s)
	e.finish(b, r)
}

// keepPages is evictd's flag that keeps its binary's start-up pages mapped
// (released by default after the first synchronize).
const keepPages = "--release-startup-pages=false"

func sleeperPod(name, nodeName string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "sleeper"}},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "sleep",
				Image:           node.WorkImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/sleep", "86400"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("4Mi"), corev1.ResourceCPU: resource.MustParse("1m")}},
			}},
		},
	}
}

// podsOnNode counts the node's pods that are not terminal.
func (e *benchEnv) podsOnNode(b *testing.B) int {
	l, err := e.c.Client.CoreV1().Pods("").List(node.Ctx(b), metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.c.Node})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, p := range l.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

// removeAll deletes the benchmark namespace's pods and waits (longer than
// the namespace's own cleanup does) until the node has none of them.
func (e *benchEnv) removeAll(b *testing.B) {
	l, err := e.c.Client.CoreV1().Pods(e.ns).List(node.Ctx(b), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	zero := int64(0)
	if err := e.c.Client.CoreV1().Pods(e.ns).DeleteCollection(node.Ctx(b), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		b.Errorf("deleting the sleepers: %v", err)
	}
	e.c.WaitFor(b, 10*time.Minute, "the sleepers gone", func(ctx context.Context) (bool, error) {
		left, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(left.Items) > 0 {
			return false, err
		}
		for _, p := range l.Items {
			if _, err := os.Stat(e.memRoot + podCgroup(e.c, "burstable", string(p.UID))); err == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

func (e *benchEnv) waitNoMemoryPressure(b *testing.B) {
	e.c.WaitFor(b, 2*time.Minute, "no MemoryPressure on the node", func(ctx context.Context) (bool, error) {
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, e.c.Node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeMemoryPressure {
				return cond.Status != corev1.ConditionTrue, nil
			}
		}
		return true, nil
	})
}

// hostRounds: synchronizes the host benchmark's figure is the mean of.
const hostRounds = 50

// hostSynchronize is the host benchmark's figure on this node now: the work
// internal/kube's BenchmarkKubeSynchronize measures (kube.Stats.SummaryOf
// from the pod cgroups under kubepods, named from the pods, and the
// engine's Step on it, with the node kubelet's own thresholds as the
// DaemonSet's, no disk source),
// on this node's real pods as the API lists them (the informer's view),
// done rounds times in the benchmark's own process: the same synchronize
// outside evictd's pod, in the same run, to put beside the DaemonSet's.
func (e *benchEnv) hostSynchronize(b *testing.B, rounds int) (time.Duration, int) {
	l, err := e.c.Client.CoreV1().Pods("").List(node.Ctx(b), metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.c.Node})
	if err != nil {
		b.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range l.Items {
		if kube.Active(&l.Items[i]) {
			pods = append(pods, &l.Items[i])
		}
	}
	// The node's own kubelet configuration, as the DaemonSet reads it.
	kc, err := kubeletconfig.Read(kubeletconfig.Source{File: filepath.Join(e.c.Dir, "kubelet.yaml")})
	if err != nil {
		b.Fatal(err)
	}
	pc, err := policy.ConfigFromKubelet(kc.Kubelet)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := policy.NewEngine(pc, policy.Filesystems{})
	if err != nil {
		b.Fatal(err)
	}
	st := &kube.Stats{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := st.NewCollector(collect.Config{KubeletRoot: e.c.KubeletRoot, PodLogsRoot: e.c.PodLogs}); err != nil {
		b.Fatal(err)
	}
	ctx, now := context.Background(), time.Now()
	start := now
	for range rounds {
		sum, err := st.SummaryOf(ctx, pods)
		if err != nil {
			b.Fatal(err)
		}
		now = now.Add(time.Second)
		eng.Step(now, policy.Input{Summary: sum, Pods: pods})
	}
	return time.Since(start) / time.Duration(rounds), rounds
}

// syncWindow scrapes evictd's metrics at the start and the end of window.
func (e *benchEnv) syncWindow(b *testing.B, window time.Duration) nodebench.SyncWindow {
	pods := e.podsOnNode(b)
	m0 := scrapeEvictd(b)
	time.Sleep(window)
	m1 := scrapeEvictd(b)
	h0, h1 := m0["evictd_synchronize_duration_seconds"], m1["evictd_synchronize_duration_seconds"]
	if h0 == nil || h1 == nil || len(h1.Metric) != 1 || len(h0.Metric) != 1 {
		b.Fatal("evictd's metrics lack evictd_synchronize_duration_seconds")
	}
	s := nodebench.SyncWindow{Pods: pods, Window: window, RSS: gauge(m1, "process_resident_memory_bytes"), Heap: gauge(m1, "go_memstats_heap_inuse_bytes")}
	a, z := h0.Metric[0].GetHistogram(), h1.Metric[0].GetHistogram()
	s.Count = z.GetSampleCount() - a.GetSampleCount()
	s.Sum = time.Duration((z.GetSampleSum() - a.GetSampleSum()) * float64(time.Second))
	s.P50, s.P99 = histogramQuantile(0.5, a, z), histogramQuantile(0.99, a, z)
	s.CPU = time.Duration((counter(m1, "process_cpu_seconds_total") - counter(m0, "process_cpu_seconds_total")) * float64(time.Second))
	s.Host, s.HostRounds = e.hostSynchronize(b, hostRounds)
	b.Logf("%d pods: %d synchronizes in %s, %s in all, RSS %.1f MiB; the host benchmark's figure %s (%d rounds)", pods, s.Count, window, s.Sum, s.RSS/(1<<20), s.Host, s.HostRounds)
	return s
}

func scrapeEvictd(b *testing.B) map[string]*dto.MetricFamily {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+agent.DefaultMetricsAddr+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("evictd's metrics: %v", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	m, err := p.TextToMetricFamilies(bufio.NewReader(resp.Body))
	if err != nil {
		b.Fatalf("evictd's metrics: %v", err)
	}
	return m
}

func counter(m map[string]*dto.MetricFamily, name string) float64 {
	f := m[name]
	if f == nil || len(f.Metric) == 0 {
		return 0
	}
	return f.Metric[0].GetCounter().GetValue()
}

func gauge(m map[string]*dto.MetricFamily, name string) float64 {
	f := m[name]
	if f == nil || len(f.Metric) == 0 {
		return 0
	}
	return f.Metric[0].GetGauge().GetValue()
}

// histogramQuantile estimates the q-quantile of the observations between
// two scrapes of a histogram, as Prometheus's histogram_quantile: linear
// within the bucket that holds it; the highest finite bound if it is in
// +Inf.
func histogramQuantile(q float64, a, z *dto.Histogram) time.Duration {
	n := float64(z.GetSampleCount() - a.GetSampleCount())
	if n == 0 {
		return 0
	}
	rank := q * n
	lower, prev := 0.0, 0.0
	for i, bz := range z.Bucket {
		cum := float64(bz.GetCumulativeCount() - a.Bucket[i].GetCumulativeCount())
		upper := bz.GetUpperBound()
		if cum >= rank {
			if math.IsInf(upper, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			v := lower + (upper-lower)*(rank-prev)/math.Max(cum-prev, 1)
			return time.Duration(v * float64(time.Second))
		}
		lower, prev = upper, cum
	}
	return time.Duration(lower * float64(time.Second))
}

func readNodeEnv(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
