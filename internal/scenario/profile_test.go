package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/policy"
)

// profileCases are the profile scenarios of the shared corpus
// (testdata/scenarios/profile-*.yaml): each is an ordinary scenario, so the
// parity tier has the kubelet decide it (its .kubelet.json) and
// TestScenariosMatchKubelet holds evictd's kubelet profile to that. Here the
// same scenario runs with the one behaviour it is about, and must come out
// different from every kubelet outcome, the way its header says (the
// evictions listed here), and as reviewed (testdata/profile/<name>.json).
var profileCases = []struct {
	name      string
	behaviour string
	// kubelet: what the kubelet evicts (checked against its outcomes, so a
	// scenario that stopped showing the kubelet's bad outcome fails);
	// profile: what evictd evicts with the behaviour on.
	kubelet, profile []string
	// reclaim: the node-level reclaim the profile runs at each step.
	reclaim []string
}{
	{name: "profile-loop-breaker", behaviour: "loop-breaker",
		kubelet: []string{"0s kube-system/node-agent-x7k2p", "30s kube-system/node-agent-m4q9t", "1m0s kube-system/node-agent-c8w3z"},
		profile: []string{"0s kube-system/node-agent-x7k2p", "30s kube-system/node-agent-m4q9t", "1m0s default/batch-hog"}},
	{name: "profile-memavailable", behaviour: "memavailable",
		kubelet: []string{"0s default/cache-heavy", "10s default/api"},
		profile: nil},
	{name: "profile-reclaim-first", behaviour: "reclaim-first",
		kubelet: []string{"0s default/cache-heavy", "10s default/api"},
		profile: nil, reclaim: []string{"0s memoryReclaim", "10s memoryReclaim"}},
	{name: "profile-swap-aware", behaviour: "swap-aware",
		kubelet: []string{"0s default/steady", "30s default/swapper"},
		profile: []string{"30s default/swapper"}},
}

func evictedList(o parityOutcome) []string {
	var out []string
	for _, s := range o.Steps {
		for _, e := range s.Evicted {
			out = append(out, s.At+" "+e.Namespace+"/"+e.Name)
		}
	}
	return out
}

func reclaimList(o parityOutcome) []string {
	var out []string
	for _, s := range o.Steps {
		for _, r := range s.NodeReclaim {
			out = append(out, s.At+" "+r)
		}
	}
	return out
}

func TestProfileScenarios(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range profileCases {
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(scenarioDir, c.name+".yaml")
			s, err := LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			prof, err := policy.ParseProfile(c.behaviour)
			if err != nil {
				t.Fatal(err)
			}

			// The kubelet profile does what the kubelet does: the bad outcome.
			kres, err := Run(s, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := evictedList(project(kres)); !slices.Equal(got, c.kubelet) {
				t.Errorf("kubelet profile evicts %q, the scenario says the kubelet evicts %q", got, c.kubelet)
			}

			res, err := Run(s, RunOptions{Profile: prof})
			if err != nil {
				t.Fatal(err)
			}
			got := project(res)
			if ev := evictedList(got); !slices.Equal(ev, c.profile) {
				t.Errorf("profile %s evicts %q, want %q", c.behaviour, ev, c.profile)
			}
			if rc := reclaimList(got); !slices.Equal(rc, c.reclaim) {
				t.Errorf("profile %s runs node-level reclaim %q, want %q", c.behaviour, rc, c.reclaim)
			}

			// Different from everything the real kubelet does with it.
			oracle := filepath.Join(scenarioDir, c.name+".kubelet.json")
			data, err := os.ReadFile(oracle)
			if err != nil {
				t.Fatalf("%v (scripts/test-parity.sh -update writes the kubelet's outcomes)", err)
			}
			var kr kubeletResult
			if err := json.Unmarshal(data, &kr); err != nil {
				t.Fatalf("%s: %v", oracle, err)
			}
			if len(kr.Outcomes) == 0 {
				t.Fatalf("%s: no outcomes", oracle)
			}
			for i, o := range kr.Outcomes {
				if bytes.Equal(encode(t, got), encode(t, o)) {
					t.Errorf("profile %s decides exactly as the kubelet's outcome %d", c.behaviour, i)
				}
				if ev := evictedList(o); !slices.Equal(ev, c.kubelet) {
					t.Errorf("the kubelet's outcome %d evicts %q, the scenario says %q", i, ev, c.kubelet)
				}
			}

			golden := filepath.Join("testdata", "profile", c.name+".json")
			full := encode(t, res)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, full, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if want, err := os.ReadFile(golden); errors.Is(err, os.ErrNotExist) {
				t.Errorf("no reviewed golden %s: run go test ./internal/scenario -run TestProfileScenarios -update and review it", golden)
			} else if err != nil {
				t.Fatal(err)
			} else if !bytes.Equal(full, want) {
				t.Errorf("output differs from reviewed golden %s (run with -update and review the diff):\n%s", golden, full)
			}
		})
	}
	// Every profile scenario of the corpus is checked here.
	files, _ := filepath.Glob(filepath.Join(scenarioDir, "profile-*.yaml"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); !seen[name] {
			t.Errorf("%s has no entry in profileCases", f)
		}
	}
}
