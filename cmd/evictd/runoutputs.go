package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cli"
)

// What `evictd run` writes besides its decisions — the log, the decision
// log, the state file — and how it stops, the same in host mode and in
// Kubernetes mode: every output goes through a bounded queue
// (internal/agent), so a stalled disk or pipe can cost records, never a
// decision, a kill or a stop.

// byteSize is a flag holding a size such as 32Mi.
type byteSize struct{ n int64 }

func (b *byteSize) String() string {
	if b == nil {
		return ""
	}
	return resource.NewQuantity(b.n, resource.BinarySI).String()
}

// Type names the flag's value in --help.
func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a size such as 32Mi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("want a size of 0 or more that fits 64 bits, e.g. 32Mi")
	}
	b.n = n
	return nil
}

// outputFlags are run's flags for the decision log's bounds and the stop.
type outputFlags struct {
	maxSize     byteSize
	keep        *int
	stopTimeout *time.Duration
}

func registerOutputFlags(fs *pflag.FlagSet) *outputFlags {
	o := &outputFlags{maxSize: byteSize{agent.DefaultDecisionLogMaxSize}}
	fs.Var(&o.maxSize, "decision-log-max-size", "rotate the decision log file when it would grow past this `size` (0: never); the files kept take at most this × (--decision-log-keep + 1)")
	o.keep = fs.Int("decision-log-keep", agent.DefaultDecisionLogKeep, "rotated decision log files to keep (FILE.1 is the newest)")
	o.stopTimeout = fs.Duration("stop-timeout", agent.DefaultStopTimeout, "on SIGTERM, how long an eviction in progress may still run to finish its grace period; one that ends later is finished by the next start at its deadline")
	return o
}

func (o *outputFlags) check() error {
	if *o.keep < 0 {
		return fmt.Errorf("--decision-log-keep %d: want 0 or more", *o.keep)
	}
	if *o.stopTimeout < 0 {
		return fmt.Errorf("--stop-timeout %s: want 0 or more", *o.stopTimeout)
	}
	return nil
}

func (o *outputFlags) decisionLog() agent.DecisionLogOptions {
	return agent.DecisionLogOptions{MaxSize: o.maxSize.n, Keep: *o.keep}
}

// stop is what Run's StopTimeout is told: 0 on the command line means no
// wait at all (agent.Config's 0 is the default).
func (o *outputFlags) stop() time.Duration {
	if *o.stopTimeout == 0 {
		return -1
	}
	return *o.stopTimeout
}

// runLogger is the agent's logger: its lines go to stderr through a queue,
// so a log sink that stalls (a pipe nobody reads) drops lines instead of
// stalling the loop. close writes what is queued, waiting at most
// agent.DefaultFlushTimeout.
func runLogger(fs *pflag.FlagSet, stderr io.Writer) (log *slog.Logger, w *agent.AsyncWriter) {
	w = agent.NewAsyncWriter(stderr, 0)
	return cli.CommandLoggerTo(fs, w), w
}

// runSignals returns the context a run stops with: SIGINT and SIGTERM end
// it. A broken pipe on standard output (--decision-log - read by a process
// that went away) or standard error is a write error the outputs log and
// count, not a SIGPIPE that ends the agent without cleanup (exit 141).
func runSignals() (context.Context, func()) {
	// Notified, SIGPIPE makes the write fail with EPIPE instead (os/signal);
	// the channel is never read, and the runtime never blocks on it.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// openDecisionLog opens --decision-log with its bounds and makes SIGHUP
// reopen it (the reload runs with the others registered on reloads).
func openDecisionLog(path string, o *outputFlags, reloads *agent.Reloader) (*agent.DecisionLog, error) {
	if path == "" {
		return nil, nil
	}
	dl, err := agent.OpenDecisionLog(path, o.decisionLog())
	if err != nil {
		return nil, fmt.Errorf("--decision-log: %w", err)
	}
	if path != "-" {
		reloads.Add("decision log "+path+" (reopened)", dl.Reopen)
	}
	return dl, nil
}

// countDrops makes the log writer's drops a metric.
func countDrops(w *agent.AsyncWriter, m *agent.Metrics) {
	if m != nil {
		w.OnDrop(m.OutputDropped.WithLabelValues(agent.OutputLog).Inc)
	}
}
