package hostmode

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/evictd/evictd/internal/policy"
	"github.com/evictd/evictd/internal/syncbuf"
)

func logTo(buf *syncbuf.Buffer) *slog.Logger {
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
