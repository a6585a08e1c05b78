package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/evictd/evictd/internal/agent"
)

// The start and the stop of `evictd run`, one path for host mode and
// Kubernetes mode: the same signals (SIGINT and SIGTERM stop, SIGHUP
// reloads, SIGPIPE is a write error), the same outputs (decision log,
// metrics, the log's drops counted) and the same lines at start and stop.
// Each mode only loads its configuration and wires its agent in between.

// wiredAgent is a wiring's agent (*hostmode.Host, *kube.Node) as the run
// path drives it.
type wiredAgent interface {
	agent.Probes
	// Run runs the loop until ctx is done, then releases what New started.
	Run(ctx context.Context) error
	// Close releases what New started, for an agent that is not run.
	Close()
}

// runLife is a run between startRun and Close.
type runLife struct {
	// Ctx ends on SIGINT or SIGTERM.
	Ctx context.Context
	// Reloads run on every SIGHUP; the decision log's reopen is one.
	Reloads     *agent.Reloader
	DecisionLog *agent.DecisionLog // nil: --decision-log ""
	Metrics     *agent.Metrics     // nil: no metrics endpoint
	log         *slog.Logger
	undo        []func()
}

// startRun begins a run of either mode, before its agent is wired: from
// here on a SIGHUP runs the reloads (so a SIGHUP during a slow start, the
// informer's first list, is not the default exit 129), SIGINT and SIGTERM
// end Ctx; the decision log is opened and the metrics made when metrics
// is set.
func startRun(sh runShared, metrics bool) (*runLife, error) {
	ctx, stop := runSignals()
	l := &runLife{Ctx: ctx, Reloads: agent.NewReloader(sh.log), log: sh.log}
	l.onClose(stop)
	dl, err := openDecisionLog(sh.decisionLog, sh.outputs, l.Reloads)
	if err != nil {
		l.Close()
		return nil, err
	}
	if dl != nil {
		l.DecisionLog = dl
		l.onClose(func() { dl.Close() })
	}
	// Undone first: no reopen of a closed decision log.
	l.onClose(reloadOnSIGHUP(l.Reloads))
	if metrics {
		l.Metrics = agent.NewMetrics()
		countDrops(sh.logw, l.Metrics)
	}
	return l, nil
}

// onClose makes Close run f, the last deferred first.
func (l *runLife) onClose(f func()) { l.undo = append(l.undo, f) }

// Close ends the run: the SIGHUP handler first, then the outputs, then
// the signals.
func (l *runLife) Close() {
	for i := len(l.undo) - 1; i >= 0; i-- {
		l.undo[i]()
	}
	l.undo = nil
}

// run serves /metrics, /healthz and /readyz on metricsAddr ("" for none),
// logs running with attrs, runs a until Ctx ends and logs the stop. An
// error is the run's (a wiring that cannot run, a server that cannot
// listen), never the stop's.
func (l *runLife) run(a wiredAgent, metricsAddr, running string, attrs ...any) error {
	if metricsAddr != "" {
		srv, err := agent.Serve(metricsAddr, l.Metrics, a)
		if err != nil {
			a.Close()
			return fmt.Errorf("--metrics-addr %s: %w", metricsAddr, err)
		}
		defer srv.Close()
	}
	l.log.Info(running, attrs...)
	start := time.Now()
	if err := a.Run(l.Ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	l.log.Info("evictd stopped", "ran", time.Since(start).Round(time.Second))
	return nil
}
