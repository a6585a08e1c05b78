package hostmode

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
)

// logBuffer is a test's copy of the agent's log. The agent logs from
// goroutines of its own (the memcg threshold mover, the kill), so the test's
// reads must be synchronized with them: a bare bytes.Buffer raced (the race
// detector caught TestRootRemovedAndRecreated's read against the mover's
// write).
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func logTo(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// memoryOnly is the kubelet's default memory threshold alone: the defaults'
// disk thresholds read this machine's own disk, and a test workload would
// be evicted for imagefs.available<15% on a disk filled by builds.
func memoryOnly(t *testing.T) policy.Config {
	t.Helper()
	cfg, err := policy.ConfigFromKubelet(&kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
