package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/evictd/evictd/internal/actuate"
	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/version"
)

// DefaultMetricsAddr listens on loopback only: metrics describe the node's
// workloads, which is nobody else's business unless the operator says so.
const DefaultMetricsAddr = "127.0.0.1:9847"

// Metrics are the agent's Prometheus metrics, named as Prometheus' naming
// conventions ask: evictd_ prefix (no kubelet_ series of evictd's own, which
// would mix into the kubelet's in a Prometheus that scrapes both), base
// units in the names, counters ending in _total. Every series a dashboard or
// an alert reads exists from the start: counters at 0 for each label value
// evictd can know of (signals of the configured thresholds, triggers,
// stages, notifiers), a threshold that is not met and a condition that is
// not reported at 0 rather than absent. docs/agent.md lists them;
// docs/monitoring.md maps the names used before.
type Metrics struct {
	Registry *prometheus.Registry

	Evictions    *prometheus.CounterVec
	Syncs        *prometheus.CounterVec
	Wakeups      *prometheus.CounterVec
	SyncDuration prometheus.Histogram
	Detection    prometheus.Histogram
	// Available and Capacity per eviction signal, one gauge per unit:
	// bytes, inodes, PIDs (unitOf).
	Available    map[string]*prometheus.GaugeVec
	Capacity     map[string]*prometheus.GaugeVec
	ThresholdMet *prometheus.GaugeVec
	Condition    *prometheus.GaugeVec
	LastSync     prometheus.Gauge
	SyncErrors   *prometheus.CounterVec
	// EvictionErrors counts evictions decided that could not be carried
	// out (the Eviction API refused or failed, the pod was gone from the
	// pod source, the kill failed), by eviction signal.
	EvictionErrors *prometheus.CounterVec
	// Blind is 1 while the agent cannot observe the node (the last
	// UnhealthyAfter synchronizes could not list the workloads or read the
	// stats): it decides nothing, and /healthz fails.
	Blind prometheus.Gauge
	// DryRun is 1 when evictd decides but does not act (--dry-run,
	// --shadow).
	DryRun    prometheus.Gauge
	BuildInfo *prometheus.GaugeVec
	// OutputDropped counts what the outputs' queues could not take (a
	// stalled disk or pipe): evictd_output_dropped_total{output}.
	OutputDropped *prometheus.CounterVec

	// GrowthStops counts victims' holds by mechanism and outcome (stopped,
	// failed, dry-run, undone, moved); GrowthStopLatency is the trigger → limit in force.
	GrowthStops       *prometheus.CounterVec
	GrowthStopLatency *prometheus.HistogramVec
	// KernelOOMKills counts the kernel OOM killer's kills by pod (pod ""
	// for kills outside the workloads evictd watches).
	KernelOOMKills *prometheus.CounterVec

	kubeletOnce      sync.Once
	kubeletEvictions prometheus.Counter

	mu  sync.Mutex
	met map[[2]string]bool // (signal, threshold) series of evictd_threshold_met
}

// Label values known before anything happens, so that their counters read 0
// rather than being absent until the first increment.
var (
	// Trigger.Reason values.
	syncTriggers = []string{"start", "timer", "grace", "wake", "after-eviction"}
	// Stages of synchronizeErrors.
	syncStages = []string{stagePods, stageStats, stageStateFile, stageDecisionLog}
	// The kinds of notifier a wake-up comes from (the first word of
	// notify.Wake.Source; the decision log keeps the whole source).
	notifiers = []string{"memcg-threshold", "memcg-watch", "psi", "memory.events", "fast-poll"}
	// The node conditions the kubelet's eviction manager reports.
	nodeConditions = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
)

// Units of the signals' amounts, as the gauges' name suffixes.
const (
	unitBytes  = "bytes"
	unitInodes = "inodes"
	unitPIDs   = "pids"
)

// unitOf is the unit of a signal's available amount and capacity.
func unitOf(s policy.Signal) string {
	switch s {
	case policy.SignalNodeFsInodesFree, policy.SignalImageFsInodesFree, policy.SignalContainerFsInodesFree:
		return unitInodes
	case policy.SignalPIDAvailable:
		return unitPIDs
	}
	return unitBytes
}

// NewMetrics registers the metrics on a fresh registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "evictions_total",
			Help: "Workloads evicted, by eviction signal (the label of the kubelet's kubelet_evictions)."}, []string{"eviction_signal"}),
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "synchronizations_total",
			Help: "Synchronizes run, by trigger (start, timer, grace, wake, after-eviction)."}, []string{"trigger"}),
		Wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "wakeups_total",
			Help: "Kernel wake-ups received, by kind of notifier (memcg-threshold, memcg-watch, psi, memory.events, fast-poll, shadow)."}, []string{"notifier"}),
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "evictd", Name: "synchronize_duration_seconds",
			Help: "Time to observe, decide and act in one synchronize.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		Detection: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "evictd", Name: "trigger_to_decision_seconds",
			Help: "Time from a wake-up or tick to the decision.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		Available: map[string]*prometheus.GaugeVec{},
		Capacity:  map[string]*prometheus.GaugeVec{},
		ThresholdMet: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "threshold_met",
			Help: "1 while the threshold is met (grace periods ignored), 0 otherwise; one series per configured threshold."}, []string{"eviction_signal", "threshold"}),
		Condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "node_condition",
			Help: "1 while the node condition is reported, 0 otherwise."}, []string{"condition"}),
		LastSync: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "evictd", Name: "last_synchronize_timestamp_seconds",
			Help: "Unix time of the last synchronize."}),
		SyncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "synchronize_errors_total",
			Help: "Failures in a synchronize, by stage (pods, stats, state-file, decision-log)."}, []string{"stage"}),
		EvictionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "eviction_errors_total",
			Help: "Evictions decided that could not be carried out (refused, failed, pod gone from the pod source), by eviction signal."}, []string{"eviction_signal"}),
		Blind: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "evictd", Name: "blind",
			Help: "1 while evictd cannot observe the node (its last synchronizes could not list the workloads or read the stats), 0 otherwise."}),
		DryRun: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "evictd", Name: "dry_run",
			Help: "1 when evictd decides but does not act (--dry-run or --shadow), 0 when it evicts."}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "build_info",
			Help: "Always 1: the version, commit and Go release of this evictd, and the kubelet release whose eviction semantics it implements."},
			[]string{"version", "revision", "goversion", "kubelet_version"}),
		met:           map[[2]string]bool{},
		OutputDropped: newOutputDropped(),
	}
	for _, u := range []string{unitBytes, unitInodes, unitPIDs} {
		m.Available[u] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "signal_available_" + u,
			Help: "Observed available amount per eviction signal, in " + u + "."}, []string{"eviction_signal"})
		m.Capacity[u] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "signal_capacity_" + u,
			Help: "Observed capacity per eviction signal, in " + u + "."}, []string{"eviction_signal"})
		r.MustRegister(m.Available[u], m.Capacity[u])
	}
	for _, t := range syncTriggers {
		m.Syncs.WithLabelValues(t)
	}
	for _, s := range syncStages {
		m.SyncErrors.WithLabelValues(s)
	}
	for _, n := range notifiers {
		m.Wakeups.WithLabelValues(n)
	}
	for _, c := range nodeConditions {
		m.Condition.WithLabelValues(string(c)).Set(0)
	}
	m.BuildInfo.WithLabelValues(version.Version(), version.Revision(), version.GoVersion(), version.Kubelet).Set(1)
	m.GrowthStops = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "growth_stops_total",
		Help: "Eviction victims whose growth was stopped at decision time (a hard memory or PID threshold), by mechanism and outcome (stopped, failed, dry-run; undone: an early stop, placed on a kernel wake-up before its synchronize, on a pod that synchronize did not evict; moved: such a stop raised to its threshold, which that synchronize found just short of met)."},
		[]string{"mechanism", "outcome"})
	m.GrowthStopLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "evictd", Name: "growth_stop_seconds",
		Help:    "Time from the synchronize's trigger (a kernel wake-up or tick) until the victim's limit was in force.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}, []string{"mechanism"})
	m.KernelOOMKills = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "kernel_oom_kills_total",
		Help: "Processes the kernel OOM killer killed, by the pod or workload they belonged to (namespace, pod and qos_class empty for processes outside the workloads evictd watches, or in a cgroup already removed)."},
		[]string{"namespace", "pod", "qos_class"})
	r.MustRegister(m.GrowthStops, m.GrowthStopLatency, m.KernelOOMKills)
	// The growth stops' usual series, and kills outside the watched
	// workloads (pod ""): each at 0 from the start.
	for _, mech := range []string{actuate.MechMemoryHigh, actuate.MechMemoryLimit, actuate.MechPidsMax} {
		m.GrowthStops.WithLabelValues(mech, "stopped")
	}
	for _, mech := range []string{actuate.MechMemoryHigh, actuate.MechMemoryLimit} {
		m.GrowthStops.WithLabelValues(mech, "undone")
	}
	m.GrowthStops.WithLabelValues(actuate.MechMemoryLimit, "moved")
	m.GrowthStops.WithLabelValues("", "failed")
	m.KernelOOMKills.WithLabelValues("", "", "")
	// The Go runtime's and the process's own metrics (go_goroutines,
	// process_open_fds, process_resident_memory_bytes): a long-running agent
	// is watched for leaks with them (bench/soak.sh).
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(m.Evictions, m.Syncs, m.Wakeups, m.SyncDuration, m.Detection,
		m.ThresholdMet, m.Condition, m.LastSync, m.SyncErrors, m.EvictionErrors, m.Blind, m.DryRun, m.BuildInfo, m.OutputDropped)
	return m
}

// KubeletEvictionsObserved is the counter of pods on this node that the
// kubelet's own eviction manager evicted (evictd_kubelet_evictions_observed_total),
// registered on first use: Kubernetes mode's wiring registers it at start;
// host mode, with no kubelet, has no such series.
func (m *Metrics) KubeletEvictionsObserved() prometheus.Counter {
	m.kubeletOnce.Do(func() {
		m.kubeletEvictions = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "evictd", Name: "kubelet_evictions_observed_total",
			Help: "Pods on this node that the kubelet's own eviction manager evicted, as evictd's pod informer saw them (evictd acting: the kubelet got there first)."})
		m.Registry.MustRegister(m.kubeletEvictions)
	})
	return m.kubeletEvictions
}

// configure creates the series of the engine's thresholds: each at 0 in
// evictd_threshold_met, and each threshold's signal at 0 in
// evictd_evictions_total.
func (m *Metrics) configure(thresholds []policy.Threshold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range thresholds {
		k := [2]string{string(t.Signal), t.String()}
		if !m.met[k] {
			m.met[k] = false
			m.ThresholdMet.WithLabelValues(k[0], k[1]).Set(0)
		}
		m.Evictions.WithLabelValues(string(t.Signal))
		m.EvictionErrors.WithLabelValues(string(t.Signal))
	}
}

func (m *Metrics) evicted(signal string) {
	m.Evictions.WithLabelValues(signal).Inc()
}

// woken counts a wake-up by the kind of its notifier.
func (m *Metrics) woken(source string) {
	kind, _, _ := strings.Cut(source, " ")
	m.Wakeups.WithLabelValues(kind).Inc()
}

func (m *Metrics) observe(r Record, took time.Duration) {
	m.Syncs.WithLabelValues(r.Trigger.Reason).Inc()
	m.SyncDuration.Observe(took.Seconds())
	m.Detection.Observe(r.TriggerToDecision.Seconds())
	for _, o := range r.Decision.Observations {
		u := unitOf(o.Signal)
		m.Available[u].WithLabelValues(string(o.Signal)).Set(float64(o.Available.Value()))
		m.Capacity[u].WithLabelValues(string(o.Signal)).Set(float64(o.Capacity.Value()))
	}
	// Set in place, never Reset: a scrape between a Reset and the Sets
	// would see the series vanish.
	m.mu.Lock()
	now := map[[2]string]bool{}
	for _, t := range r.Decision.Met {
		now[[2]string{string(t.Threshold.Signal), t.Threshold.String()}] = true
	}
	for k := range now {
		m.met[k] = true
	}
	for k := range m.met {
		m.met[k] = now[k]
		m.ThresholdMet.WithLabelValues(k[0], k[1]).Set(b2f(now[k]))
	}
	m.mu.Unlock()
	reported := map[v1.NodeConditionType]bool{}
	for _, c := range r.Decision.NodeConditions {
		reported[c] = true
		m.Condition.WithLabelValues(string(c)).Set(1)
	}
	for _, c := range nodeConditions {
		if !reported[c] {
			m.Condition.WithLabelValues(string(c)).Set(0)
		}
	}
	m.LastSync.Set(float64(r.Time.UnixNano()) / 1e9)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Server serves /metrics, /healthz and /readyz.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Probes are the checks the server answers: /healthz (liveness: the loop
// runs and sees the node) and /readyz (readiness: evictd protects the node
// now). *Agent, and every wiring that embeds it, is one.
type Probes interface {
	Healthy() error
	Ready() error
}

// Serve starts the HTTP server on addr.
func Serve(addr string, m *Metrics, p Probes) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", probe(p.Healthy))
	mux.Handle("/readyz", probe(p.Ready))
	lim := capConns(ln, maxConns)
	s := &Server{srv: newHTTPServer(mux, lim), ln: lim}
	go s.srv.Serve(s.ln)
	return s, nil
}

// probe answers 200 "ok" or 503 with the check's error.
func probe(check func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Healthy returns a health check for a: unhealthy before the first
// synchronize, when none ran for three intervals, or when the last
// UnhealthyAfter synchronizes could not read the workloads or the stats (the
// agent runs but is blind). An eviction holding the loop (its grace period,
// its kill, the cleanup wait after it) counts as working, not stuck.
func (a *Agent) Healthy() error {
	if err := a.blindness(); err != nil {
		return err
	}
	if a.busy(a.cfg.Clock.Now()) {
		return nil // an eviction's grace period or its cleanup wait holds the loop
	}
	last := a.LastSync()
	if last.IsZero() {
		return errors.New("no synchronize yet")
	}
	if age := a.cfg.Clock.Now().Sub(last); age > 3*a.cfg.Interval {
		return errors.New("last synchronize " + age.Round(time.Second).String() + " ago")
	}
	return nil
}

// Ready returns the readiness check for a: evictd protects the node once a
// synchronize has observed it (listed the workloads and read the stats), and
// for as long as it is healthy. Until then (informer not synced, stats not
// readable yet) the node is not protected, and a rolling update of the
// DaemonSet waits rather than moving on to the next node.
func (a *Agent) Ready() error {
	if !a.observed.Load() {
		return errors.New("the node has not been observed yet (no synchronize has listed the workloads and read the stats)")
	}
	return a.Healthy()
}

// growthStop counts a victim's hold and how long after the trigger its
// limit was in force.
func (m *Metrics) growthStop(mechanism, outcome string, afterTrigger time.Duration) {
	m.GrowthStops.WithLabelValues(mechanism, outcome).Inc()
	if outcome == "stopped" {
		m.GrowthStopLatency.WithLabelValues(mechanism).Observe(afterTrigger.Seconds())
	}
}
