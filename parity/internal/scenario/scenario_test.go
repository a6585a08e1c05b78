package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const summary = `{"node":{"nodeName":"n","memory":{"availableBytes":1,"workingSetBytes":1}}}`

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The corpus relies on these forms: pods as a PodList, a list or one Pod,
// inline or by relative path; carried over when absent.
func TestLoadForms(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pods.yaml", "- metadata: {name: a, namespace: x}\n- metadata: {name: b, namespace: x}\n")
	write(t, dir, "kc.yaml", "evictionHard: {memory.available: 1Gi}\n")
	p := write(t, dir, "s.yaml", `kubeletConfig: kc.yaml
steps:
- at: 0s
  summary: `+summary+`
  pods: pods.yaml
- at: 1m
  summary: `+summary+`
- at: 2m
  summary: `+summary+`
  pods: {kind: PodList, items: [{metadata: {name: c}}]}
- at: 3m
  summary: `+summary+`
  pods: {metadata: {name: d}}
  afterReclaim: `+summary+`
`)
	s, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	got := []int{len(s.Steps[0].Pods), len(s.Steps[1].Pods), len(s.Steps[2].Pods), len(s.Steps[3].Pods)}
	if got[0] != 2 || got[1] != 2 || got[2] != 1 || got[3] != 1 || s.Steps[3].Pods[0].Name != "d" {
		t.Errorf("pods per step = %v (want 2 2 1 1, last d)", got)
	}
	if s.Steps[1].At.String() != "1m0s" || s.Steps[3].AfterReclaim == nil || s.Steps[0].AfterReclaim != nil {
		t.Errorf("steps decoded wrong: at=%v afterReclaim=%v/%v", s.Steps[1].At, s.Steps[3].AfterReclaim, s.Steps[0].AfterReclaim)
	}
	if !strings.Contains(string(s.KubeletConfig), `"kind":"KubeletConfiguration"`) {
		t.Errorf("kubeletConfig lacks the filled-in kind: %s", s.KubeletConfig)
	}
}

// A typo in a corpus file must fail loudly, naming the file and the field,
// rather than silently producing a different scenario.
func TestLoadErrors(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"unknown top field":   {"kubeletConfig: {}\nstep: []\n", `unknown field "step"`},
		"no steps":            {"kubeletConfig: {}\nsteps: []\n", "steps: at least one step"},
		"no kubeletConfig":    {"steps: [{at: 0s, summary: " + summary + ", pods: []}]\n", "kubeletConfig: required"},
		"bad at":              {"kubeletConfig: {}\nsteps: [{at: soon, summary: " + summary + ", pods: []}]\n", `steps[0].at: "soon"`},
		"no pods first":       {"kubeletConfig: {}\nsteps: [{at: 0s, summary: " + summary + "}]\n", "steps[0].pods: required"},
		"no summary":          {"kubeletConfig: {}\nsteps: [{at: 0s, pods: []}]\n", "steps[0].summary: required"},
		"time goes back":      {"kubeletConfig: {}\nsteps: [{at: 1m, summary: " + summary + ", pods: []}, {at: 0s, summary: " + summary + "}]\n", "steps[1].at: 0s is before"},
		"summary typo":        {"kubeletConfig: {}\nsteps: [{at: 0s, summary: {node: {memroy: {}}}, pods: []}]\n", `steps[0].summary: error unmarshaling JSON: while decoding JSON: json: unknown field "memroy"`},
		"missing pods file":   {"kubeletConfig: {}\nsteps: [{at: 0s, summary: " + summary + ", pods: nope.yaml}]\n", "steps[0].pods: open"},
		"pod with bad fields": {"kubeletConfig: {}\nsteps: [{at: 0s, summary: " + summary + ", pods: [{spec: {priorty: 1}}]}]\n", `steps[0].pods: error unmarshaling JSON: while decoding JSON: json: unknown field "priorty"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := write(t, t.TempDir(), "s.yaml", c.body)
			_, err := Load(p)
			if err == nil {
				t.Fatalf("Load accepted it")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q should name %s and contain %q", err, p, c.want)
			}
		})
	}
}
