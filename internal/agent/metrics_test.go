package agent

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/version"
)

// metricsText is the registry in the text exposition format, as scraped.
func metricsText(t *testing.T, m *Metrics) string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			var ls []string
			for _, l := range x.GetLabel() {
				ls = append(ls, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			if len(ls) > 0 {
				b.WriteString("{" + strings.Join(ls, ",") + "}")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Every metric passes Prometheus' own linter (the rules promtool check
// metrics applies: units in names, _total on counters, help text, no
// reserved suffixes), and none is a kubelet_ series: evictd's would mix into
// the kubelet's in a Prometheus that scrapes both.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	w.avail = func(time.Time) int64 { return 500 * mi }
	m := NewMetrics()
	a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi", "nodefs.inodesFree": "5%", "pid.available": "10%"}, nil, nil, 0),
		Observer: sources{w, w}, Evictor: w, Clock: clock, Metrics: m, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kubelet_") {
			t.Errorf("evictd exports %s, a kubelet_ series", mf.GetName())
		}
	}
}

// The series dashboards and alerts read exist before anything happens
// (counters at 0, thresholds not met at 0, conditions not reported at 0),
// and a threshold that stops being met reads 0 instead of vanishing.
func TestMetricsExistFromTheStart(t *testing.T) {
	clock := &fakeClock{now: t0, manual: true}
	w := newWorld(clock)
	avail := 8 * gi
	w.avail = func(time.Time) int64 { return avail }
	m := NewMetrics()
	eng := engine(t, map[string]string{"memory.available": "1Gi", "nodefs.inodesFree": "5%"}, nil, nil, 0)
	a, err := New(Config{Engine: eng, Observer: sources{w, w}, Evictor: w, Clock: clock, Metrics: m, Log: logTo(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	text := metricsText(t, m)
	for _, want := range []string{
		`evictd_evictions_total{eviction_signal="memory.available"}`,
		`evictd_evictions_total{eviction_signal="nodefs.inodesFree"}`,
		`evictd_threshold_met{eviction_signal="memory.available",threshold="memory.available<1Gi"}`,
		`evictd_threshold_met{eviction_signal="nodefs.inodesFree",threshold="nodefs.inodesFree<5%"}`,
		`evictd_node_condition{condition="MemoryPressure"}`,
		`evictd_node_condition{condition="DiskPressure"}`,
		`evictd_node_condition{condition="PIDPressure"}`,
		`evictd_synchronizations_total{trigger="timer"}`,
		`evictd_synchronizations_total{trigger="wake"}`,
		`evictd_synchronize_errors_total{stage="stats"}`,
		`evictd_synchronize_errors_total{stage="decision-log"}`,
		`evictd_wakeups_total{notifier="psi"}`,
		`evictd_wakeups_total{notifier="memcg-threshold"}`,
		`evictd_build_info{goversion="` + version.GoVersion() + `",kubelet_version="` + version.Kubelet + `",revision="` + version.Revision() + `",version="` + version.Version() + `"}`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("before the first synchronize, no %s", want)
		}
	}
	if got := value(m.Evictions.WithLabelValues("memory.available")); got != 0 {
		t.Errorf("evictions before any: %v", got)
	}

	// Met, then not met any more: 1, then 0, never absent.
	avail = 512 * mi
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	met := m.ThresholdMet.WithLabelValues("memory.available", "memory.available<1Gi")
	if got := value(met); got != 1 {
		t.Fatalf("threshold_met while met: %v", got)
	}
	if got := value(m.Condition.WithLabelValues("MemoryPressure")); got != 1 {
		t.Fatalf("MemoryPressure while met: %v", got)
	}
	avail = 8 * gi
	clock.now = clock.now.Add(10 * time.Second)
	a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
	if got := value(met); got != 0 {
		t.Fatalf("threshold_met after recovery: %v, want 0", got)
	}
	if got := count(m.ThresholdMet); got != 2 {
		t.Fatalf("%d threshold_met series, want the 2 configured", got)
	}
	if got := count(m.Condition); got != 3 {
		t.Fatalf("%d node_condition series, want 3", got)
	}
}

// Amounts carry their unit in the metric's name: bytes, inodes and PIDs are
// three gauges, not one name mixing them.
func TestSignalGaugesByUnit(t *testing.T) {
	for sig, unit := range map[string]string{
		"memory.available": "bytes", "allocatableMemory.available": "bytes", "nodefs.available": "bytes",
		"imagefs.available": "bytes", "containerfs.available": "bytes",
		"nodefs.inodesFree": "inodes", "imagefs.inodesFree": "inodes", "containerfs.inodesFree": "inodes",
		"pid.available": "pids",
	} {
		if got := unitOf(policySignal(sig)); got != unit {
			t.Errorf("%s in %s, want %s", sig, got, unit)
		}
	}
}

// Wake-ups are counted by the kind of notifier, not by its path: the label
// stays bounded and readable.
func TestWakeupsByNotifier(t *testing.T) {
	m := NewMetrics()
	m.woken("psi /sys/fs/cgroup/kubepods/memory.pressure")
	m.woken("psi /proc/pressure/memory")
	m.woken("fast-poll")
	if got := value(m.Wakeups.WithLabelValues("psi")); got != 2 {
		t.Errorf("psi wake-ups %v, want 2", got)
	}
	if got := value(m.Wakeups.WithLabelValues("fast-poll")); got != 1 {
		t.Errorf("fast-poll wake-ups %v, want 1", got)
	}
}

func policySignal(s string) policy.Signal { return policy.Signal(s) }

// value is a counter's or gauge's value.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// count is the number of series a collector has.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}

// failingEvictor refuses every eviction, as an API server whose
// PodDisruptionBudget never allows it, or one that is down.
type failingEvictor struct{ *world }

func (f failingEvictor) Evict(context.Context, *v1.Pod, time.Duration, policy.Eviction) (EvictResult, error) {
	return EvictResult{Method: "Eviction API"}, errors.New("eviction API: the server is currently unable to handle the request")
}

// An eviction decided but not carried out counts in
// evictd_eviction_errors_total (the alert on failing API evictions reads
// it), and not in evictd_evictions_total; a dry run counts neither and says
// so in evictd_dry_run.
func TestEvictionErrorsCounted(t *testing.T) {
	for _, dry := range []bool{false, true} {
		clock := &fakeClock{now: t0, manual: true}
		w := newWorld(clock)
		w.avail = func(time.Time) int64 { return 512 * mi }
		m := NewMetrics()
		a, err := New(Config{Engine: engine(t, map[string]string{"memory.available": "1Gi"}, nil, nil, 0),
			Observer: sources{w, w}, Evictor: failingEvictor{w}, Clock: clock, Metrics: m, DryRun: dry, Log: logTo(&bytes.Buffer{})})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			a.Sync(context.Background(), Trigger{Reason: "timer", At: clock.Now()})
			clock.now = clock.now.Add(10 * time.Second)
		}
		wantErrs := 3.0
		if dry {
			wantErrs = 0
		}
		if got := value(m.EvictionErrors.WithLabelValues("memory.available")); got != wantErrs {
			t.Errorf("dry run %v: evictd_eviction_errors_total = %v, want %v", dry, got, wantErrs)
		}
		if got := value(m.Evictions.WithLabelValues("memory.available")); got != 0 {
			t.Errorf("dry run %v: evictd_evictions_total = %v, want 0", dry, got)
		}
		if got := value(m.DryRun); got != b2f(dry) {
			t.Errorf("dry run %v: evictd_dry_run = %v", dry, got)
		}
	}
}
