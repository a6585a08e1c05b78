package parity_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/parity/internal/oracle"
	"github.com/evictd/evictd/parity/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite testdata/scenarios/*.kubelet.json from the upstream kubelet")

// corpusDir is the shared scenario corpus of the main module.
const corpusDir = "../testdata/scenarios"

func scenarioFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", corpusDir)
	}
	return files
}

// TestCorpus re-runs the upstream kubelet eviction manager on every scenario
// and checks the committed <name>.kubelet.json still says what it does.
func TestCorpus(t *testing.T) {
	multi := 0
	for _, file := range scenarioFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			s, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			res, err := oracle.Run(s, oracle.DefaultRuns)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Outcomes) > 1 {
				multi++
			}
			got, err := oracle.Encode(res)
			if err != nil {
				t.Fatal(err)
			}
			path := oracle.ResultPath(file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run scripts/test-parity.sh -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the kubelet's outcomes differ from %s (scripts/test-parity.sh -update rewrites it):\n%s",
					path, lineDiff(string(want), string(got)))
			}
		})
	}
	t.Logf("%d scenarios have more than one kubelet outcome", multi)
}

// lineDiff is a small line-oriented diff: enough to point at the change.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	j, k := len(w)-1, len(g)-1
	for j >= i && k >= i && w[j] == g[k] {
		j--
		k--
	}
	from := max(i-3, 0)
	for _, l := range w[from:i] {
		b.WriteString("  " + l + "\n")
	}
	for _, l := range w[i : j+1] {
		b.WriteString("- " + l + "\n")
	}
	for _, l := range g[i : k+1] {
		b.WriteString("+ " + l + "\n")
	}
	return b.String()
}
