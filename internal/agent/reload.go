package agent

import (
	"log/slog"
	"sync"
)

// Reloader runs the reloads asked for with SIGHUP. Each consumer (host
// mode's workloads file, hostmode.Pods.ReloadWorkloadsFile; other
// settings read from files may add theirs)
// registers a function that reads its file again and applies it only when
// the whole file is valid: a bad file is logged and the running
// configuration kept, so nothing is ever half-applied.
type Reloader struct {
	log   *slog.Logger
	mu    sync.Mutex
	hooks []reloadHook
}

type reloadHook struct {
	name string
	fn   func() error
}

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

// Reload runs every registered reload in order, logs one line for each (its
// success or why the old configuration is kept), and returns how many
// failed.
func (r *Reloader) Reload() (failed int) {
	r.mu.Lock()
	hooks := append([]reloadHook(nil), r.hooks...)
	r.mu.Unlock()
	if len(hooks) == 0 {
		r.log.Info("SIGHUP: nothing to reload (no file-based settings that can change while running)")
	}
	for _, h := range hooks {
		if err := h.fn(); err != nil {
			failed++
			r.log.Error("reload failed; keeping the running configuration", "what", h.name, "err", err)
			continue
		}
		r.log.Info("reloaded", "what", h.name)
	}
	return failed
}
