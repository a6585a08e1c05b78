package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

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

// writeNodeMemory prints the node memory figures side by side, marking the
// one the decision used.
func writeNodeMemory(w io.Writer, nm *policy.NodeMemory) {
	if nm == nil {
		return
	}
	fig := func(q *resource.Quantity, none string) string {
		if q == nil {
			return none
		}
		return q.String()
	}
	base := "working set"
	if strings.HasPrefix(nm.Used, "MemAvailable") {
		base = "MemAvailable"
	}
	mark := func(name string) string {
		if name == base {
			return "\t<- decides"
		}
		return ""
	}
	fmt.Fprintln(w, "\nNode memory available")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  kubelet: capacity − working set\t%s%s\n", fig(nm.WorkingSetAvailable, "-"), mark("working set"))
	fmt.Fprintf(tw, "  kernel: MemAvailable (/proc/meminfo)\t%s%s\n", fig(nm.MemAvailable, "not read (--live or --meminfo FILE)"), mark("MemAvailable"))
	if nm.SwapAvailable != nil {
		plus := ""
		if strings.HasSuffix(nm.Used, "free swap") {
			plus = "\t<- added (swap-aware)"
		}
		fmt.Fprintf(tw, "  free swap\t%s%s\n", nm.SwapAvailable.String(), plus)
	}
	tw.Flush()
}
