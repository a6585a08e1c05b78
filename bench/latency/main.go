// Command latency measures evictd's detection latency on the real kernel:
// from the moment a workload's memory crosses a hard threshold to the
// decision, and to the workload being gone, for the kernel wake-up the host
// offers (cgroup v1 memcg eventfd; cgroup v2 fast poll, memory.events and
// PSI), the v2 wake-ups in the test harness's qemu VM (-vm), and a
// kubelet-like 10 s poll, side by side. Run it through bench/latency.sh
// (root, cgroup v1 or v2).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/hostmode/trial"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload/hog"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// The trial: a 512Mi sandbox, a hard threshold at 448Mi available (so it is
// met once the workloads use 64Mi), and a hog ramping 128Mi at 256Mi/s.
const (
	limit     = 512 << 20
	threshold = "448Mi"
	crossAt   = 64 << 20
	hogRamp   = "ramp 128Mi 256Mi; hold"
)

type variant struct {
	name     string
	wakeups  bool // kernel wake-ups on (memcg eventfd on v1; fast poll, memory.events and PSI on v2)
	phase    time.Duration
	parallel int
}

// sample is one trial. Wake is crossing → the wake-up (or tick) that ran
// the deciding synchronize, Sync that wake-up → the decision (the agent's
// own work, which shows how much slower an emulated CPU is).
type sample struct {
	Detect, Gone, Wake, Sync time.Duration
	Source                   string // the deciding synchronize's trigger: "fast-poll", "memory.events", "timer", ...
	Early                    bool   // the wake-up came before the watcher saw the crossing (Wake counted as 0)
}

// row is one variant's result. Under -rows it is printed as one JSON line
// (rowPrefix) for the host side of a -vm run to merge into its table.
type row struct {
	Name    string   `json:"name"`
	Where   string   `json:"where"`
	Load    string   `json:"load"` // load average over the run, "before → after"
	Trials  int      `json:"trials"`
	Failed  int      `json:"failed"`
	Samples []sample `json:"samples"`
	// Probe is the fixed work of probe() where the row ran: host and VM
	// side by side give the emulation's slowdown.
	Probe probeResult `json:"probe"`
}

// probeResult is the best of a few runs of two fixed pieces of work.
type probeResult struct {
	CPU  time.Duration `json:"cpu"`  // sorting 1 Mi integers: plain scalar Go code
	Read time.Duration `json:"read"` // 200 reads of /proc/meminfo: syscalls, like the agent's file reads
}

// probe times fixed work, best of three, so the table can say how much
// slower the emulated guest is than this host, on computation and on the
// kernel file reads a synchronize is made of.
func probe() probeResult {
	// Sorting, not hashing: the host's SHA instructions are emulated
	// one by one and would overstate the slowdown for the agent's code.
	xs := make([]int, 1<<20)
	best := probeResult{CPU: time.Hour, Read: time.Hour}
	for range 3 {
		r := rand.New(rand.NewPCG(1, 2))
		for i := range xs {
			xs[i] = r.Int()
		}
		t0 := time.Now()
		slices.Sort(xs)
		best.CPU = min(best.CPU, time.Since(t0))
		t0 = time.Now()
		for range 200 {
			os.ReadFile("/proc/meminfo")
		}
		best.Read = min(best.Read, time.Since(t0))
	}
	return best
}

// rowPrefix marks a machine-readable result line on the VM's output.
const rowPrefix = "latency-row "

func main() {
	hog.MaybeRun()
	trials := flag.Int("trials", 50, "trials per variant (the issue asks for at least 50)")
	only := flag.String("variants", "wakeup,poll", "comma-separated: wakeup (kernel wake-ups), poll (kubelet-like 10 s timer only)")
	par := flag.Int("poll-parallel", 10, "poll trials run side by side (each waits up to 10 s for its tick)")
	oomMode := flag.Bool("oom", false, "OOM avoidance instead: a hog runs past its 512Mi sandbox's limit; for each cell of -oom-stop × -oom-ramps × -oom-sigterm × -oom-headroom, count the trials with a kernel OOM kill and time the growth stop and the hog's end")
	oomScale := flag.Float64("oom-scale", 1, "scale the OOM trial's limit, headroom, peak and paced rates by this factor (the VM run uses 0.5)")
	oomRamps := flag.String("oom-ramps", "500Mi/s,1 thread,2 threads", `-oom: the hog's ramps, comma-separated: "RATEMi/s" (paced) or "N threads" (touching memory at full speed)`)
	oomTerm := flag.String("oom-sigterm", "obeyed,ignored", "-oom: the hog obeys or ignores SIGTERM")
	oomHeadroom := flag.String("oom-headroom", "256Mi,64Mi", "-oom: the hard threshold's headroom below the sandbox's limit")
	oomStop := flag.String("oom-stop", "on,off", "-oom: evictd's growth stop (--stop-growth) on, ordinary (on, its wake-ups at the ordinary priority: --realtime-wakeups=off), kept (on, its start-up pages kept mapped: --release-startup-pages=false), off")
	vmOOMRamps := flag.String("vm-oom-ramps", "", "-oom -vm: the VM's ramps (default: -oom-ramps)")
	vmOOMTerm := flag.String("vm-oom-sigterm", "", "-oom -vm: the VM's SIGTERM cells (default: -oom-sigterm)")
	vmexec := flag.String("vm", "", "also run the cgroup v2 wake-up variant in the qemu VM through this vmexec wrapper (.cache/vm/vmexec; this binary must be static)")
	vmTrials := flag.Int("vm-trials", 0, "trials in the VM (default: -trials)")
	rows := flag.Bool("rows", false, "print results as JSON lines for a -vm host run to merge (used inside the VM)")
	watchEvery := flag.Duration("watch", 100*time.Microsecond, "how often the crossing watcher reads the sandbox's usage (the VM run uses 1ms: a busier watcher steals the single emulated CPU from the agent)")
	fifo := flag.Bool("watch-fifo", false, "run the watcher on its own thread at SCHED_FIFO priority (the VM run: one emulated CPU)")
	flag.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "latency: needs root (it creates cgroups)")
		os.Exit(2)
	}
	mode, err := sandbox.DetectMode()
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(2)
	}
	exe, _ := os.Executable()
	wakeName := "v1 memcg eventfd"
	if mode == sandbox.V2 {
		wakeName = "v2 fast poll + memory.events + PSI"
	}
	var vs []variant
	for _, v := range strings.Split(*only, ",") {
		switch v {
		case "wakeup":
			vs = append(vs, variant{name: wakeName, wakeups: true, phase: 300 * time.Millisecond, parallel: 1})
		case "poll":
			vs = append(vs, variant{name: "10 s poll (kubelet-like)", parallel: *par})
		case "":
		default:
			fmt.Fprintf(os.Stderr, "latency: unknown variant %q\n", v)
			os.Exit(2)
		}
	}
	if *fifo {
		// Spare Ps, so the watcher's thread gets one back at once when
		// its sleep ends, even while the agent and the fast poll run.
		runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0)))
	}
	tr := trialer{exe: exe, mode: mode, watchEvery: *watchEvery, fifo: *fifo, where: where(mode)}
	vmArgs := func(extra ...string) []string {
		n := *vmTrials
		if n == 0 {
			n = *trials
		}
		return append([]string{exe, "-rows", "-variants", "wakeup", "-trials", strconv.Itoa(n), "-watch", "1ms", "-watch-fifo"}, extra...)
	}
	if *oomMode {
		cells, err := oomCells(*oomRamps, *oomTerm, *oomHeadroom, *oomStop, *oomScale)
		if err != nil {
			fmt.Fprintln(os.Stderr, "latency:", err)
			os.Exit(2)
		}
		out := tr.runOOMMatrix(cells, *trials, *oomScale)
		if *rows {
			emit(out)
			return
		}
		if *vmexec != "" {
			ramps, term := *oomRamps, *oomTerm
			if *vmOOMRamps != "" {
				ramps = *vmOOMRamps
			}
			if *vmOOMTerm != "" {
				term = *vmOOMTerm
			}
			var vmRows []oomResult
			if err := runVM(*vmexec, vmArgs("-oom", "-oom-scale", "0.5", "-oom-ramps", ramps, "-oom-sigterm", term,
				"-oom-headroom", *oomHeadroom, "-oom-stop", *oomStop), &vmRows); err != nil {
				fmt.Fprintln(os.Stderr, "latency: the VM run failed:", err)
			}
			out = append(out, vmRows...)
		}
		printOOMMatrix(out, *trials)
		return
	}
	var out []row
	for _, v := range vs {
		out = append(out, tr.runVariant(v, *trials))
	}
	if *rows {
		emit(out)
		return
	}
	if *vmexec != "" {
		var vmRows []row
		if err := runVM(*vmexec, vmArgs(), &vmRows); err != nil {
			fmt.Fprintln(os.Stderr, "latency: the VM run failed:", err)
		}
		// Beside the host's wake-up row, before the poll.
		at := 0
		if len(vs) > 0 && vs[0].wakeups {
			at = 1
		}
		out = append(out[:at], append(vmRows, out[at:]...)...)
	}
	printLatency(out)
}

const usage = `latency measures evictd's detection latency on the real kernel: a hog in a
512Mi sandbox cgroup ramps across a hard threshold (448Mi available) and the
real agent (hostmode.New) decides and evicts. It prints p50/p99 of
crossing → wake-up, → decision and → workload gone, and which wake-up ran the
deciding synchronize, for the kernel wake-ups this host offers (cgroup v1:
memcg threshold eventfd; v2: fast poll, memory.events, PSI) and a
kubelet-like 10 s poll, with the load average beside each row.

With -vm it also boots a qemu VM with a pure cgroup v2 kernel (the test
harness's vmexec, 1G guest, one emulated vCPU) and runs the v2 wake-up
variant there, printed in the same table. The guest runs under software
emulation (TCG), several times slower than native: its numbers are an upper
bound for a real v2 host.

-oom measures instead whether evictd keeps the kernel OOM killer away from
a hog that runs past its sandbox's limit: for every cell of ramps (a paced
rate, one or two threads at full speed) × SIGTERM obeyed or ignored ×
headroom × evictd's growth stop on and off, the trials with any kernel OOM
kill (the sandbox's counters and the kernel log), crossing → growth stopped
and → the hog gone, and who ended it.

Needs root. Usually run through bench/latency.sh.

Example:
  bench/latency.sh                      # v1 eventfd, v2 in the VM, 10 s poll
  bench/latency.sh -oom -trials 10       # the whole matrix, host and VM
  .cache/bench-latency -oom -trials 3 -oom-ramps "2 threads" -oom-headroom 64Mi
  .cache/bench-latency -trials 5 -variants wakeup

Flags:
`

// where says where the trials ran, for the table.
func where(mode sandbox.Mode) string {
	if os.Getenv("EVICTD_TEST_VM") == "1" {
		mem := ""
		if b, err := os.ReadFile("/proc/meminfo"); err == nil {
			var kb int64
			if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf(", %d MiB", kb>>10)
			}
		}
		return fmt.Sprintf("qemu TCG, %d vCPU%s", runtime.NumCPU(), mem)
	}
	return fmt.Sprintf("this host (%d CPUs)", runtime.NumCPU())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func emit[T any](rows []T) {
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			panic(err) // plain structs of numbers and strings
		}
		fmt.Printf("%s%s\n", rowPrefix, b)
	}
}

// runVM runs this binary in the qemu VM through vmexec and decodes the
// result rows it prints; everything else it prints goes to stderr. The
// load average in the rows becomes the host's over the VM's run: the
// guest's own says nothing about how contended the emulation was.
func runVM[T any](vmexec string, args []string, out *[]T) error {
	cmd := exec.Command(vmexec, args...)
	cmd.Env = os.Environ()
	if os.Getenv("EVICTD_VM_MEM") == "" {
		// 1G: room beside the 512Mi sandbox, so the node's own
		// memory.available (MemTotal − the root's working set) stays
		// above the threshold and only the sandbox crosses it.
		cmd.Env = append(cmd.Env, "EVICTD_VM_MEM=1G")
	}
	if os.Getenv("EVICTD_VM_TIMEOUT") == "" {
		cmd.Env = append(cmd.Env, "EVICTD_VM_TIMEOUT=15m")
	}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "latency: booting the cgroup v2 VM (%s %s)\n", vmexec, strings.Join(args[1:], " "))
	before := loadavg()
	if err := cmd.Start(); err != nil {
		return err
	}
	var got []T
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), rowPrefix)
		if !ok {
			fmt.Fprintln(os.Stderr, "  vm:", sc.Text())
			continue
		}
		var r T
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("bad result line from the VM: %w", err)
		}
		got = append(got, r)
	}
	werr := cmd.Wait()
	load := before + " → " + loadavg() + " (host)"
	for i := range got {
		switch r := any(&got[i]).(type) {
		case *row:
			r.Load = load
		case *oomResult:
			r.Load = load
		}
	}
	*out = got
	if werr != nil {
		return werr
	}
	if len(got) == 0 {
		return fmt.Errorf("no result rows")
	}
	return nil
}

// trialer runs trials on this kernel.
type trialer struct {
	exe        string
	mode       sandbox.Mode
	watchEvery time.Duration
	fifo       bool // watcher at real-time priority (trial.Watch.FIFO)
	where      string
}

// forTrials runs fn for trials 0..n-1, at most v.parallel at a time, and
// returns when all have ended.
func (v variant) forTrials(n int, fn func(i int)) {
	sem := make(chan struct{}, v.parallel)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}(i)
	}
	wg.Wait()
}

// trialPhase is when in the trial the hog starts: the variant's fixed phase
// with kernel wake-ups, and for the polling variant a random phase against
// the 10 s tick, as a real crossing has.
func (v variant) trialPhase() time.Duration {
	if v.wakeups {
		return v.phase
	}
	return 300*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Second)))
}

func (t trialer) runVariant(v variant, trials int) row {
	r := row{Name: v.name, Where: t.where, Trials: trials, Probe: probe()}
	before := loadavg()
	var mu sync.Mutex
	v.forTrials(trials, func(i int) {
		s, oomFirst, err := t.run(v.wakeups, v.trialPhase(), i, limit, threshold, hogRamp, crossAt)
		if err == nil && oomFirst {
			// The ramp stops 384Mi below the limit: an OOM kill here is a
			// broken trial, not a latency.
			err = fmt.Errorf("the kernel OOM killer fired before evictd evicted")
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			r.Failed++
			fmt.Fprintf(os.Stderr, "  %s trial %d: %v\n", v.name, i, err)
			return
		}
		r.Samples = append(r.Samples, s)
	})
	r.Load = before + " → " + loadavg()
	return r
}

func printLatency(rows []row) {
	fmt.Printf("detection latency: threshold crossing → wake-up → decision → workload gone (%s)\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\ttrials\twake p50\tdetect p50\tdetect p99\tgone p50\tgone p99\twake→decision p50\tfailed\tload avg\t")
	for _, r := range rows {
		f := func(get func(sample) time.Duration) []time.Duration { return pick(r.Samples, get) }
		d := f(func(s sample) time.Duration { return s.Detect })
		g := f(func(s sample) time.Duration { return s.Gone })
		w := f(func(s sample) time.Duration { return s.Wake })
		y := f(func(s sample) time.Duration { return s.Sync })
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", r.Name, len(r.Samples), ms(pct(w, 50)), ms(pct(d, 50)), ms(pct(d, 99)),
			ms(pct(g, 50)), ms(pct(g, 99)), ms(pct(y, 50)), r.Failed, r.Load)
	}
	tw.Flush()
	fmt.Println("where each ran, and the wake-up that ran the deciding synchronize:")
	var poll time.Duration
	for _, r := range rows {
		fmt.Printf("  %-36s %s; %s\n", r.Name, r.Where, sources(r.Samples))
		if strings.Contains(r.Name, "poll (") {
			poll = pct(pick(r.Samples, func(s sample) time.Duration { return s.Detect }), 99)
		}
	}
	for _, r := range rows {
		p99 := pct(pick(r.Samples, func(s sample) time.Duration { return s.Detect }), 99)
		if poll > 0 && p99 > 0 && !strings.Contains(r.Name, "poll (") {
			fmt.Printf("detection p99: the 10 s poll is %.0f× slower than %s\n", float64(poll)/float64(p99), r.Name)
		}
	}
	fmt.Println("detect = crossing (seen by a watcher reading usage every 0.1 ms on the host, 1 ms in the VM) → decision;")
	fmt.Println("wake = crossing → the wake-up; gone = crossing → the workload's cgroup is empty (SIGTERM, 1 s hard-eviction grace).")
	var host, vm *row
	for i := range rows {
		if strings.HasPrefix(rows[i].Where, "qemu") {
			vm = &rows[i]
		} else if host == nil && rows[i].Probe.CPU > 0 {
			host = &rows[i]
		}
	}
	if vm == nil {
		return
	}
	fmt.Println("The VM row runs under software emulation (TCG), slower than this host, so its numbers are an upper bound")
	fmt.Println("for a real cgroup v2 host.")
	if host != nil && host.Probe.CPU > 0 && host.Probe.Read > 0 {
		sync := func(r *row) time.Duration {
			return pct(pick(r.Samples, func(s sample) time.Duration { return s.Sync }), 50)
		}
		fmt.Printf("Emulation slowdown, VM ÷ host (best of 3): sorting 1 Mi ints %s ÷ %s = ×%.1f; 200 reads of /proc/meminfo %s ÷ %s = ×%.1f",
			ms(vm.Probe.CPU), ms(host.Probe.CPU), ratio(vm.Probe.CPU, host.Probe.CPU),
			ms(vm.Probe.Read), ms(host.Probe.Read), ratio(vm.Probe.Read, host.Probe.Read))
		if a, b := sync(vm), sync(host); a > 0 && b > 0 {
			fmt.Printf("; a synchronize (wake→decision p50) ×%.0f", ratio(a, b))
		}
		fmt.Println(".")
	}
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(max(1, b)) }

// sources counts the deciding synchronizes' triggers.
func sources(ss []sample) string {
	n := map[string]int{}
	early := 0
	for _, s := range ss {
		n[s.Source]++
		if s.Early {
			early++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return n[keys[i]] > n[keys[j]] || n[keys[i]] == n[keys[j]] && keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	if len(parts) == 0 {
		return "no trials"
	}
	if early > 0 {
		parts = append(parts, fmt.Sprintf("%d woken before the watcher saw the crossing", early))
	}
	return strings.Join(parts, ", ")
}

func pick(ss []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// pct is the nearest-rank percentile.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

func ms(d time.Duration) string {
	if d >= 10*time.Second/10 {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

// run is one trial (internal/hostmode/trial): a sandbox of limitBytes, a
// hard threshold thr, a hog with the script ramp after phase. oomFirst
// reports that the kernel OOM killer fired before any eviction.
func (t trialer) run(wakeups bool, phase time.Duration, i int, limitBytes int64, thr, ramp string, cross int64) (s sample, oomFirst bool, err error) {
	tr, err := trial.New(context.Background(), trial.Options{Name: fmt.Sprintf("/evictd-bench-latency-%d-%d-%d", os.Getpid(), i, rand.IntN(1e9)),
		Limit: limitBytes, Timeout: 30 * time.Second, Exe: t.exe})
	if err != nil {
		return sample{}, false, err
	}
	defer tr.Close()
	c, err := tr.Child("hog")
	if err != nil {
		return sample{}, false, err
	}
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": thr}})
	if err != nil {
		return sample{}, false, err
	}
	tri := agent.Off
	if wakeups {
		tri = agent.On
	}
	psi := agent.Off
	if wakeups && t.mode == sandbox.V2 {
		// v2's third wake-up, on as evictd runs by default. It fires only
		// on stalls (reclaim near the limit), not on a ramp with headroom.
		psi = agent.On
	}
	a, err := tr.NewAgent(trial.AgentOptions{Options: hostmode.Options{Options: agent.Options{Policy: cfg,
		Wakeups: agent.WakeupOptions{MemcgNotification: tri, PSI: psi, MemoryEvents: tri, FastPoll: tri}}},
		Keep: trial.EvictionDecided})
	if err != nil {
		return sample{}, false, err
	}
	a.Start()
	h, err := tr.StartHog(fmt.Sprintf("sleep %s; %s", phase, ramp), c)
	if err != nil {
		return sample{}, false, err
	}
	crossed := tr.Crossing(trial.Watch{Measure: trial.Usage, Every: t.watchEvery, FIFO: t.fifo, FIFOFailed: func(err error) {
		fmt.Fprintln(os.Stderr, "latency: watcher at real-time priority:", err)
	}}, uint64(cross))
	// A hog that died without an OOM kill waits 15 s for the record of
	// evictd's kill, which follows once the cgroup is seen empty; under
	// emulation that took over 2 s twice in 50 trials, hence the generous
	// wait.
	out, err := tr.Wait(crossed, h, 15*time.Second)
	if err != nil {
		return sample{}, false, err
	}
	if out.Kind == trial.OOMKilled {
		return sample{}, true, nil
	}
	r := out.Record
	crossT := out.Crossed
	if out.Early {
		// evictd's kill came before the watcher saw the crossing: counted
		// with the crossing at the wake-up (Early).
		crossT = r.Trigger.At
	}
	src, _, _ := strings.Cut(r.Trigger.Source, " ") // the notifier, without its file
	if r.Trigger.Reason != "wake" {
		src = r.Trigger.Reason
	}
	// The decision is made when the engine's Step is done: the trigger
	// plus the agent's own TriggerToDecision. (Record.Time is earlier:
	// when the Summary was taken. The wake-ups are re-armed after the
	// kill.)
	decided := r.Trigger.At.Add(r.TriggerToDecision)
	s = sample{Detect: decided.Sub(crossT), Wake: r.Trigger.At.Sub(crossT), Sync: r.TriggerToDecision, Source: src}
	for _, a := range r.Actions {
		if a.Result != nil {
			s.Gone = decided.Add(a.Result.Took).Sub(crossT)
		}
	}
	// A wake-up within the watcher's resolution can come first (the fast
	// poll read usage just after the watcher did): counted as 0, and
	// counted (Early) so the table shows it.
	s.Early = s.Wake < 0 || out.Early
	s.Detect, s.Wake = max(0, s.Detect), max(0, s.Wake)
	return s, out.OOM.Kills > 0, nil
}

// q formats whole mebibytes as a quantity ("256Mi", "1Gi").
func q(b int64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return fmt.Sprintf("%dGi", b>>30)
	}
	return fmt.Sprintf("%dMi", b>>20)
}
