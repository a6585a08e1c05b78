package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/cli"
)

// explain decides with the thresholds the kubelet runs with, whichever
// shape they come in: the node at 1500Mi available has no eviction under
// the kubelet's default 100Mi, and one under the node's real 2Gi — given as
// a /configz dump, or as a config file whose drop-in sets it.
func TestExplainWithTheNodesRealThresholds(t *testing.T) {
	dir := writeInputs(t, map[string]string{
		"summary.json": explainSummary, "pods.json": explainPods,
		"configz.json": `{"kubeletconfig":{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1",` +
			`"evictionHard":{"memory.available":"2Gi","nodefs.available":"10%"},"evictionPressureTransitionPeriod":"5m0s","syncFrequency":"1m0s"}}`,
		"config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
	})
	dropins := filepath.Join(dir, "kubelet.conf.d")
	if err := os.Mkdir(dropins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropins, "10-memory.conf"),
		[]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {memory.available: 2Gi}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	inputs := []string{"--summary", p("summary.json"), "--pods", p("pods.json")}
	for name, c := range map[string]struct {
		args   []string
		config string
	}{
		"configz":  {[]string{"--config", p("configz.json")}, p("configz.json") + " (/configz)"},
		"drop-ins": {[]string{"--config", p("config.yaml"), "--config-dir", dropins}, p("config.yaml") + " + " + dropins + " (1 drop-in)"},
	} {
		out, errOut, code := runCmd(append(append([]string{"explain"}, c.args...), inputs...)...)
		if code != cli.ExitOK || errOut != "" {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		for _, want := range []string{"Config: " + c.config + ";", "Evicted: default/above", "Threshold quantity: 2Gi"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", name, want, out)
			}
		}
	}
	// Without them, the kubelet's defaults: nothing evicted.
	out, _, _ := runCmd(append([]string{"explain", "--config", p("config.yaml")}, inputs...)...)
	if !strings.Contains(out, "Evicted: none") {
		t.Errorf("the file alone evicts:\n%s", out)
	}
}

// A file that is no kubelet configuration is refused, never read as the
// kubelet's defaults: a /configz dump spelled wrong, a file of another kind.
func TestExplainRefusesWhatIsNoKubeletConfig(t *testing.T) {
	dir := writeInputs(t, map[string]string{
		"summary.json": explainSummary, "pods.json": explainPods,
		"wrapped.json":        `{"kubeletConfig":{"evictionHard":{"memory.available":"2Gi"}}}`,
		"pods-as-config.json": explainPods,
	})
	for _, f := range []string{"wrapped.json", "pods-as-config.json"} {
		_, errOut, code := runCmd("explain", "--config", filepath.Join(dir, f), "--summary", filepath.Join(dir, "summary.json"), "--pods", filepath.Join(dir, "pods.json"))
		if code != cli.ExitError || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, f) {
			t.Errorf("%s: exit %d, stderr %q", f, code, errOut)
		}
	}
}

// lint on the same shapes: the /configz dump is linted as the kubelet's
// final configuration (no identity or 0s findings for what the kubelet
// defaulted), the drop-ins as merged, with what the kubelet does not say.
func TestLintConfigzAndDropIns(t *testing.T) {
	dir := writeInputs(t, map[string]string{
		"configz.json": `{"kubeletconfig":{"evictionHard":{"memory.available":"500m"},"evictionPressureTransitionPeriod":"5m0s","aNewerField":true}}`,
		"config.yaml":  "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {memory.available: 100Mi}\n",
	})
	dropins := filepath.Join(dir, "d")
	if err := os.Mkdir(dropins, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"10.conf":   "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard: {nodefs.available: \"100\"}\nmergeDefaultEvictionSettings: true\nEvictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: 1m}\nevictionMaxPodGracePeriod: 30\n",
		"notes.txt": "not a drop-in\n",
	} {
		if err := os.WriteFile(filepath.Join(dropins, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCmd("lint", "--config", filepath.Join(dir, "configz.json"))
	if code != 1 || errOut != "" {
		t.Fatalf("configz: exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"(quantity-below-one-unit)", "(unknown-field)", "(partial-eviction-hard)"} {
		if !strings.Contains(out, want) {
			t.Errorf("configz: lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "kubelet-config-identity") {
		t.Errorf("configz: identity finding for a dump:\n%s", out)
	}
	out, errOut, code = runCmd("lint", "--config", filepath.Join(dir, "config.yaml"), "--config-dir", dropins, "-o", "json")
	if code != 1 || errOut != "" {
		t.Fatalf("drop-ins: exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{`"rule": "threshold-suspiciously-small"`, `"rule": "merge-defaults-in-drop-in"`,
		`"rule": "drop-in-field-case"`, `"rule": "drop-in-skipped"`, `"field": "evictionHard.nodefs.available"`} {
		if !strings.Contains(out, want) {
			t.Errorf("drop-ins: lacks %s:\n%s", want, out)
		}
	}
}
