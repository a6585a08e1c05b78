package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/evictd/evictd/internal/agent"
)

// reloadOnSIGHUP runs r's reloads on every SIGHUP until stop is called.
// Without it SIGHUP would end the agent with no cleanup (exit 129).
func reloadOnSIGHUP(r *agent.Reloader) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				r.Reload()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}
