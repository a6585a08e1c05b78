package agent

import (
	"log/slog"
	"time"

	"github.com/evictd/evictd/internal/policy"
)

// Options are what both wirings (hostmode.Options, kube.Options) take
// alike, embedded in each, so that evictd run fills them once for either
// mode: the policy, the wake-ups, the loop's period, the dry run and the
// growth stop, the outputs (state file, decision log, metrics, log) and the
// stop.
type Options struct {
	Policy policy.Config
	// Wakeups are the kernel wake-ups asked for (the zero value: none, the
	// timer alone).
	Wakeups WakeupOptions
	// Interval is the synchronize loop's period (0: DefaultInterval).
	Interval time.Duration
	// DryRun decides and records only: nothing is killed or changed.
	DryRun bool
	// NoGrowthStop leaves a hard eviction's victim growing until its kill,
	// as the kubelet does (Config.Holder); by default its growth is stopped
	// the moment it is chosen.
	NoGrowthStop bool
	StateFile    string // "": not kept
	DecisionLog  *DecisionLog
	Metrics      *Metrics
	Log          *slog.Logger
	// StopTimeout: Config.StopTimeout.
	StopTimeout time.Duration
	// Observed: Config.Observed.
	Observed func()
}
