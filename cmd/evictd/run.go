package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/hostmode"
	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/workload"
)

func init() {
	cli.Register(cli.Command{
		Name:    "run",
		Summary: "run the eviction agent on this host (kernel wake-ups, kubelet decisions, kills)",
		Run:     runRun,
	})
}

const runHelp = `
Runs the eviction agent on this host. Every 10 s (the kubelet's period) and at
once on every kernel wake-up — the cgroup v1 memcg threshold eventfd, PSI
triggers, memory.events on cgroup v2, and a fast poll whose interval shrinks
as memory runs out — it reads the node's stats, decides exactly as the
kubelet v1.37.2 eviction manager would, and carries the decision out: SIGTERM
to every process of the chosen workload, then a kill no fork can escape
(cgroup.kill on v2, freezer + SIGKILL on v1) at the grace deadline.

Workloads are the cgroups under --workload-root (relative to the memory
cgroup hierarchy). A workloads file (--workloads) gives them what a pod spec
would: requests, limits, priority, terminationGracePeriodSeconds, critical.
Cgroups it does not describe are BestEffort with priority 0. evictd never
evicts itself or a critical workload.

Thresholds come from a KubeletConfiguration file (--config) and/or the
kubelet's own eviction flags; without either, the kubelet's defaults apply.
With the default enforceNodeAllocatable [pods], every memory.available
threshold is also applied to the workload root as allocatableMemory.available.

With --memory-qos (default), every synchronize also keeps what the kubelet
writes with MemoryQoS: memory.min/low/high of each workload cgroup and the
aggregates on the workload root (cgroup v2 only), and the oom_score_adj of
every workload process (-997 Guaranteed, 1000 BestEffort, Burstable by
request; evictd itself -999), from --config's featureGates.MemoryQoS,
memoryReservationPolicy and memoryThrottlingFactor and the workloads file.
Values are left in place at stop; "evictd qos --live" compares them with
what is written now (docs/qos.md).

Each decision that acted or changed something is appended to the decision
log as one JSON line (the data "evictd explain -o json" prints; the ranking
only where a pod was evicted), with a heartbeat every 30 s while pressure
stays; the file rotates at --decision-log-max-size, keeping
--decision-log-keep old ones. Prometheus metrics, /healthz and
/readyz are served on 127.0.0.1:9847 by default. Logs: one line per action and per state change,
nothing per tick. Every output goes through a bounded queue: a slow disk or
a stalled pipe costs records (evictd_output_dropped_total), never a
decision, a kill or a stop. The decision log and the state file must be
regular files (a link, a FIFO or a device is refused).

When a hard memory or PID threshold picks a victim, its growth is stopped
before anything else is done (--stop-growth): memory.high at its usage, then
10% under it, on cgroup v2, the OOM killer off and memory.limit_in_bytes just
above the usage on v1, pids.max at its task count. The eviction then goes on exactly as the
kubelet's: SIGTERM, the grace period, the kill; the stop is undone if the
eviction is abandoned, once the workload is gone, and when evictd stops.

--dry-run logs exactly what would be killed and changes nothing (the state
file is not written). --check validates the configuration, the output paths
and the metrics address, and exits.

One agent per workload root: a second one on the same root, or on a cgroup
inside or around it, is refused with the first one's PID. SIGHUP reloads the
workloads file (a file with an error is logged and the running one kept) and
reopens the decision log, in Kubernetes mode too; --config and the flags are
read at start only (a change takes a restart), and the line logged says so. SIGINT and SIGTERM stop the agent cleanly; an
eviction whose grace period runs then finishes within --stop-timeout, or the
next start finishes it at its deadline (a stop never shortens a grace
period).

--profile kubelet (the default) makes every decision the kubelet's. --profile
extended, or a list of its behaviours, adds what kubelet users have asked for
and the kubelet does not do: hard-preempts-soft (a hard threshold is acted on
while a soft eviction waits out its grace period, kubernetes#123872),
reclaim-first (memory.reclaim before evicting on memory, cgroup v2,
kubernetes#43916), swap-aware (free swap counts as available, swap use as use,
kubernetes/enhancements#2400), loop-breaker (a controller's pods evicted twice
within 10m rank last, kubernetes#124388), memavailable (memory.available from
/proc/meminfo's MemAvailable, kubernetes#138372). docs/profile.md says what each
does and why.

Example:
  evictd run --dry-run
  evictd run --workload-root /workloads --workloads /etc/evictd/workloads.yaml \
    --eviction-hard 'memory.available<500Mi' --eviction-soft 'memory.available<1Gi' \
    --eviction-soft-grace-period memory.available=30s
  evictd run --check --config /etc/evictd/kubelet.yaml --workloads /etc/evictd/workloads.yaml --workload-root /workloads
  evictd run --workload-root /workloads --profile extended
` + runKubeHelp

// hookFlag collects --reclaim-hook SIGNAL=COMMAND.
type hookFlag map[string][]actuate.Hook

func (h hookFlag) String() string { return "" }
func (h hookFlag) Type() string   { return "SIGNAL=COMMAND" }
func (h hookFlag) Set(s string) error {
	sig, cmd, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(cmd) == "" {
		return fmt.Errorf("%q: want SIGNAL=COMMAND, e.g. imagefs.available=crictl rmi --prune", s)
	}
	sig = strings.TrimSpace(sig)
	if !policy.ValidSignal(policy.Signal(sig)) {
		return fmt.Errorf("%q: unknown eviction signal %q", s, sig)
	}
	h[sig] = append(h[sig], actuate.Hook{Signal: sig, Command: []string{"/bin/sh", "-c", cmd}})
	return nil
}

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("run", "[flags]", runHelp, stdout, stderr)
	configPath := fs.String("config", "", "KubeletConfiguration file (YAML or JSON) with the eviction settings, or a /configz dump; without it the kubelet's defaults apply")
	configDir := registerConfigDirFlag(fs)
	root := fs.String("workload-root", "", `cgroup whose children are the workloads, relative to the memory hierarchy root, e.g. /workloads (required unless --dry-run, where it defaults to "/")`)
	workloadsPath := fs.String("workloads", "", "workloads file (YAML or JSON) describing the workload cgroups; see docs/agent.md")
	interval := fs.Duration("interval", agent.DefaultInterval, "period of the synchronize loop (the kubelet's evictionMonitoringPeriod)")
	dryRun := fs.Bool("dry-run", false, "log what would be killed and change nothing")
	check := fs.Bool("check", false, "validate the configuration (files, flags, cgroups) and exit")
	stateFile := fs.String("state-file", "/var/lib/evictd/state.json", `engine state (grace-period timers, conditions), kept across restarts; "" to disable`)
	decisionLog := fs.String("decision-log", "/var/log/evictd/decisions.jsonl", `JSON-lines decision log; "-" for standard output, "" to disable`)
	metricsAddr := fs.String("metrics-addr", agent.DefaultMetricsAddr, `address for /metrics, /healthz and /readyz (plain HTTP, loopback by default); "" to disable`)
	wakeFlags := registerWakeupFlags(fs)
	hooks := hookFlag{}
	fs.Var(hooks, "reclaim-hook", "node-level reclaim command for a signal, SIGNAL=COMMAND (repeatable), run before evicting for disk signals, e.g. 'imagefs.available=crictl rmi --prune'")
	hookTimeout := fs.Duration("reclaim-timeout", actuate.DefaultHookTimeout, "timeout of each reclaim hook")
	memoryQoS := fs.Bool("memory-qos", true, "keep each workload's memory.min/low/high (cgroup v2) and oom_score_adj as the kubelet does, from --config's MemoryQoS settings and the workloads file (docs/qos.md); false leaves them alone")
	stopGrowth := fs.Bool("stop-growth", true, "stop a hard memory or PID threshold's victim from growing the moment it is chosen, before SIGTERM or the API call (memory.high on cgroup v2, memory.limit_in_bytes with the OOM killer off on v1, pids.max), so the kernel OOM killer does not strike during the grace period; false lets it grow until its kill, as the kubelet does (docs/agent.md#growth-stop)")
	releasePages := fs.Bool("release-startup-pages", true, "once the first synchronize has observed the node, let go of the pages of evictd's own binary that start-up mapped (most of its RSS; they stay in the page cache, and what runs again is mapped back by minor faults); false keeps them mapped (docs/agent.md#memory)")
	allowRoot := fs.Bool("allow-root-cgroup", false, "allow --workload-root / (every top-level cgroup of this host, system services included, becomes an evictable workload)")
	outFlags := registerOutputFlags(fs)
	cli.RegisterInputFlags(fs)
	evFlags := load.RegisterEvictionFlags(fs)
	profile := cli.RegisterProfileFlag(fs)
	kf := registerKubeFlags(fs)
	if done, code := cli.ParseFlags(fs, args, stdout); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "evictd run: "+format+"\n", a...)
		return cli.ExitError
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	wakeups, err := wakeFlags.options()
	if err != nil {
		return fail("%v", err)
	}
	if *interval < minInterval {
		return fail("--interval %s: must be at least %s (the kubelet's period is 10s; kernel wake-ups, not the timer, make evictd fast)", *interval, minInterval)
	}
	if *hookTimeout <= 0 {
		return fail("--reclaim-timeout %s: want a positive duration", *hookTimeout)
	}
	if err := outFlags.check(); err != nil {
		return fail("%v", err)
	}
	if err := checkOutputFile("--decision-log", *decisionLog, true); err != nil {
		return fail("%v", err)
	}
	if !*dryRun {
		if err := checkOutputFile("--state-file", *stateFile, true); err != nil {
			return fail("%v", err)
		}
	}
	// The agent's lines go to stderr through a queue, so that a stalled
	// stderr never stalls the loop (runLogger); klog's follow.
	log, logw := runLogger(fs, stderr)
	defer logw.Close(agent.DefaultFlushTimeout)
	sh := runShared{configPath: *configPath, configDir: *configDir, stateFile: *stateFile, decisionLog: *decisionLog, metricsAddr: *metricsAddr,
		log: log, logw: logw, dryRun: *dryRun, check: *check, interval: *interval, ev: evFlags, profile: profile.Profile(), noGrowthStop: !*stopGrowth, outputs: outFlags,
		wakeups: wakeups, keepStartupPages: !*releasePages}
	if *kf.on {
		return runKube(kf, sh, stdout, stderr)
	}
	if *kf.secureMetrics != "" || *kf.tlsCert != "" || *kf.tlsKey != "" {
		return fail("--secure-metrics-addr, --tls-cert-file and --tls-private-key-file need --kubernetes: the endpoint authenticates its clients with the API server")
	}
	if *root == "" {
		if !*dryRun && !*check {
			return fail("--workload-root is required (the cgroup whose children are the workloads, e.g. /workloads); try --dry-run to see what evictd would do on this host")
		}
		*root = "/"
	} else if err := checkWorkloadRoot(*root, *dryRun, *allowRoot); err != nil {
		return fail("%v", err)
	}
	if err := checkMetricsAddr(*metricsAddr, *check); err != nil {
		return fail("%v", err)
	}
	cfg, kc, err := policyConfig(kubeletconfig.Source{File: *configPath, DropInDir: *configDir}, evFlags)
	if err != nil {
		return fail("%v", err)
	}
	cfg.Profile = profile.Profile()
	var wf *workload.File
	if *workloadsPath != "" {
		if wf, err = workload.ReadFile(*workloadsPath); err != nil {
			return fail("%v", err)
		}
	}
	for sig := range hooks {
		for i := range hooks[sig] {
			hooks[sig][i].Timeout = *hookTimeout
		}
	}
	for _, w := range kc.Warnings {
		log.Warn("kubelet config: accepted as the kubelet accepts it (run `evictd lint` for details)", "warning", w)
	}

	opts := hostmode.Options{
		Options:      sh.options(cfg),
		WorkloadRoot: *root, Workloads: wf, Hooks: hooks,
	}
	if !*dryRun && !*check {
		opts.StateFile = *stateFile
	}
	if *memoryQoS {
		qs, err := hostQoSSettings(kc)
		if err != nil {
			return fail("%v", err)
		}
		opts.MemoryQoS = &qs
	}
	if *check {
		h, err := hostmode.New(opts)
		if err != nil {
			return fail("%v", err)
		}
		ws, _ := h.Pods.Workloads()
		h.Close()
		fmt.Fprintf(stdout, "configuration OK: %d threshold(s) from %s, workload root %s (cgroup v%d), %d active workload(s), profile %s\n",
			len(h.Engine().Thresholds()), kc.Describe(), h.Root, map[bool]int{false: 1, true: 2}[h.V2], len(ws), cfg.Profile)
		for _, t := range h.Engine().Thresholds() {
			fmt.Fprintf(stdout, "  threshold %s\n", t.String())
		}
		return cli.ExitOK
	}
	l, err := startRun(sh, *metricsAddr != "")
	if err != nil {
		return fail("%v", err)
	}
	defer l.Close()
	opts.DecisionLog, opts.Metrics = l.DecisionLog, l.Metrics
	h, err := hostmode.New(opts)
	if err != nil {
		return fail("%v", err)
	}
	if *workloadsPath != "" {
		l.Reloads.Add("workloads file "+*workloadsPath, h.Pods.ReloadWorkloadsFile(*workloadsPath))
	}
	if err := l.run(h, *metricsAddr, "evictd running", "workload_root", h.Root, "cgroup", map[bool]string{false: "v1", true: "v2"}[h.V2],
		"thresholds", thresholdTexts(cfg.Thresholds), "wakeups", h.Wakeups.Active(), "dry_run", *dryRun,
		"interval", *interval, "metrics", *metricsAddr, "profile", cfg.Profile.String()); err != nil {
		return fail("%v", err)
	}
	return cli.ExitOK
}

func thresholdTexts(ts []policy.Threshold) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}
