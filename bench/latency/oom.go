package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/hostmode/trial"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload/sandbox"
)

// The OOM-avoidance matrix (-oom): a hog runs past the sandbox's limit with
// a hard threshold at <headroom> available, across ramps (a paced rate, and
// one or two threads touching memory at the machine's full speed), SIGTERM
// obeyed or ignored, two headrooms, and evictd with its growth stop on and
// off. Each trial samples the sandbox's working set every -watch to find the
// crossing, when growth stopped and when the workload was gone, and reads
// the kernel log for oom-kill records naming the sandbox.

// oomCell is one cell of the matrix.
type oomCell struct {
	Ramp     string `json:"ramp"` // "500Mi/s", "1 thread", "2 threads"
	Term     bool   `json:"term"` // SIGTERM obeyed (else ignored)
	Headroom int64  `json:"headroom"`
	Stop     bool   `json:"stop"` // evictd's growth stop on
	// Ordinary: the stop on, its wake-ups at the ordinary priority
	// (--realtime-wakeups=off) instead of SCHED_FIFO (auto, the default).
	Ordinary bool `json:"ordinary,omitempty"`
	// KeepPages: the stop on, the agent's start-up pages kept mapped
	// (--release-startup-pages=false) instead of released after its first
	// synchronize (the default, which the trial harness follows).
	KeepPages bool `json:"keepPages,omitempty"`
}

// oomTrial is one trial's outcome. Durations are from the crossing.
type oomTrial struct {
	OOM     bool          `json:"oom"`     // any kernel OOM kill in the sandbox (counters or the kernel log)
	Stopped time.Duration `json:"stopped"` // growth stopped: the usage reached its peak (within stopSlack) for good
	Empty   time.Duration `json:"empty"`   // the workload's cgroup was empty
	By      string        `json:"by"`      // evictd, kernel, itself
	Rate    float64       `json:"rate"`    // bytes/s the hog allocated before the crossing
	Peak    int64         `json:"peak"`    // bytes above the crossing at the peak
	// Wake is crossing → the trigger of the deciding synchronize, Agent
	// that trigger → the stop in force (the agent's own work; 0 without a
	// stop), Source the trigger.
	Wake   time.Duration `json:"wake"`
	Agent  time.Duration `json:"agent"`
	Source string        `json:"source"`
	// Early: the stop was placed on the crossing's wake-up, before the
	// synchronize (agent.GrowthStop.Early); Wake is then that wake-up's.
	Early bool `json:"early"`
	// Untimed: evictd acted on a crossing the sampler never saw (a gap in
	// its reads spanned the whole time the working set was above the
	// threshold: a hog killed on SIGTERM within a few ms of the crossing
	// leaves a short window), so the trial has no times; its OOM kill and
	// who ended it still count. Gap is the sampler's longest gap.
	Untimed bool          `json:"untimed,omitempty"`
	Gap     time.Duration `json:"gap,omitempty"`
}

// oomResult is a cell's trials, as printed (and sent from the VM).
type oomResult struct {
	Cell   oomCell    `json:"cell"`
	Where  string     `json:"where"`
	Load   string     `json:"load"`
	Limit  int64      `json:"limit"`
	Trials []oomTrial `json:"trials"`
	Failed int        `json:"failed"`
}

// stopSlack is how close to its peak the working set counts as stopped:
// what the hold lets through after it is in force. On v1 that is the
// hold's margin (actuate.memoryLimitMargin, 256 KiB above the usage it
// read), which a paced hog uses up at its next slice, plus 16 pages for
// what moves between the usage the hold reads and the working set read
// here (a few inactive file pages activated: with the margin alone, 2 of
// 20 paced trials stopped at the crossing read as stopped at the next
// slice, 9 ms later, one page past it); on v2 the throttle's first
// allowance above memory.high. Not wider: a stop that came late would
// still read as at the crossing.
const stopSlack = 256<<10 + 64<<10

// oomCells is the matrix the flags ask for.
func oomCells(ramps, terms, headrooms, stops string, scale float64) ([]oomCell, error) {
	sc := func(b int64) int64 { return int64(float64(b)*scale) &^ (1<<20 - 1) }
	var cells []oomCell
	for _, st := range strings.Split(stops, ",") {
		for _, r := range strings.Split(ramps, ",") {
			for _, tm := range strings.Split(terms, ",") {
				for _, h := range strings.Split(headrooms, ",") {
					mi, err := strconv.Atoi(strings.TrimSuffix(h, "Mi"))
					if err != nil || mi <= 0 {
						return nil, fmt.Errorf("-oom-headroom %q: want mebibytes, e.g. 256Mi", h)
					}
					c := oomCell{Ramp: r, Term: tm == "obeyed", Headroom: sc(int64(mi) << 20), Stop: st != "off", Ordinary: st == "ordinary", KeepPages: st == "kept"}
					if tm != "obeyed" && tm != "ignored" {
						return nil, fmt.Errorf("-oom-sigterm %q: want obeyed or ignored", tm)
					}
					if st != "on" && st != "off" && st != "ordinary" && st != "kept" {
						return nil, fmt.Errorf("-oom-stop %q: want on, ordinary, kept or off", st)
					}
					if _, err := rampScript(r, 1, scale); err != nil {
						return nil, err
					}
					cells = append(cells, c)
				}
			}
		}
	}
	return cells, nil
}

// rampScript is the hog's allocation for a ramp: "N thread(s)" at full
// speed, or a paced "RATE/s" (scaled).
func rampScript(ramp string, peak int64, scale float64) (string, error) {
	if n, ok := strings.CutSuffix(ramp, " threads"); ok || strings.HasSuffix(ramp, " thread") {
		n = strings.TrimSuffix(n, " thread")
		t, err := strconv.Atoi(n)
		if err != nil || t < 1 {
			return "", fmt.Errorf("-oom-ramps %q: want N threads or RATE/s", ramp)
		}
		return fmt.Sprintf("threads %d; alloc %s", t, q(peak)), nil
	}
	rate, ok := strings.CutSuffix(ramp, "Mi/s")
	mi, err := strconv.Atoi(rate)
	if !ok || err != nil || mi <= 0 {
		return "", fmt.Errorf("-oom-ramps %q: want N threads or RATE/s in Mi/s", ramp)
	}
	return fmt.Sprintf("ramp %s %s", q(peak), q(int64(float64(int64(mi)<<20)*scale)&^(1<<20-1))), nil
}

func (t trialer) runOOMMatrix(cells []oomCell, trials int, scale float64) []oomResult {
	limitB := int64(float64(512<<20)*scale) &^ (1<<20 - 1)
	var out []oomResult
	for _, c := range cells {
		r := oomResult{Cell: c, Where: t.where, Limit: limitB}
		before := loadavg()
		for i := range trials {
			tr, err := t.oomTrial(c, i, limitB, scale)
			if err != nil {
				r.Failed++
				fmt.Fprintf(os.Stderr, "  %s trial %d: %v\n", c.name(), i, err)
				continue
			}
			r.Trials = append(r.Trials, tr)
		}
		r.Load = before + " → " + loadavg()
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "latency: %s: %d trials, %d with a kernel OOM kill\n", c.name(), len(r.Trials), r.oomTrials())
	}
	return out
}

func (c oomCell) name() string {
	term := "SIGTERM ignored"
	if c.Term {
		term = "SIGTERM obeyed"
	}
	return fmt.Sprintf("%s, %s, %s, %s headroom", c.variant(), c.Ramp, term, q(c.Headroom))
}

func (c oomCell) variant() string {
	if c.Ordinary {
		return "evictd, ordinary priority"
	}
	if c.KeepPages {
		return "evictd, start-up pages kept"
	}
	if c.Stop {
		return "evictd"
	}
	return "evictd, stop off"
}

func (r oomResult) oomTrials() int {
	n := 0
	for _, t := range r.Trials {
		if t.OOM {
			n++
		}
	}
	return n
}

func (t trialer) oomTrial(c oomCell, i int, limitB int64, scale float64) (oomTrial, error) {
	tr, err := trial.New(context.Background(), trial.Options{Name: fmt.Sprintf("/evictd-bench-oom-%d-%d-%d", os.Getpid(), i, rand.IntN(1e9)),
		Limit: limitB, Timeout: 60 * time.Second, Exe: t.exe})
	if err != nil {
		return oomTrial{}, err
	}
	defer tr.Close()
	ch, err := tr.Child("hog")
	if err != nil {
		return oomTrial{}, err
	}
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": q(c.Headroom)}})
	if err != nil {
		return oomTrial{}, err
	}
	psi, rt := agent.Off, agent.Auto // real-time wake-ups as evictd runs by default
	if c.Ordinary {
		rt = agent.Off
	}
	if t.mode == sandbox.V2 {
		psi = agent.On // as evictd runs by default on v2
	}
	var observed func() // nil: the harness releases the start-up pages, as evictd run does
	if c.KeepPages {
		observed = func() {}
	}
	a, err := tr.NewAgent(trial.AgentOptions{Options: hostmode.Options{Options: agent.Options{Policy: cfg, NoGrowthStop: !c.Stop,
		Wakeups: agent.WakeupOptions{MemcgNotification: agent.On, PSI: psi, MemoryEvents: agent.On, FastPoll: agent.On, Realtime: rt}, Observed: observed}},
		Keep: func(r agent.Record) bool {
			return slices.ContainsFunc(r.Actions, func(a agent.Action) bool { return a.Kind == "evict" })
		}})
	if err != nil {
		return oomTrial{}, err
	}
	kmsg := openKmsg()
	if kmsg != nil {
		defer kmsg.Close()
	}
	a.Start()
	alloc, err := rampScript(c.Ramp, 4*limitB, scale)
	if err != nil {
		return oomTrial{}, err
	}
	script := "sleep 300ms; " + alloc + "; hold"
	if !c.Term {
		script = "ignore-term; " + script
	}
	h, err := tr.StartHog(script, ch)
	if err != nil {
		return oomTrial{}, err
	}
	// Until the hog is gone and a little after, to see the usage fall.
	// The working set, not the usage: the threshold is on it, and the
	// file pages the hog's start charges to the sandbox would put the
	// usage's crossing before the threshold's (with a hog paced in 10 ms
	// slices, up to a slice before it: 8 of 40 trials read 8.3–8.5 ms
	// from that crossing to the wake-up).
	samples := tr.Sample(trial.Watch{Measure: trial.WorkingSet, Every: t.watchEvery, FIFO: t.fifo, FIFOFailed: func(err error) {
		fmt.Fprintln(os.Stderr, "latency: sampler at real-time priority:", err)
	}}, h.Done(), 20*time.Millisecond, 30*time.Second)
	<-h.Done()
	var rec *agent.Record
	select {
	case r := <-a.Records():
		rec = &r
	case <-time.After(2 * time.Second): // the record follows the kill
	}
	cross := limitB - c.Headroom
	res := oomTrial{}
	res.OOM = tr.OOM().Kills > 0 || kmsgOOMKills(kmsg, tr.Sandbox.Parent.Rel) > 0
	ci := -1
	var peak int64
	for k, s := range samples {
		// Strictly above, as the threshold is met: available < threshold.
		// (At 256Mi of headroom the paced hog's 5 MiB slices end exactly
		// on the threshold; counted from there, 8 of 40 trials read a
		// whole slice, 8–9 ms, to the wake-up that came when the next
		// slice met it.)
		if ci < 0 && s.Bytes > cross {
			ci = k
		}
		peak = max(peak, s.Bytes)
	}
	if ci < 0 && rec == nil {
		return oomTrial{}, fmt.Errorf("the hog never crossed the threshold (peak %s; it said %q; agent: %s)", q(peak), h.Stderr(), a.Log())
	}
	res.By = endedBy(res.OOM, rec != nil)
	if ci < 0 {
		res.Untimed, res.Gap = true, longestGap(samples)
		fmt.Fprintf(os.Stderr, "  %s trial %d: evictd acted on a crossing the sampler did not see (its peak %s, its longest gap %v): untimed\n", c.name(), i, q(peak), res.Gap)
		return res, nil
	}
	crossT := samples[ci].At
	for _, s := range samples[ci:] {
		if s.Bytes >= peak-stopSlack {
			res.Stopped = s.At.Sub(crossT)
			break
		}
	}
	res.Empty = h.ExitedAt().Sub(crossT)
	res.Peak = peak - cross
	if first := firstRise(samples); first >= 0 && ci > first {
		if d := samples[ci].At.Sub(samples[first].At); d > 0 {
			res.Rate = float64(samples[ci].Bytes-samples[first].Bytes) / d.Seconds()
		}
	}
	if rec != nil {
		res.Wake = rec.Trigger.At.Sub(crossT)
		res.Source = rec.Trigger.Reason
		if rec.Trigger.Source != "" {
			res.Source, _, _ = strings.Cut(rec.Trigger.Source, " ")
		}
		for _, a := range rec.Actions {
			if a.Stop != nil && a.Stop.Error == "" {
				res.Agent, res.Early = a.Stop.AfterTrigger, a.Stop.Early
				// From the wake-up the stop answered, which for an early
				// stop may come before the deciding synchronize's trigger.
				res.Wake = a.Stop.At.Add(-a.Stop.AfterTrigger).Sub(crossT)
			}
		}
	}
	return res, nil
}

// endedBy says who ended the hog: the kernel OOM killer (whoever else
// acted), evictd (its record of the eviction), or the hog itself.
func endedBy(oom, evicted bool) string {
	switch {
	case oom:
		return "kernel"
	case evicted:
		return "evictd"
	}
	return "itself"
}

// longestGap is the longest time between two consecutive samples.
func longestGap(ss []trial.Sample) time.Duration {
	var g time.Duration
	for k := 1; k < len(ss); k++ {
		g = max(g, ss[k].At.Sub(ss[k-1].At))
	}
	return g
}

// firstRise is the first sample above the sandbox's idle usage (the hog's
// first allocation), -1 if none.
func firstRise(ss []trial.Sample) int {
	if len(ss) == 0 {
		return -1
	}
	for k, s := range ss {
		if s.Bytes > ss[0].Bytes+4<<20 {
			return k
		}
	}
	return -1
}

// openKmsg opens the kernel log positioned at its end, so that the trial
// reads only what the kernel logs from now on (nil where it cannot be read:
// the counters still say whether an OOM kill happened).
func openKmsg() *os.File {
	f, err := os.OpenFile("/dev/kmsg", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	if _, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_END); err != nil {
		f.Close()
		return nil
	}
	return f
}

// kmsgOOMKills counts the kernel log's oom-kill records since openKmsg that
// name the sandbox (its memcg as the OOM's scope or as the victim's).
func kmsgOOMKills(f *os.File, rel string) int {
	if f == nil {
		return 0
	}
	n := 0
	buf := make([]byte, 8192)
	for {
		k, err := unix.Read(int(f.Fd()), buf)
		if errors.Is(err, unix.EPIPE) {
			continue // records were overwritten: go on with the next
		}
		if err != nil || k <= 0 {
			return n
		}
		line := string(buf[:k])
		if strings.Contains(line, "oom-kill:") && strings.Contains(line, rel) {
			n++
		}
	}
}

func printOOMMatrix(rs []oomResult, trials int) {
	fmt.Printf("OOM avoidance: a hog runs past its sandbox's limit with a hard threshold at <headroom> available; %d trials per cell (%s)\n",
		trials, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\twhere\tramp\tmeasured\tSIGTERM\theadroom\tOOM kill\tstopped p50\tstopped p99\tover\tempty p50\tempty p99\tby evictd\tby kernel\tearly\twake p50/p99\tagent p50/p99\tuntimed\tfailed\tload avg\t")
	for _, r := range rs {
		c := r.Cell
		term := "ignored"
		if c.Term {
			term = "obeyed"
		}
		var stopped, empty, wake, agentT []time.Duration
		var rates []float64
		var over int64
		early := 0
		by := map[string]int{}
		untimed := 0
		for _, t := range r.Trials {
			by[t.By]++
			if t.Untimed {
				untimed++
				continue
			}
			stopped = append(stopped, t.Stopped)
			if t.By == "evictd" {
				wake = append(wake, max(0, t.Wake))
				agentT = append(agentT, t.Agent)
			}
			empty = append(empty, t.Empty)
			rates = append(rates, t.Rate)
			over = max(over, t.Peak)
			if t.Early {
				early++
			}
		}
		for _, d := range [][]time.Duration{stopped, wake, agentT} {
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		}
		sort.Slice(empty, func(i, j int) bool { return empty[i] < empty[j] })
		sort.Float64s(rates)
		where := "host"
		if strings.HasPrefix(r.Where, "qemu") {
			where = "VM"
		}
		rate := "-"
		if len(rates) > 0 {
			rate = fmt.Sprintf("%.1f GiB/s", rates[len(rates)/2]/(1<<30))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s / %s\t%s / %s\t%d\t%d\t%s\t\n", c.variant(), where, c.Ramp, rate, term, q(c.Headroom),
			r.oomTrials(), len(r.Trials), ms(pct(stopped, 50)), ms(pct(stopped, 99)), mib(over), ms(pct(empty, 50)), ms(pct(empty, 99)),
			by["evictd"], by["kernel"], early, ms(pct(wake, 50)), ms(pct(wake, 99)), ms(pct(agentT, 50)), ms(pct(agentT, 99)), untimed, r.Failed, r.Load)
	}
	tw.Flush()
	fmt.Println("OOM kill = trials with any kernel OOM kill in the sandbox (its counters or an oom-kill record naming it in the kernel log);")
	fmt.Println("stopped = crossing (the working set above the threshold's level) → the working set within 320 KiB of its peak for good (with an OOM kill: the kill at the limit);")
	fmt.Println("over = the highest peak above the crossing; empty = crossing → the hog gone (1 s hard-eviction grace; SIGTERM obeyed ends it at once).")
	fmt.Println("measured = the hog's median allocation rate before the crossing; ramps of N threads touch memory at full speed.")
	fmt.Println("wake = crossing → the kernel wake-up the stop answered; agent = that wake-up → the stop in force;")
	fmt.Println("early = stops placed on that wake-up before the synchronize, on the pod the last one ranked first (agent/earlystop.go).")
	fmt.Println("untimed = trials evictd ended on a crossing the sampler never saw (counted for OOM kills and by whom, not in the times).")
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen[r.Where] {
			seen[r.Where] = true
			fmt.Printf("  %s\n", r.Where)
		}
	}
	for _, r := range rs {
		if strings.HasPrefix(r.Where, "qemu") {
			fmt.Println("The VM rows are scaled by 0.5 (sandbox, headroom, peak, paced rates) to fit the guest, and run under software")
			fmt.Println("emulation: the hog's page faults are slowed with evictd, so their rates are what the table measures.")
			break
		}
	}
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }
