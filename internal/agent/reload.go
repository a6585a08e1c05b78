package agent

import (
	"log/slog"
	"strings"
	"sync"
)

// Reloader runs the reloads asked for with SIGHUP, the same in host mode
// and in Kubernetes mode. Each consumer (host mode's workloads file,
// hostmode.Pods.ReloadWorkloadsFile; the decision log's reopen; other
// settings read from files may add theirs) registers a function that reads
// its file again and applies it only when the whole file is valid: a bad
// file is logged and the running configuration kept, so nothing is ever
// half-applied.
type Reloader struct {
	log   *slog.Logger
	mu    sync.Mutex
	hooks []reloadHook
}

type reloadHook struct {
	name string
	fn   func() error
}

// NotReloaded is what a SIGHUP never changes, in either mode: the
// thresholds and every other setting come from --config (the kubelet's
// configuration, read as the kubelet reads it, once at start, as the
// kubelet does) and the flags, and a running engine's grace-period timers
// and conditions depend on them.
const NotReloaded = "--config, the eviction thresholds and every flag (read at start: restart evictd to change them)"

// NewReloader returns a Reloader that logs to log.
func NewReloader(log *slog.Logger) *Reloader {
	if log == nil {
		log = slog.Default()
	}
	return &Reloader{log: log}
}

// Add registers fn under name (e.g. "workloads file /etc/evictd/w.yaml").
func (r *Reloader) Add(name string, fn func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hooks = append(r.hooks, reloadHook{name, fn})
}

// Reload runs every registered reload in order, logs a line for each that
// failed (why the old configuration is kept) and one line saying what was
// reloaded and what a SIGHUP does not reload, and returns how many failed.
func (r *Reloader) Reload() (failed int) {
	r.mu.Lock()
	hooks := append([]reloadHook(nil), r.hooks...)
	r.mu.Unlock()
	var done, bad []string
	for _, h := range hooks {
		if err := h.fn(); err != nil {
			bad = append(bad, h.name)
			r.log.Error("reload failed; keeping the running configuration", "what", h.name, "err", err)
			continue
		}
		done = append(done, h.name)
	}
	args := []any{"reloaded", orNone(done)}
	if len(bad) > 0 {
		args = append(args, "failed", strings.Join(bad, ", "))
	}
	r.log.Info("SIGHUP handled", append(args, "not_reloaded", NotReloaded)...)
	return len(bad)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "nothing (no file-based setting of this run can change while it runs)"
	}
	return strings.Join(s, ", ")
}
