package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/load"
)

const minimal = `
kubeletConfig:
  evictionHard: {memory.available: 1Gi}
steps:
- at: 0s
  summary:
    node:
      nodeName: node-1
      memory: {time: "2026-01-01T00:00:00Z", availableBytes: 536870912, workingSetBytes: 7516192768}
    pods:
    - podRef: {name: a, namespace: default, uid: ua}
      memory: {workingSetBytes: 104857600}
  pods:
    kind: PodList
    apiVersion: v1
    items:
    - metadata: {name: a, namespace: default, uid: ua}
      spec: {containers: [{name: c}]}
- at: 10s
  summary:
    node:
      nodeName: node-1
      memory: {time: "2026-01-01T00:00:10Z", availableBytes: 536870912, workingSetBytes: 7516192768}
`

func TestParseAndRun(t *testing.T) {
	s, err := Parse([]byte(minimal), "minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 2 || len(s.Steps[1].Pods) != 1 {
		t.Fatalf("steps %d, pods carried over %d", len(s.Steps), len(s.Steps[1].Pods))
	}
	res, err := Run(s, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps[0].Evicted) != 1 || res.Steps[0].Evicted[0].Name != "a" || res.Steps[0].Evicted[0].GracePeriodSeconds != 1 {
		t.Fatalf("step 0: %+v", res.Steps[0])
	}
	// the evicted pod is gone from the carried-over pods of step 1
	if len(res.Steps[1].Evicted) != 0 || res.Steps[1].At != "10s" {
		t.Fatalf("step 1: %+v", res.Steps[1])
	}
	if res.Steps[1].NodeReclaim == nil || res.Steps[1].Evicted == nil {
		t.Fatal("empty lists must be [] in JSON, not null")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"unknown top-level field", "kubeletConfig: {}\nstep: []\n", `x.yaml: step: unknown field`},
		{"unknown step field", strings.Replace(minimal, "- at: 10s", "- at: 10s\n  pod: {}", 1), `x.yaml: steps[1].pod: unknown field`},
		{"missing at", strings.Replace(minimal, "- at: 10s\n  summary:", "- summary:", 1), `x.yaml: steps[1].at: required field missing`},
		{"bad duration", strings.Replace(minimal, "at: 10s", "at: ten", 1), `x.yaml: steps[1].at: "ten": not a Go duration`},
		{"time going backwards", strings.Replace(minimal, "at: 10s", "at: -1s", 1), `steps[1].at: "-1s"`},
		{"pods missing in step 0", strings.Replace(minimal, "  pods:\n    kind: PodList", "  podz:\n    kind: PodList", 1), `steps[0].podz: unknown field`},
		{"no steps", "kubeletConfig: {}\n", "x.yaml: steps: required field missing"},
		{"no kubeletConfig", "steps: []\n", "x.yaml: kubeletConfig: required field missing"},
		{"bad quantity in an embedded summary", strings.Replace(minimal, "availableBytes: 536870912,", "availableBytes: lots,", 1), `x.yaml: steps[0].summary.node.memory.availableBytes: "lots"`},
		{"unknown field in embedded config", strings.Replace(minimal, "evictionHard:", "evictionHrad:", 1), `x.yaml: kubeletConfig.evictionHrad: unknown field`},
		{"unknown filesystems field", "filesystems: {dedicatedImagefs: true}\n" + minimal, `x.yaml: filesystems.dedicatedImagefs: unknown field`},
		{"wrong type", "kubeletConfig: {}\nsteps: 3\n", `x.yaml: steps:`},
		{"missing referenced file", strings.Replace(minimal, "kubeletConfig:\n  evictionHard: {memory.available: 1Gi}", "kubeletConfig: nowhere.yaml", 1), "nowhere.yaml"},
		{"empty", "  \n", "x.yaml: file is empty"},
		{"duplicate key in the embedded config", strings.Replace(minimal, "evictionHard: {memory.available: 1Gi}", "evictionHard: {memory.available: 1Gi}\n  evictionHard: {memory.available: 2Gi}", 1), `x.yaml: kubeletConfig.evictionHard: "evictionHard": duplicate key (lines 3 and 4)`},
		{"duplicate step key", strings.Replace(minimal, "- at: 10s", "- at: 10s\n  at: 20s", 1), `x.yaml: steps[1].at: "at": duplicate key`},
		{"duplicate key in JSON", `{"kubeletConfig":{},"steps":[{"at":"0s","at":"1s","summary":{},"pods":[]}]}`, `x.yaml: steps[0].at: duplicate key`},
		{"unknown field in JSON", `{"kubeletConfig":{},"steps":[],"Steps":[]}`, `x.yaml: Steps: unknown field`},
		{"a second document", minimal + "---\nsteps: []\n", `x.yaml: more than one YAML document`},
		{"the wrong file", "user: admin\npassword: hunter2\n", `x.yaml: none of its keys is a field`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// A scenario cut mid-line is refused, and a summary naming a file of the
// wrong kind does not echo that file's content.
func TestLoadFileRefusesCutAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	cut := minimal[:strings.Index(minimal, "- metadata: {name: a")+len("- metadata: {name: a")]
	if err := os.WriteFile(p, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(p); !errors.Is(err, load.ErrTruncated) {
		t.Fatalf("cut file: err = %v", err)
	}
	secret := filepath.Join(dir, "shadow")
	if err := os.WriteFile(secret, []byte("root:$y$j9T$s3cr3t:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	block := minimal[strings.Index(minimal, "  summary:\n"):strings.Index(minimal, "  pods:\n    kind")]
	doc := strings.Replace(minimal, block, "  summary: "+secret+"\n", 1)
	_, err := Parse([]byte(doc), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "x.yaml: steps[0].summary: "+secret) || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "root") {
		t.Fatalf("err = %v", err)
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "inputs")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("inputs/kc.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {memory.available: 1Gi}\n")
	write("inputs/summary.json", `{"node":{"nodeName":"n","memory":{"availableBytes":536870912,"workingSetBytes":7516192768}}}`)
	write("inputs/pods.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"default","uid":"ua"},"spec":{"containers":[{"name":"c"}]}}`)
	write("s.yaml", "kubeletConfig: inputs/kc.yaml\nsteps:\n- at: 0s\n  summary: inputs/summary.json\n  pods: inputs/pods.json\n  afterReclaim: inputs/summary.json\n")
	s, err := LoadFile(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.KubeletConfig.EvictionHard["memory.available"] != "1Gi" || len(s.Steps[0].Pods) != 1 || s.Steps[0].AfterReclaim == nil {
		t.Fatalf("referenced files not loaded: %+v", s)
	}
	write("bad.yaml", "kubeletConfig: inputs/kc.yaml\nsteps:\n- at: 0s\n  summary: inputs/pods.json\n  pods: inputs/pods.json\n")
	_, err = LoadFile(filepath.Join(dir, "bad.yaml"))
	var le *load.Error
	if err == nil || !errors.As(err, &le) || !strings.Contains(err.Error(), "steps[0].summary") || !strings.Contains(err.Error(), "pods.json") {
		t.Fatalf("a Pod given as summary: err = %v, want the scenario field and the referenced file named", err)
	}
}

// FuzzParse: the loader never panics, and whatever it accepts runs through
// the engine without panicking. Seeds: testdata/fuzz/FuzzParse and the
// scenario corpus.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("kubeletConfig: {}\nsteps: [{at: 0s, summary: {node: {}}, pods: []}]\n"))
	f.Add([]byte(`{"kubeletConfig":{"evictionSoft":{"memory.available":"1Gi"}},"steps":[{"at":"0s","summary":{"node":{}},"pods":{"items":[]}}]}`))
	if files, _ := filepath.Glob(filepath.Join(scenarioDir, "*.yaml")); len(files) > 0 {
		for _, p := range files[:min(len(files), 8)] {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// name "" would resolve paths against the working directory; use a
		// directory that holds nothing a fuzzer could name.
		s, err := Parse(data, filepath.Join(t.TempDir(), "fuzz.yaml"))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if len(s.Steps) > 50 {
			return // keep each input cheap
		}
		_, _ = Run(s, RunOptions{Verbose: true})
	})
}
