package actuate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"
)

// DefaultHookTimeout bounds a reclaim hook that does not set its own.
const DefaultHookTimeout = 30 * time.Second

// maxHookOutput is how much of a hook's output is kept for the log.
const maxHookOutput = 4096

// Hook is a node-level reclaim command for one signal (for example an image
// prune for imagefs.available), the host-mode stand-in for the kubelet's
// image and container garbage collection.
type Hook struct {
	Signal  string        `json:"signal"`
	Command []string      `json:"command"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// HookResult is the outcome of one hook.
type HookResult struct {
	Hook    Hook
	Output  string // combined output, truncated
	Err     error
	Elapsed time.Duration
	DryRun  bool
}

// Hooks runs the reclaim hooks configured for a signal.
type Hooks struct {
	BySignal map[string][]Hook
	DryRun   bool
	Log      *slog.Logger
}

// Has reports whether any hook is configured for signal.
func (h *Hooks) Has(signal string) bool { return h != nil && len(h.BySignal[signal]) > 0 }

// Run runs every hook for signal in order, each under its timeout. A failing
// hook is logged and does not stop the others, as the kubelet logs a failing
// reclaim function and goes on.
func (h *Hooks) Run(ctx context.Context, signal string) []HookResult {
	if h == nil {
		return nil
	}
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	var out []HookResult
	for _, hk := range h.BySignal[signal] {
		r := HookResult{Hook: hk, DryRun: h.DryRun}
		if h.DryRun {
			log.Info("dry run: would run reclaim hook", "signal", signal, "command", hk.Command)
			out = append(out, r)
			continue
		}
		r = runHook(ctx, hk)
		if r.Err != nil {
			log.Warn("reclaim hook failed", "signal", signal, "command", hk.Command, "elapsed", r.Elapsed, "err", r.Err, "output", r.Output)
		} else {
			log.Info("reclaim hook ran", "signal", signal, "command", hk.Command, "elapsed", r.Elapsed)
		}
		out = append(out, r)
	}
	return out
}

func runHook(ctx context.Context, hk Hook) HookResult {
	r := HookResult{Hook: hk}
	if len(hk.Command) == 0 {
		r.Err = errors.New("empty command")
		return r
	}
	timeout := hk.Timeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, hk.Command[0], hk.Command[1:]...)
	var buf bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &buf, n: maxHookOutput}
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = time.Second // do not hang on a grandchild holding the pipe
	start := time.Now()
	err := cmd.Run()
	r.Elapsed = time.Since(start)
	r.Output = strings.TrimSpace(buf.String())
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s: %w", timeout, ctx.Err())
	}
	r.Err = err
	return r
}

type limitedWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
