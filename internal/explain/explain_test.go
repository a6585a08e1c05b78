package explain

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/evictd/evictd/internal/kubeletconfig"
	"github.com/evictd/evictd/internal/load"
	"github.com/evictd/evictd/internal/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt and *.json from the current output")

// The report of five scenarios of the parity corpus (testdata/scenarios,
// their first step), as table and JSON, against goldens that the explain
// of cmd/evictd wrote before the report moved here (checked with the old
// binary, run in this directory on the same files): split filesystems with
// the node-level reclaim assumed to free nothing and a wrapped message, a
// soft threshold in its grace period, PID ranking, critical pods skipped,
// pods without stats.
func TestReportGoldens(t *testing.T) {
	for _, c := range []struct {
		name string
		fs   policy.Filesystems
	}{
		{"disk-pressure-verify-pod-status-split", policy.Filesystems{DedicatedImageFs: true, SplitContainerFs: true}},
		{"soft-threshold-grace-restarts", policy.Filesystems{}},
		{"pid-available-negative", policy.Filesystems{}},
		{"static-critical-pods-not-evicted", policy.Filesystems{}},
		{"pods-without-stats", policy.Filesystems{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", c.name)
			kc, err := kubeletconfig.Read(kubeletconfig.Source{File: filepath.Join(dir, "kc.json")})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := kc.Policy()
			if err != nil {
				t.Fatal(err)
			}
			eng, err := policy.NewEngine(cfg, c.fs)
			if err != nil {
				t.Fatal(err)
			}
			summary, err := load.SummaryFile(filepath.Join(dir, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			pods, err := load.PodsFile(filepath.Join(dir, "pods.json"))
			if err != nil {
				t.Fatal(err)
			}
			rep := Explain(eng, Input{Config: kc.Describe(), Summary: summary, Pods: pods})
			var table, js bytes.Buffer
			rep.WriteTable(&table)
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			for _, g := range []struct {
				path string
				got  []byte
			}{{dir + ".txt", table.Bytes()}, {dir + ".json", js.Bytes()}} {
				if *update {
					if err := os.WriteFile(g.path, g.got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(g.path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(g.got, want) {
					t.Errorf("differs from %s:\n%s\nwant:\n%s", g.path, g.got, want)
				}
			}
		})
	}
}
