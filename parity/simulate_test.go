package parity_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/parity/internal/oracle"
)

// evictdBin is the main module's evictd binary, built by
// scripts/test-parity.sh; empty when `evictd simulate` does not exist yet.
var evictdBin = os.Getenv("EVICTD_BIN")

// simulated is the part of `evictd simulate -o json` that parity is judged on.
type simulated struct {
	Steps []struct {
		At             string            `json:"at"`
		NodeConditions []string          `json:"nodeConditions"`
		Evicted        []oracle.Eviction `json:"evicted"`
		NodeReclaim    []string          `json:"nodeReclaim"`
	} `json:"steps"`
}

// simulate runs `evictd simulate` on a scenario and returns its outcome in
// the oracle's shape, with every "at" normalised to time.Duration.String().
func simulate(scenarioPath string) (*oracle.Outcome, []byte, error) {
	cmd := exec.Command(evictdBin, "simulate", "--scenario", scenarioPath, "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return nil, stdout.Bytes(), fmt.Errorf("evictd simulate --scenario %s: %v: %s", scenarioPath, err, strings.TrimSpace(stderr.String()))
	}
	var s simulated
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		return nil, stdout.Bytes(), fmt.Errorf("evictd simulate --scenario %s: output is not the simulate JSON: %v", scenarioPath, err)
	}
	out := &oracle.Outcome{}
	for i, st := range s.Steps {
		at, err := time.ParseDuration(st.At)
		if err != nil {
			return nil, stdout.Bytes(), fmt.Errorf("steps[%d].at: %q: %v", i, st.At, err)
		}
		out.Steps = append(out.Steps, oracle.StepResult{
			At: at.String(), NodeConditions: st.NodeConditions, Evicted: st.Evicted, NodeReclaim: st.NodeReclaim,
		})
	}
	return out, stdout.Bytes(), nil
}

// judge says whether got is one of the kubelet's outcomes; if not, it
// explains where it departs from the closest one.
func judge(got *oracle.Outcome, res *oracle.Result) (bool, string) {
	g := canonical(got)
	best, bestStep := "", -1
	for _, o := range res.Outcomes {
		if canonical(&o) == g {
			return true, ""
		}
		// the outcome that agrees for the most steps explains the mismatch best
		n := 0
		for n < len(o.Steps) && n < len(got.Steps) && stepJSON(o.Steps[n]) == stepJSON(got.Steps[n]) {
			n++
		}
		if n > bestStep {
			bestStep = n
			best = explain(got, &o, n)
		}
	}
	return false, fmt.Sprintf("evictd's outcome is none of the kubelet's %d; closest:\n%s", len(res.Outcomes), best)
}

func explain(got, want *oracle.Outcome, i int) string {
	if i >= len(want.Steps) || i >= len(got.Steps) {
		return fmt.Sprintf("  kubelet has %d steps, evictd %d", len(want.Steps), len(got.Steps))
	}
	return fmt.Sprintf("  step %d (at %s):\n    kubelet: %s\n    evictd:  %s", i, want.Steps[i].At, stepJSON(want.Steps[i]), stepJSON(got.Steps[i]))
}

// canonical encodes an outcome with nil and empty lists alike, so that a
// missing list and an empty one compare equal only where the format allows
// it ("evicted" and "nodeReclaim" must be present but may be empty).
func canonical(o *oracle.Outcome) string {
	var b strings.Builder
	for _, s := range o.Steps {
		b.WriteString(stepJSON(s))
		b.WriteByte('\n')
	}
	return b.String()
}

func stepJSON(s oracle.StepResult) string {
	norm := s
	if norm.NodeConditions == nil {
		norm.NodeConditions = []string{}
	}
	if norm.Evicted == nil {
		norm.Evicted = []oracle.Eviction{}
	}
	if norm.NodeReclaim == nil {
		norm.NodeReclaim = []string{}
	}
	b, _ := json.Marshal(norm)
	return string(b)
}

// TestSimulateMatchesKubelet runs `evictd simulate` on every scenario and
// requires its outcome to be one of the kubelet's committed outcomes.
func TestSimulateMatchesKubelet(t *testing.T) {
	if evictdBin == "" {
		t.Skip("EVICTD_BIN unset: run scripts/test-parity.sh, which builds evictd (a failed build fails the tier) and sets it")
	}
	bad := 0
	files := scenarioFiles(t)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(oracle.ResultPath(file))
			if err != nil {
				t.Fatal(err)
			}
			var res oracle.Result
			if err := json.Unmarshal(data, &res); err != nil {
				t.Fatal(err)
			}
			got, raw, err := simulate(file)
			if err != nil {
				bad++
				t.Fatalf("%v\noutput: %s", err, raw)
			}
			if ok, why := judge(got, &res); !ok {
				bad++
				t.Errorf("%s: %s", file, why)
			}
		})
	}
	t.Logf("evictd simulate matches the kubelet on %d of %d scenarios", len(files)-bad, len(files))
}
