package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMetricsAddr listens on loopback only: metrics describe the node's
// workloads, which is nobody else's business unless the operator says so.
const DefaultMetricsAddr = "127.0.0.1:9847"

// Metrics are the agent's Prometheus metrics, in base units (bytes, seconds).
type Metrics struct {
	Registry *prometheus.Registry

	// KubeletEvictions has the kubelet's name and label
	// (kubelet_evictions{eviction_signal}), so dashboards built for the
	// kubelet work unchanged.
	KubeletEvictions *prometheus.CounterVec
	Evictions        *prometheus.CounterVec
	Syncs            *prometheus.CounterVec
	Wakeups          *prometheus.CounterVec
	SyncDuration     prometheus.Histogram
	Detection        prometheus.Histogram
	Available        *prometheus.GaugeVec
	Capacity         *prometheus.GaugeVec
	ThresholdMet     *prometheus.GaugeVec
	Condition        *prometheus.GaugeVec
	LastSync         prometheus.Gauge
	SyncErrors       *prometheus.CounterVec
	// OutputDropped counts what the outputs' queues could not take (a
	// stalled disk or pipe): evictd_output_dropped_total{output}.
	OutputDropped *prometheus.CounterVec

	// GrowthStops counts victims' holds by mechanism and outcome (stopped,
	// failed, dry-run); GrowthStopLatency is the trigger → limit in force.
	GrowthStops       *prometheus.CounterVec
	GrowthStopLatency *prometheus.HistogramVec
	// KernelOOMKills counts the kernel OOM killer's kills by pod (pod ""
	// for kills outside the workloads evictd watches).
	KernelOOMKills *prometheus.CounterVec
}

// NewMetrics registers the metrics on a fresh registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		KubeletEvictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_evictions",
			Help: "Cumulative number of pod evictions by eviction signal (same name and label as the kubelet's)."}, []string{"eviction_signal"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "evictions_total",
			Help: "Workloads evicted, by eviction signal."}, []string{"eviction_signal"}),
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "synchronizations_total",
			Help: "Synchronizes run, by trigger (start, timer, wake, after-eviction)."}, []string{"trigger"}),
		Wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "wakeups_total",
			Help: "Kernel wake-ups received, by notifier."}, []string{"source"}),
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "evictd", Name: "synchronize_duration_seconds",
			Help: "Time to observe, decide and act in one synchronize.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		Detection: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "evictd", Name: "trigger_to_decision_seconds",
			Help: "Time from a wake-up or tick to the decision.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		Available: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "signal_available",
			Help: "Observed available amount per eviction signal (bytes, inodes or PIDs)."}, []string{"eviction_signal"}),
		Capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "signal_capacity",
			Help: "Observed capacity per eviction signal (bytes, inodes or PIDs)."}, []string{"eviction_signal"}),
		ThresholdMet: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "threshold_met",
			Help: "1 when the threshold is met (grace periods ignored).", ConstLabels: nil}, []string{"eviction_signal", "threshold"}),
		Condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "evictd", Name: "node_condition",
			Help: "1 while the node condition is reported."}, []string{"condition"}),
		LastSync: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "evictd", Name: "last_synchronize_timestamp_seconds",
			Help: "Unix time of the last synchronize."}),
		SyncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "synchronize_errors_total",
			Help: "Failures in a synchronize, by stage (pods, stats, state-file, decision-log)."}, []string{"stage"}),
		OutputDropped: newOutputDropped(),
	}
	m.GrowthStops = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "growth_stops_total",
		Help: "Eviction victims whose growth was stopped at decision time (a hard memory or PID threshold), by mechanism and outcome (stopped, failed, dry-run)."},
		[]string{"mechanism", "outcome"})
	m.GrowthStopLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "evictd", Name: "growth_stop_seconds",
		Help:    "Time from the synchronize's trigger (a kernel wake-up or tick) until the victim's limit was in force.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}, []string{"mechanism"})
	m.KernelOOMKills = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "evictd", Name: "kernel_oom_kills_total",
		Help: "Processes the kernel OOM killer killed, by the pod or workload they belonged to (namespace, pod and qos_class empty for processes outside the workloads evictd watches, or in a cgroup already removed)."},
		[]string{"namespace", "pod", "qos_class"})
	r.MustRegister(m.GrowthStops, m.GrowthStopLatency, m.KernelOOMKills)
	// The Go runtime's and the process's own metrics (go_goroutines,
	// process_open_fds, process_resident_memory_bytes): a long-running agent
	// is watched for leaks with them (bench/soak.sh).
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(m.KubeletEvictions, m.Evictions, m.Syncs, m.Wakeups, m.SyncDuration, m.Detection, m.Available,
		m.Capacity, m.ThresholdMet, m.Condition, m.LastSync, m.SyncErrors, m.OutputDropped)
	return m
}

func (m *Metrics) evicted(signal string) {
	m.KubeletEvictions.WithLabelValues(signal).Inc()
	m.Evictions.WithLabelValues(signal).Inc()
}

func (m *Metrics) observe(r Record, took time.Duration) {
	m.Syncs.WithLabelValues(r.Trigger.Reason).Inc()
	m.SyncDuration.Observe(took.Seconds())
	m.Detection.Observe(r.TriggerToDecision.Seconds())
	for _, o := range r.Decision.Observations {
		m.Available.WithLabelValues(string(o.Signal)).Set(float64(o.Available.Value()))
		m.Capacity.WithLabelValues(string(o.Signal)).Set(float64(o.Capacity.Value()))
	}
	m.ThresholdMet.Reset()
	for _, t := range r.Decision.Met {
		m.ThresholdMet.WithLabelValues(string(t.Threshold.Signal), t.Threshold.String()).Set(1)
	}
	m.Condition.Reset()
	for _, c := range r.Decision.NodeConditions {
		m.Condition.WithLabelValues(string(c)).Set(1)
	}
	m.LastSync.Set(float64(r.Time.UnixNano()) / 1e9)
}

// Server serves /metrics and /healthz.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Serve starts the HTTP server on addr. healthy reports whether the loop
// is alive (a synchronize within the last few intervals).
func Serve(addr string, m *Metrics, healthy func() error) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	lim := capConns(ln, maxConns)
	s := &Server{srv: newHTTPServer(mux, lim), ln: lim}
	go s.srv.Serve(s.ln)
	return s, nil
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

// growthStop counts a victim's hold and how long after the trigger its
// limit was in force.
func (m *Metrics) growthStop(mechanism, outcome string, afterTrigger time.Duration) {
	m.GrowthStops.WithLabelValues(mechanism, outcome).Inc()
	if outcome == "stopped" {
		m.GrowthStopLatency.WithLabelValues(mechanism).Observe(afterTrigger.Seconds())
	}
}
