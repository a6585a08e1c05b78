package hostmode

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/host"
	"github.com/evictd/evictd/internal/memqos"
	"github.com/evictd/evictd/internal/syncbuf"
	"github.com/evictd/evictd/internal/workload"
	"github.com/evictd/evictd/internal/workload/sandbox"
	"github.com/evictd/evictd/internal/workload/sandbox/sandboxtest"
)

// TestHostKeepsMemoryQoS: with Options.MemoryQoS the host agent's
// synchronize keeps the workloads' oom_score_adj (both versions) and, on
// cgroup v2, their memory.low; without it nothing is written.
func TestHostKeepsMemoryQoS(t *testing.T) {
	mode := sandboxtest.NeedRoot(t)
	for _, on := range []bool{true, false} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			sb := sandboxtest.New(t, 256<<20)
			web, err := sb.Child("web")
			if err != nil {
				t.Fatal(err)
			}
			batch, err := sb.Child("batch")
			if err != nil {
				t.Fatal(err)
			}
			wf, err := workload.Parse([]byte("workloads:\n- name: web\n  cgroup: web\n  requests: {memory: 1Gi}\n  limits: {memory: 2Gi}\n"), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			cfg := memoryOnly(t)
			s := memqos.DefaultSettings()
			s.ReservationPolicy = memqos.ReservationTiered
			s.MemoryCapacity, s.NodeAllocatableMemory = 8<<30, 8<<30
			opts := Options{Options: agent.Options{Policy: cfg, Log: logTo(&syncbuf.Buffer{}), Wakeups: agent.NoWakeups}, WorkloadRoot: sb.Parent.Rel, Workloads: wf}
			if on {
				opts.MemoryQoS = &s
			}
			recs := make(chan agent.Record, 10)
			opts.OnRecord = func(r agent.Record) { recs <- r }
			h, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			wh := sandboxtest.StartHog(t, "hold", web)
			bh := sandboxtest.StartHog(t, "hold", batch)
			for _, c := range []struct {
				pid int
				dir string
			}{{wh.Pid, web.Dirs()[0]}, {bh.Pid, batch.Dirs()[0]}} {
				// The hog moves itself into its cgroup after it starts.
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					pids, _ := sandbox.Procs(c.dir)
					if slices.Contains(pids, c.pid) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("hog %d never entered %s", c.pid, c.dir)
					}
				}
			}
			for _, pid := range []int{wh.Pid, bh.Pid} {
				// A known start (the test process may be at -999 after
				// another test's Start); raising needs no capability.
				if err := host.WriteOOMScoreAdj("/proc", pid, 0); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan struct{})
			go func() { h.Run(ctx); close(done) }()
			select {
			case <-recs:
			case <-ctx.Done():
				t.Fatal("no synchronize within 60 s")
			}
			cancel()
			<-done
			wantWeb, wantBatch := "875", "1000"
			if !on {
				wantWeb, wantBatch = "0", "0"
			}
			if got := readTrim(t, "/proc/"+strconv.Itoa(wh.Pid)+"/oom_score_adj"); got != wantWeb {
				t.Errorf("web (Burstable 1Gi of 8Gi): oom_score_adj %s, want %s", got, wantWeb)
			}
			if got := readTrim(t, "/proc/"+strconv.Itoa(bh.Pid)+"/oom_score_adj"); got != wantBatch {
				t.Errorf("batch (BestEffort): oom_score_adj %s, want %s", got, wantBatch)
			}
			if mode.String() == "v2" {
				want := "0"
				if on {
					want = strconv.Itoa(1 << 30)
				}
				if got := readTrim(t, web.Dirs()[0]+"/memory.low"); got != want {
					t.Errorf("web memory.low %s, want %s", got, want)
				}
			}
		})
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
