package kube

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/syncbuf"
)

// TestRecorderNeverBlocksAndLogsPerChange: Post returns while the API
// server holds a write; what does not fit is dropped and counted; drops and
// failures are logged once when they start and once when they end, never
// per write.
func TestRecorderNeverBlocksAndLogsPerChange(t *testing.T) {
	logs := &syncbuf.Buffer{}
	m := agent.NewMetrics()
	r := NewRecorder("Events", agent.OutputEvents, 2, time.Minute, m, slog.New(slog.NewTextHandler(logs, nil)))
	defer r.Close(time.Second)
	hold, started := make(chan struct{}), make(chan struct{})
	r.Post("held", func(ctx context.Context) error { close(started); <-hold; return nil })
	<-started // the worker holds it; the queue (2) is empty
	for range 5 {
		r.Post("queued", func(context.Context) error { return errors.New("refused") })
	}
	if got := counterValue(t, m.OutputDropped.WithLabelValues(agent.OutputEvents)); got != 3 {
		t.Errorf("dropped %v, want 3 (a queue of 2 behind the held write)", got)
	}
	close(hold)
	if !r.Flush(10 * time.Second) {
		t.Fatal("not flushed")
	}
	r.Post("after", func(context.Context) error { return nil }) // fits again, and works
	if !r.Flush(10 * time.Second) {
		t.Fatal("not flushed")
	}
	out := logs.String()
	for _, want := range []string{"Events dropped", "Events queued again", "dropped=3",
		"writing Events to the API server failed", "err=refused", "Events reach the API server again", "failed=2"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("%d log lines, want 4 (one per change):\n%s", n, out)
	}
}
