package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite evictd's golden outputs in testdata/golden for review")

// scenarioDir holds the shared scenario corpus; the parity engineer adds each
// scenario's kubelet outcomes next to it as <name>.kubelet.json.
const scenarioDir = "../../testdata/scenarios"

// ownScenarioDir holds this package's own scenarios (quirks the shared corpus
// does not cover), with kubelet outcomes from the same oracle.
const ownScenarioDir = "testdata/scenarios"

// kubeletResult is the content of a <name>.kubelet.json file: every distinct
// outcome the upstream kubelet produced for the scenario.
type kubeletResult struct {
	Outcomes []parityOutcome `json:"outcomes"`
}

// parityOutcome is the part of "evictd simulate -o json" parity is judged on.
type parityOutcome struct {
	Steps []parityStep `json:"steps"`
}

type parityStep struct {
	At             string    `json:"at"`
	NodeConditions []string  `json:"nodeConditions"`
	Evicted        []Evicted `json:"evicted"`
	NodeReclaim    []string  `json:"nodeReclaim"`
}

func project(r *Result) parityOutcome {
	var o parityOutcome
	for _, s := range r.Steps {
		ps := parityStep{At: s.At, NodeConditions: []string{}, Evicted: s.Evicted, NodeReclaim: s.NodeReclaim}
		for _, c := range s.NodeConditions {
			ps.NodeConditions = append(ps.NodeConditions, string(c))
		}
		o.Steps = append(o.Steps, ps)
	}
	return o
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func scenarioFiles(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat(scenarioDir); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s does not exist (the shared scenario corpus is not checked out)", scenarioDir)
	}
	var files []string
	for _, dir := range []string{scenarioDir, ownScenarioDir} {
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(dir, pat))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", scenarioDir)
	}
	return files
}

// TestScenariosMatchKubelet runs every scenario through the engine and
// requires the result to be one of the upstream kubelet's outcomes for it.
// It also compares with evictd's reviewed golden output (testdata/golden),
// which -update rewrites.
func TestScenariosMatchKubelet(t *testing.T) {
	withOracle := 0
	for _, path := range scenarioFiles(t) {
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		t.Run(name, func(t *testing.T) {
			s, err := LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(s, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := encode(t, project(res))

			golden := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.WriteFile(golden, encode(t, res), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if want, err := os.ReadFile(golden); errors.Is(err, os.ErrNotExist) {
				// A scenario without reviewed output is not yet tested:
				// write it with -update and review it before it counts.
				t.Errorf("no reviewed golden %s: run go test ./internal/scenario -run TestScenariosMatchKubelet -update and review the new file", golden)
			} else if err != nil {
				t.Fatal(err)
			} else if full := encode(t, res); !bytes.Equal(full, want) {
				t.Errorf("output differs from reviewed golden %s (run with -update and review the diff):\n%s", golden, full)
			}

			oraclePath := filepath.Join(filepath.Dir(path), name+".kubelet.json")
			data, err := os.ReadFile(oraclePath)
			if errors.Is(err, os.ErrNotExist) {
				t.Skipf("no kubelet outcomes yet (%s): run scripts/test-parity.sh to generate them", oraclePath)
			}
			if err != nil {
				t.Fatal(err)
			}
			withOracle++
			var kr kubeletResult
			if err := json.Unmarshal(data, &kr); err != nil {
				t.Fatalf("%s: %v", oraclePath, err)
			}
			if len(kr.Outcomes) == 0 {
				t.Fatalf("%s: no outcomes", oraclePath)
			}
			for _, o := range kr.Outcomes {
				if bytes.Equal(got, encode(t, o)) {
					return
				}
			}
			t.Errorf("evictd's outcome is none of the kubelet's %d outcome(s)\nevictd:\n%s\nkubelet (first):\n%s",
				len(kr.Outcomes), got, encode(t, kr.Outcomes[0]))
		})
	}
	t.Logf("%d scenario(s) compared with kubelet outcomes", withOracle)
}
