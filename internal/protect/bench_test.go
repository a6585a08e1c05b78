package protect

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgroup"
	"github.com/evictd/evictd/internal/memqos"
)

// benchWorkloads is the benchmark's size: the 500 workloads.
const benchWorkloads = 500

// BenchmarkApply is the cost of keeping the values for 500 workloads, each
// with one process, per synchronize, on this host's memory hierarchy (v1
// here: oom_score_adj only; v2 in the VM adds the memory files):
//
//   - quiet: nothing changed since the last synchronize; reads/op is one
//     cgroup.procs per workload.
//   - verify: every file and process read again (once a minute,
//     DefaultVerifyEvery), still writing nothing.
func BenchmarkApply(b *testing.B) {
	root, v2 := benchRoot(b)
	var sb strings.Builder
	sb.WriteString("workloads:\n")
	for i := 0; i < benchWorkloads; i++ {
		// Half Burstable, half BestEffort: values a host without
		// CAP_SYS_RESOURCE can write.
		if i%2 == 0 {
			fmt.Fprintf(&sb, "- name: w%d\n  cgroup: w%d\n  requests: {memory: 64Mi}\n  limits: {memory: 128Mi}\n", i, i)
		}
	}
	ws := discover(b, sb.String(), root)
	if len(ws) != benchWorkloads {
		b.Fatalf("%d workloads", len(ws))
	}
	for _, mode := range []string{"quiet", "verify"} {
		b.Run(mode, func(b *testing.B) {
			now := time.Unix(0, 0)
			verify := time.Hour
			if mode == "verify" {
				verify = time.Nanosecond
			}
			var logs bytes.Buffer
			p, err := New(Config{Settings: settings(v2, memqos.ReservationTiered, factor(0.9)), Root: root,
				Log: slog.New(slog.NewTextHandler(&logs, nil)), VerifyEvery: verify, Now: func() time.Time { now = now.Add(time.Second); return now }})
			if err != nil {
				b.Fatal(err)
			}
			p.Apply(ws) // writes what differs
			before := p.Stats
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.Apply(ws)
			}
			b.StopTimer()
			b.ReportMetric(float64(p.Stats.Reads-before.Reads)/float64(b.N), "reads/op")
			b.ReportMetric(float64(p.Stats.Writes-before.Writes)/float64(b.N), "writes/op")
		})
	}
}

// benchRoot makes benchWorkloads cgroups under a new root, each with one
// sleeping process; everything is removed at the end.
func benchRoot(b *testing.B) (string, bool) {
	b.Helper()
	mem, v2 := memoryRoot(b)
	root := filepath.Join(mem, fmt.Sprintf("evictd-bench-protect-%d", os.Getpid()))
	if err := cgroup.Mkdir(root); err != nil {
		b.Fatal(err)
	}
	var cmds []*os.Process
	dirs := []string{root}
	b.Cleanup(func() {
		for _, c := range cmds {
			c.Kill()
			c.Wait()
		}
		if err := cgroup.RemoveAll(dirs, 2*time.Second); err != nil {
			b.Error(err)
		}
	})
	if v2 {
		if err := cgroup.WriteCgroupSubtreeControl(root, "memory"); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < benchWorkloads; i++ {
		dir := filepath.Join(root, fmt.Sprintf("w%d", i))
		if err := cgroup.Mkdir(dir); err != nil {
			b.Fatal(err)
		}
		dirs = append(dirs, dir)
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "600"}, &os.ProcAttr{})
		if err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, p)
		if err := cgroup.WriteCgroupProcs(dir, p.Pid); err != nil {
			b.Fatal(err)
		}
	}
	return root, v2
}
