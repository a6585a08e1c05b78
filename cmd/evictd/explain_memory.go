package main

import (
	"context"
	"fmt"
	"time"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/policy"
)

// explainMeminfo reads the /proc/meminfo figures explain shows beside the
// kubelet's memory.available: a saved copy (--meminfo), this node's with
// --live, or none.
func explainMeminfo(path string, live bool, procRoot string) (*policy.HostMemory, error) {
	switch {
	case path != "":
		mi, err := host.ReadMeminfoFile(path)
		if err != nil {
			return nil, fmt.Errorf("--meminfo %s: %w", path, err)
		}
		// A saved copy has no time of its own: the Summary's is used.
		return agent.HostMemoryOf(mi, path, time.Time{})
	case live:
		return agent.ProcMeminfo{ProcRoot: procRoot}.HostMemory(context.Background())
	}
	return nil, nil
}
