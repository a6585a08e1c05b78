package agent

import (
	"log/slog"

	"github.com/evictd/evictd/internal/host"
)

// ReleaseStartupPages returns an Observed hook (Config.Observed) with which
// the process lets go of the pages of its own binary that start-up mapped
// (host.ReleaseExecutablePages): most of an idle agent's RSS, though it
// runs little of that code again. evictd run sets it (unless
// --release-startup-pages=false), and so do the trials of the demo, the
// self-test and bench/latency, so that the first eviction pays there what
// it pays in evictd run: the minor faults that map its code back. A
// failure changes nothing but the RSS, so it is a warning.
func ReleaseStartupPages(log *slog.Logger) func() {
	return func() {
		n, err := host.ReleaseExecutablePages("/proc")
		if err != nil {
			log.Warn("could not release the binary's start-up pages (the RSS stays higher; nothing else changes)", "err", err)
			return
		}
		log.Debug("released the binary's start-up pages", "bytes", n)
	}
}
